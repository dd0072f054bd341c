// KV formats, DecodeShape / DecodePlan (plan + run on caller-owned workspace) and the GPU write_kv.
#include <cstdint>
#include <string>

#include <nanobind/stl/string.h>

#include "bindings.h"
#include "openmla/decode.h"
#include "openmla/kv_format.h"
#include "openmla/write_kv.h"
#include "tensor_args.h"

namespace openmla::python {
namespace {

using namespace nb::literals;

// Raw device memory for the plan: a contiguous CUDA tensor on the plan's device (any dtype).
struct Workspace {
  Output tensor;
  void* data = nullptr;
  size_t bytes = 0;
};

Workspace workspace_arg(nb::handle obj, int device) {
  Workspace ws;
  ws.tensor = output_tensor(obj, "workspace");
  const TensorView& v = ws.tensor.view;
  if (v.device != DeviceType::kCUDA || v.device_id != device)
    throw nb::value_error(("workspace: expected a tensor on cuda:" + std::to_string(device) + ", got a tensor on " +
                           (v.device == DeviceType::kCUDA ? "cuda:" : "cpu:") + std::to_string(v.device_id))
                              .c_str());
  ws.bytes = contiguous_bytes(v, "workspace");
  ws.data = v.data;
  return ws;
}

std::string shape_repr(const DecodeShape& s) {
  return "DecodeShape(batch_size=" + std::to_string(s.batch_size) + ", q_len=" + std::to_string(s.q_len) +
         ", num_heads=" + std::to_string(s.num_heads) + ", q_dtype=" + dtype_name(s.q_dtype) +
         ", kv_format=" + kv_format_name(s.kv_format) + ", causal=" + (s.causal ? "True" : "False") + ")";
}

}  // namespace

void register_decode(nb::module_& m) {
  nb::enum_<KVFormat>(m, "KVFormat", "Paged KV-cache formats (byte layouts: docs/kv-formats.md).")
      .value("bf16", KVFormat::kBF16, "576 bfloat16 per token (1152 B)")
      .value("fp16", KVFormat::kFP16, "576 float16 per token (1152 B)")
      .value("fp8_e4m3", KVFormat::kFP8E4M3, "576 e4m3 per token and one per-tensor float scale (576 B)")
      .value("fp8_ds_mla", KVFormat::kFP8DsMla,
             "512 e4m3 | 4 float32 tile scales | 64 bf16 rope (656 B), FlashMLA / vLLM fp8_ds_mla");

  nb::enum_<Backend>(m, "Backend", "Decode kernel family.")
      .value("auto", Backend::kAuto,
             "OPENMLA_BACKEND env (auto|portable|sm90), else sm90 on compute capability 9.0 (every cache format "
             "and shape), portable elsewhere")
      .value("portable", Backend::kPortable, "mma.sync kernel, sm_80 and newer")
      .value("sm90", Backend::kSm90, "wgmma/TMA kernel, sm_90a only");

  nb::enum_<Fp8Math>(m, "Fp8Math", "Opt-in FP8 math for per-tensor fp8_e4m3 caches on the sm90 backend.")
      .value("off", Fp8Math::kOff, "bf16/fp16 math on the exactly dequantized cache (default)")
      .value("qk_and_pv", Fp8Math::kQkAndPv,
             "query quantized per row (power-of-two scale); Q K^T and P V on e4m3 tensor cores");
  m.def("fp8_math_name", &fp8_math_name, "math"_a);

  m.def("kv_format_name", &kv_format_name, "format"_a);
  m.def(
      "parse_kv_format",
      [](const std::string& name) {
        KVFormat f;
        if (!parse_kv_format(name.c_str(), &f))
          throw nb::value_error(
              ("kv_format: expected one of bf16, fp16, fp8_e4m3, fp8_ds_mla, got '" + name + "'").c_str());
        return f;
      },
      "name"_a);
  m.def("kv_bytes_per_token", [](KVFormat f) { return kv_bytes_per_token(f); }, "format"_a);
  m.def("backend_name", &backend_name, "backend"_a);
  m.attr("PAGE_SIZE") = kPageSize;
  m.attr("HEAD_DIM_QK") = kHeadDimQK;
  m.attr("HEAD_DIM_V") = kHeadDimV;
  m.attr("ROPE_DIM") = kRopeDim;
  m.attr("MAX_QUERY_LEN") = kMaxQueryLen;
  m.attr("DS_MLA_BYTES_PER_TOKEN") = kDsMlaBytesPerToken;

  nb::class_<DecodeShape>(m, "DecodeShape", "Everything about a decode step that is fixed when planning.")
      .def(
          "__init__",
          [](DecodeShape* self, int batch_size, int num_heads, int q_len, DType q_dtype, KVFormat kv_format,
             bool causal) {
            new (self) DecodeShape{batch_size, q_len, num_heads, q_dtype, kv_format, causal};
          },
          "batch_size"_a, "num_heads"_a, "q_len"_a = 1, "q_dtype"_a = DType::kBFloat16,
          "kv_format"_a = KVFormat::kBF16, "causal"_a = true)
      .def_rw("batch_size", &DecodeShape::batch_size)
      .def_rw("q_len", &DecodeShape::q_len)
      .def_rw("num_heads", &DecodeShape::num_heads)
      .def_rw("q_dtype", &DecodeShape::q_dtype)
      .def_rw("kv_format", &DecodeShape::kv_format)
      .def_rw("causal", &DecodeShape::causal)
      .def("__repr__", &shape_repr)
      .def("__eq__", [](const DecodeShape& a, const DecodeShape& b) {
        return a.batch_size == b.batch_size && a.q_len == b.q_len && a.num_heads == b.num_heads &&
               a.q_dtype == b.q_dtype && a.kv_format == b.kv_format && a.causal == b.causal;
      });

  nb::class_<DecodePlan>(
      m, "DecodePlan",
      "A validated decode configuration for one device. Per step: plan(cache_seqlens, workspace, stream) "
      "(one small kernel, no host sync); per layer: run(...). Both are capturable in a CUDA graph.")
      .def(
          "__init__",
          [](DecodePlan* self, const DecodeShape& shape, Backend backend, int num_parts, int device,
             Fp8Math fp8_math) {
            DecodeOptions options;
            options.backend = backend;
            options.num_parts = num_parts;
            options.fp8_math = fp8_math;
            new (self) DecodePlan(shape, options, device);
          },
          "shape"_a, "backend"_a = Backend::kAuto, "num_parts"_a = 0, "device"_a = -1, "fp8_math"_a = Fp8Math::kOff)
      .def_prop_ro("shape", &DecodePlan::shape)
      .def_prop_ro("backend", &DecodePlan::backend)
      .def_prop_ro("num_parts", &DecodePlan::num_parts)
      .def_prop_ro("fp8_math", &DecodePlan::fp8_math)
      .def_prop_ro("device", &DecodePlan::device)
      .def_prop_ro("workspace_bytes", &DecodePlan::workspace_bytes)
      .def(
          "plan",
          [](const DecodePlan& p, nb::handle cache_seqlens, nb::handle workspace, std::uintptr_t stream) {
            Input seqlens = input_tensor(cache_seqlens, "cache_seqlens");
            Workspace ws = workspace_arg(workspace, p.device());
            nb::gil_scoped_release release;
            p.plan(seqlens.view, ws.data, ws.bytes, as_stream(stream));
          },
          "cache_seqlens"_a.none(), "workspace"_a.none(), "stream"_a = 0)
      .def(
          "run",
          [](const DecodePlan& p, nb::handle q, nb::handle kv_cache, nb::handle block_table, nb::handle cache_seqlens,
             float softmax_scale, nb::handle out, nb::handle lse, nb::handle workspace, std::uintptr_t stream,
             float kv_scale) {
            Input q_t = input_tensor(q, "q");
            Input kv_t = input_tensor(kv_cache, "kv_cache");
            Input table_t = input_tensor(block_table, "block_table");
            Input seqlens_t = input_tensor(cache_seqlens, "cache_seqlens");
            Output out_t = optional_output(out, "out");
            Output lse_t = optional_output(lse, "lse");
            Workspace ws = workspace_arg(workspace, p.device());
            DecodeArgs args;
            args.q = q_t.view;
            args.kv.data = kv_t.view;
            args.kv.format = p.shape().kv_format;
            args.kv.scale = kv_scale;
            args.block_table = table_t.view;
            args.cache_seqlens = seqlens_t.view;
            args.softmax_scale = softmax_scale;
            args.out = out_t.view;
            args.lse = lse_t.view;
            nb::gil_scoped_release release;
            p.run(args, ws.data, ws.bytes, as_stream(stream));
          },
          "q"_a.none(), "kv_cache"_a.none(), "block_table"_a.none(), "cache_seqlens"_a.none(), "softmax_scale"_a, "out"_a.none(), "lse"_a.none(),
          "workspace"_a.none(), "stream"_a = 0, "kv_scale"_a = 1.0f)
      .def_static(
          "reset_device_errors",
          [](nb::handle workspace, std::uintptr_t stream) {
            Output ws = output_tensor(workspace, "workspace");
            if (ws.view.device != DeviceType::kCUDA)
              throw nb::value_error("workspace: expected a CUDA tensor, got a CPU tensor");
            DecodePlan::reset_device_errors(ws.view.data, as_stream(stream));
          },
          "workspace"_a.none(), "stream"_a = 0)
      .def_static(
          "read_device_errors",
          [](nb::handle workspace, std::uintptr_t stream) {
            Input ws = input_tensor(workspace, "workspace");
            if (ws.view.device != DeviceType::kCUDA)
              throw nb::value_error("workspace: expected a CUDA tensor, got a CPU tensor");
            nb::gil_scoped_release release;
            return DecodePlan::read_device_errors(ws.view.data, as_stream(stream));
          },
          "workspace"_a.none(), "stream"_a = 0, "Reads the sticky DeviceErrorBits word (synchronizes the stream).");

  m.def(
      "write_kv",
      [](nb::handle kv_latent, nb::handle k_rope, nb::handle slots, nb::handle kv_cache, KVFormat kv_format,
         float kv_scale, std::uintptr_t stream, nb::handle error_workspace) {
        Input latent_t = input_tensor(kv_latent, "kv_latent");
        Input rope_t = input_tensor(k_rope, "k_rope");
        Input slots_t = input_tensor(slots, "slots");
        Output cache_t = output_tensor(kv_cache, "kv_cache");
        Output err_t = optional_output(error_workspace, "error_workspace");
        unsigned* error_word = nullptr;
        if (err_t.view.defined()) {
          if (err_t.view.device != DeviceType::kCUDA)
            throw nb::value_error("error_workspace: expected a CUDA tensor (a decode workspace), got a CPU tensor");
          error_word = DecodePlan::device_error_word(err_t.view.data);
        }
        WriteKVArgs args;
        args.kv_latent = latent_t.view;
        args.k_rope = rope_t.view;
        args.slots = slots_t.view;
        args.cache.data = cache_t.view;
        args.cache.format = kv_format;
        args.cache.scale = kv_scale;
        nb::gil_scoped_release release;
        write_kv(args, as_stream(stream), error_word);
      },
      "kv_latent"_a.none(), "k_rope"_a.none(), "slots"_a.none(), "kv_cache"_a.none(), "kv_format"_a, "kv_scale"_a = 1.0f, "stream"_a = 0,
      "error_workspace"_a = nb::none());
}

}  // namespace openmla::python
