// KV formats, DecodeShape / DecodePlan (plan + run on caller-owned workspace), the GPU write_kv and move_kv.
#include <cstdint>
#include <string>

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include "bindings.h"
#include "openmla/decode.h"
#include "openmla/kv_format.h"
#include "openmla/move_kv.h"
#include "openmla/write_kv.h"
#include "tensor_args.h"

namespace openmla::python {
namespace {

using namespace nb::literals;

constexpr const char* kDecodeOnCpu = "openmla.reference.decode runs on the CPU";
constexpr const char* kWriteOnCpu = "openmla.reference.write_kv runs on the CPU";
constexpr const char* kMoveOnCpu = "openmla.reference.move_kv runs on the CPU";

std::string shape_repr(const DecodeShape& s) {
  return "DecodeShape(batch_size=" + std::to_string(s.batch_size) + ", q_len=" + std::to_string(s.q_len) +
         ", num_heads=" + std::to_string(s.num_heads) + ", q_dtype=" + dtype_name(s.q_dtype) +
         ", kv_format=" + kv_format_name(s.kv_format) + ", causal=" + (s.causal ? "True" : "False") +
         ", query_layout=" + query_layout_name(s.query_layout) + ", tree_mask=" + tree_mask_name(s.tree_mask) +
         ", device_scales=" + (s.device_scales ? "True" : "False") + ")";
}

}  // namespace

Workspace workspace_arg(nb::handle obj, int device) {
  Workspace ws;
  ws.tensor = output_tensor(obj, "workspace");
  const TensorView& v = ws.tensor.view;
  require_cuda(v, obj, "workspace");
  if (v.device_id != device)
    throw nb::value_error(("workspace: expected a tensor on cuda:" + std::to_string(device) + ", got a tensor on " +
                           (v.device == DeviceType::kCUDA ? "cuda:" : "cpu:") + std::to_string(v.device_id))
                              .c_str());
  ws.bytes = contiguous_bytes(v, "workspace");
  ws.data = v.data;
  return ws;
}

cudaStream_t stream_or_current(const std::optional<std::uintptr_t>& stream, nb::handle like, int device) {
  if (stream) return as_stream(*stream);
  std::uintptr_t current = 0;
  framework_stream(like, device, &current);
  return as_stream(current);
}

void register_decode(nb::module_& m) {
  nb::enum_<KVFormat>(m, "KVFormat", "Paged KV-cache formats (byte layouts: docs/kv-formats.md).")
      .value("bf16", KVFormat::kBF16, "576 bfloat16 per token (1152 B)")
      .value("fp16", KVFormat::kFP16, "576 float16 per token (1152 B)")
      .value("fp8_e4m3", KVFormat::kFP8E4M3, "576 e4m3 per token and one per-tensor float scale (576 B)")
      .value("fp8_ds_mla", KVFormat::kFP8DsMla,
             "512 e4m3 | 4 float32 tile scales | 64 bf16 rope (656 B), FlashMLA / vLLM fp8_ds_mla");

  nb::enum_<Backend>(m, "Backend", "Decode kernel family (DecodePlan's backend argument).")
      .value("auto", Backend::kAuto,
             "OPENMLA_BACKEND env (auto|portable|sm90), else sm90 on compute capability 9.0 (every cache format "
             "and shape), portable elsewhere")
      .value("portable", Backend::kPortable, "mma.sync kernel, sm_80 and newer")
      .value("sm90", Backend::kSm90, "wgmma/TMA kernel, sm_90a only");

  nb::enum_<E4M3Overflow>(m, "E4M3Overflow",
                          "What an fp8_e4m3 write stores for a value that rounds past 448 (write_kv's overflow).")
      .value("saturate", E4M3Overflow::kSaturate, "+-448, NaN -> 0x7F (CUDA's satfinite conversion; vLLM)")
      .value("nan", E4M3Overflow::kNaN,
             "NaN with the value's sign (torch's float -> float8_e4m3fn cast; SGLang), fp8_e4m3 only");

  nb::enum_<Fp8Math>(m, "Fp8Math", "Opt-in FP8 math for per-tensor fp8_e4m3 caches on the sm90 backend.")
      .value("off", Fp8Math::kOff, "bf16/fp16 math on the exactly dequantized cache (default)")
      .value("qk_and_pv", Fp8Math::kQkAndPv,
             "query quantized per row (power-of-two scale); Q K^T and P V on e4m3 tensor cores");
  m.def("fp8_math_name", &fp8_math_name, "math"_a, "The name of an Fp8Math value ('off', 'qk_and_pv').");

  nb::enum_<QueryLayout>(m, "QueryLayout", "How q, out and lse hold a batch's query tokens.")
      .value("uniform", QueryLayout::kUniform,
             "q [b, s_q, h_q, 576], out [b, s_q, h_q, 512], lse [b, s_q, h_q]: s_q tokens per request")
      .value("ragged", QueryLayout::kRagged,
             "q [total_q, h_q, 576], out [total_q, h_q, 512], lse [total_q, h_q]; q_indptr [b + 1] int32: request "
             "r owns rows q_indptr[r] .. q_indptr[r+1] - 1, at most q_len of them (checked on the device)");
  m.def("query_layout_name", &query_layout_name, "layout"_a,
        "The name of a QueryLayout ('uniform', 'ragged').");

  nb::enum_<TreeMask>(m, "TreeMask",
                      "Which draft tokens each query token sees (speculative tree verify). A mask row is one int64: "
                      "bit j set = the token sees draft token j of its request (its j-th query token); every token "
                      "also sees the whole prefix. With a tree mask, causal is ignored and q_len <= "
                      "MAX_TREE_QUERY_LEN. openmla.tree builds the rows.")
      .value("none", TreeMask::kNone, "no tree: causal decides")
      .value("shared", TreeMask::kShared, "mask [s_q]: one tree for every request; a ragged request uses rows 0..n-1")
      .value("per_request", TreeMask::kPerRequest, "mask [b, s_q]: request r's row i at [r, i] (uniform queries)")
      .value("packed", TreeMask::kPacked, "mask [total_q]: one row per packed query token, as q (ragged queries)");
  m.def("tree_mask_name", &tree_mask_name, "mask"_a,
        "The name of a TreeMask ('none', 'shared', 'per_request', 'packed').");

  m.def("kv_format_name", &kv_format_name, "format"_a,
        "The name of a KVFormat ('bf16', 'fp16', 'fp8_e4m3', 'fp8_ds_mla').");
  m.def(
      "parse_kv_format",
      [](const std::string& name) {
        KVFormat f;
        if (!parse_kv_format(name.c_str(), &f))
          throw nb::value_error(
              ("kv_format: expected one of bf16, fp16, fp8_e4m3, fp8_ds_mla, got '" + name + "'").c_str());
        return f;
      },
      "name"_a, "The KVFormat named 'bf16', 'fp16', 'fp8_e4m3' or 'fp8_ds_mla'; ValueError for another name.");
  m.def(
      "kv_bytes_per_token", [](KVFormat f) { return kv_bytes_per_token(f); }, "format"_a,
      "Bytes one token occupies in a cache of this format (1152, 1152, 576, 656).");
  m.def("backend_name", &backend_name, "backend"_a, "The name of a Backend ('auto', 'portable', 'sm90').");
  m.attr("PAGE_SIZE") = kPageSize;
  m.attr("HEAD_DIM_QK") = kHeadDimQK;
  m.attr("HEAD_DIM_V") = kHeadDimV;
  m.attr("ROPE_DIM") = kRopeDim;
  m.attr("MAX_QUERY_LEN") = kMaxQueryLen;
  m.attr("MAX_TREE_QUERY_LEN") = kMaxTreeQueryLen;
  m.attr("DS_MLA_BYTES_PER_TOKEN") = kDsMlaBytesPerToken;

  nb::class_<DecodeShape>(m, "DecodeShape",
                          "Everything about a decode step that is fixed when planning: batch_size (b), q_len (s_q, "
                          "1 to MAX_QUERY_LEN), num_heads (h_q: 8, 16, 32, 64 or 128), q_dtype (bfloat16 or "
                          "float16), kv_format, causal, query_layout and tree_mask. Checked when a DecodePlan is "
                          "built (ValueError).")
      .def(
          "__init__",
          [](DecodeShape* self, int batch_size, int num_heads, int q_len, DType q_dtype, KVFormat kv_format,
             bool causal, QueryLayout query_layout, TreeMask tree_mask, bool device_scales) {
            DecodeShape shape;
            shape.batch_size = batch_size;
            shape.q_len = q_len;
            shape.num_heads = num_heads;
            shape.q_dtype = q_dtype;
            shape.kv_format = kv_format;
            shape.causal = causal;
            shape.query_layout = query_layout;
            shape.tree_mask = tree_mask;
            shape.device_scales = device_scales;
            new (self) DecodeShape(shape);
          },
          "batch_size"_a, "num_heads"_a, "q_len"_a = 1, "q_dtype"_a = DType::kBFloat16,
          "kv_format"_a = KVFormat::kBF16, "causal"_a = true, "query_layout"_a = QueryLayout::kUniform,
          "tree_mask"_a = TreeMask::kNone, "device_scales"_a = false, "A shape; the values are checked by DecodePlan.")
      .def_rw("batch_size", &DecodeShape::batch_size, "Requests per step (b).")
      .def_rw("q_len", &DecodeShape::q_len,
              "Query tokens per request (s_q): 1 for decode, more for MTP verify; ragged: the most of a request.")
      .def_rw("num_heads", &DecodeShape::num_heads, "Query heads (h_q); MLA has one shared KV head.")
      .def_rw("q_dtype", &DecodeShape::q_dtype, "Element type of q and out (DType.bfloat16 or DType.float16).")
      .def_rw("kv_format", &DecodeShape::kv_format, "Format of the paged KV cache.")
      .def_rw("causal", &DecodeShape::causal,
              "Query i of request r (n tokens) sees positions up to cache_seqlens[r] - n + i (else all positions); "
              "ignored with a tree mask.")
      .def_rw("query_layout", &DecodeShape::query_layout, "QueryLayout.uniform or QueryLayout.ragged (q_indptr).")
      .def_rw("tree_mask", &DecodeShape::tree_mask, "The TreeMask layout of run()'s mask (TreeMask.none: no mask).")
      .def_rw("device_scales", &DecodeShape::device_scales,
              "fp8_e4m3 caches: the scales are float32 device tensors of one element (run()'s kv_device_scale, and "
              "q_scale for a float8_e4m3fn query), read on the device so CUDA graphs capture them; required for "
              "float8_e4m3fn queries (out is then bfloat16).")
      .def("__repr__", &shape_repr)
      .def(
          "__eq__",
          [](const DecodeShape& a, nb::handle other) -> nb::object {
            if (!nb::isinstance<DecodeShape>(other)) return nb::borrow(Py_NotImplemented);
            const DecodeShape& b = nb::cast<const DecodeShape&>(other);
            return nb::bool_(a.batch_size == b.batch_size && a.q_len == b.q_len && a.num_heads == b.num_heads &&
                             a.q_dtype == b.q_dtype && a.kv_format == b.kv_format && a.causal == b.causal &&
                             a.query_layout == b.query_layout && a.tree_mask == b.tree_mask &&
                             a.device_scales == b.device_scales);
          },
          nb::sig("def __eq__(self, other: object, /) -> bool"), "Field-by-field equality with another DecodeShape.");

  nb::class_<DecodePlan>(
      m, "DecodePlan",
      "A validated decode configuration for one device. Per step: plan(cache_seqlens, workspace, stream) "
      "(one small kernel, no host sync); per layer: run(...). Both are capturable in a CUDA graph. The workspace "
      "is caller-owned device memory of workspace_bytes bytes (a contiguous CUDA tensor, 256-byte aligned) that "
      "holds the schedule, the split-KV partial rows and the device error word. openmla.Decoder wraps a plan and "
      "its workspace.")
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
          "shape"_a, "backend"_a = Backend::kAuto, "num_parts"_a = 0, "device"_a = -1, "fp8_math"_a = Fp8Math::kOff,
          "Validates the shape and options and queries the device once. num_parts: split-KV parts per query tile "
          "(0 = from the SM count); device: a CUDA device index (-1 = the current device). Raises ValueError for a "
          "bad shape or option, NotImplementedError when there is no CUDA device, the device is older than "
          "compute capability 8.0, or the backend / FP8 math is not available on it.")
      .def_prop_ro("shape", &DecodePlan::shape, "The DecodeShape planned for.")
      .def_prop_ro("backend", &DecodePlan::backend, "The resolved backend (never Backend.auto).")
      .def_prop_ro("num_parts", &DecodePlan::num_parts, "Split-KV parts per query tile.")
      .def_prop_ro("fp8_math", &DecodePlan::fp8_math, "The Fp8Math mode.")
      .def_prop_ro("device", &DecodePlan::device, "The CUDA device index.")
      .def_prop_ro("workspace_bytes", &DecodePlan::workspace_bytes, "Bytes of workspace plan() and run() need.")
      .def(
          "plan",
          [](const DecodePlan& p, nb::handle cache_seqlens, nb::handle workspace,
             std::optional<std::uintptr_t> stream) {
            Input seqlens = input_tensor(cache_seqlens, "cache_seqlens");
            require_cuda(seqlens.view, cache_seqlens, "cache_seqlens", kDecodeOnCpu);
            Workspace ws = workspace_arg(workspace, p.device());
            const cudaStream_t s = stream_or_current(stream, cache_seqlens, p.device());
            nb::gil_scoped_release release;
            p.plan(seqlens.view, ws.data, ws.bytes, s);
          },
          "cache_seqlens"_a.none(), "workspace"_a.none(), "stream"_a.none() = 0,
          "Writes the step's split-KV schedule into the workspace from cache_seqlens (CUDA int32 [b]); one small "
          "kernel on `stream` (a cudaStream_t as int; None: the current stream of cache_seqlens' framework where it "
          "reports one through DLPack's C exchange API, as PyTorch does, else the legacy default stream), no host "
          "synchronisation. Raises ValueError / TypeError for a bad tensor (a CPU tensor or NumPy array included).")
      .def(
          "run",
          [](const DecodePlan& p, nb::handle q, nb::handle kv_cache, nb::handle block_table, nb::handle cache_seqlens,
             float softmax_scale, nb::handle out, nb::handle lse, nb::handle workspace,
             std::optional<std::uintptr_t> stream, float kv_scale, nb::handle q_indptr, nb::handle mask,
             nb::handle q_scale, nb::handle kv_device_scale) {
            Input q_t = input_tensor(q, "q");
            Input kv_t = input_tensor(kv_cache, "kv_cache");
            Input table_t = input_tensor(block_table, "block_table");
            Input seqlens_t = input_tensor(cache_seqlens, "cache_seqlens");
            Output out_t = optional_output(out, "out");
            Output lse_t = optional_output(lse, "lse");
            require_cuda(q_t.view, q, "q", kDecodeOnCpu);
            require_cuda(kv_t.view, kv_cache, "kv_cache", kDecodeOnCpu);
            require_cuda(table_t.view, block_table, "block_table", kDecodeOnCpu);
            require_cuda(seqlens_t.view, cache_seqlens, "cache_seqlens", kDecodeOnCpu);
            require_cuda(out_t.view, out, "out", kDecodeOnCpu);
            require_cuda(lse_t.view, lse, "lse", kDecodeOnCpu);
            Input indptr_t = optional_input(q_indptr, "q_indptr");
            Input mask_t = optional_input(mask, "mask");
            require_cuda(indptr_t.view, q_indptr, "q_indptr", kDecodeOnCpu);
            require_cuda(mask_t.view, mask, "mask", kDecodeOnCpu);
            Input q_scale_t = optional_input(q_scale, "q_scale");
            Input kv_scale_t = optional_input(kv_device_scale, "kv_device_scale");
            require_cuda(q_scale_t.view, q_scale, "q_scale", kDecodeOnCpu);
            require_cuda(kv_scale_t.view, kv_device_scale, "kv_device_scale", kDecodeOnCpu);
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
            args.q_indptr = indptr_t.view;
            args.mask = mask_t.view;
            args.q_scale = q_scale_t.view;
            args.kv.device_scale = kv_scale_t.view;
            const cudaStream_t s = stream_or_current(stream, q, p.device());
            nb::gil_scoped_release release;
            p.run(args, ws.data, ws.bytes, s);
          },
          "q"_a.none(), "kv_cache"_a.none(), "block_table"_a.none(), "cache_seqlens"_a.none(), "softmax_scale"_a,
          "out"_a.none(), "lse"_a.none(), "workspace"_a.none(), "stream"_a.none() = 0, "kv_scale"_a = 1.0f,
          "q_indptr"_a = nb::none(), "mask"_a = nb::none(), "q_scale"_a = nb::none(), "kv_device_scale"_a = nb::none(),
          "One layer's attention with the schedule plan() wrote, into out and lse (both required here). "
          "q [b, s_q, h_q, 576] (q_dtype); kv_cache [num_pages, 64, (1,) W] (kv_format); block_table "
          "[b, max_pages] int32; cache_seqlens [b] int32 (the tensor plan() saw); out [b, s_q, h_q, 512] (q_dtype); "
          "lse [b, s_q, h_q] float32 (any strides); kv_scale: per-tensor scale of an fp8_e4m3 cache; stream as for "
          "plan() (None: q's framework's current stream). QueryLayout.ragged: q [total_q, h_q, 576], out "
          "[total_q, h_q, 512], lse [total_q, h_q] and q_indptr [b + 1] int32. With a TreeMask: mask, int64 rows "
          "in its layout. shape.device_scales: kv_device_scale, the fp8_e4m3 cache's scale as a float32 tensor of one "
          "element (kv_scale is then ignored), and with a float8_e4m3fn q, q_scale likewise (out is bfloat16). "
          "All CUDA tensors on the plan's device. Raises ValueError / TypeError for a bad shape, "
          "dtype, stride or device; bad lengths, offsets or page ids in device memory give NaN rows and set the "
          "device error word.")
      .def_static(
          "reset_device_errors",
          [](nb::handle workspace, std::uintptr_t stream) {
            Output ws = output_tensor(workspace, "workspace");
            require_cuda(ws.view, workspace, "workspace");
            DecodePlan::reset_device_errors(ws.view.data, as_stream(stream));
          },
          "workspace"_a.none(), "stream"_a = 0,
          "Clears the device error word in a plan's workspace (an asynchronous write on `stream`).")
      .def_static(
          "read_device_errors",
          [](nb::handle workspace, std::uintptr_t stream) {
            Input ws = input_tensor(workspace, "workspace");
            require_cuda(ws.view, workspace, "workspace");
            nb::gil_scoped_release release;
            return DecodePlan::read_device_errors(ws.view.data, as_stream(stream));
          },
          "workspace"_a.none(), "stream"_a = 0,
          "Reads the sticky device error word of a plan's workspace as an int of DEVICE_ERROR_* bits "
          "(openmla.DeviceError); synchronizes `stream`.");

  m.def(
      "write_kv",
      [](nb::handle kv_latent, nb::handle k_rope, nb::handle slots, nb::handle kv_cache, KVFormat kv_format,
         float kv_scale, std::optional<std::uintptr_t> stream, nb::handle error_workspace, nb::handle device_scale,
         E4M3Overflow overflow) {
        Input latent_t = input_tensor(kv_latent, "kv_latent");
        Input rope_t = input_tensor(k_rope, "k_rope");
        Input slots_t = input_tensor(slots, "slots");
        Output cache_t = output_tensor(kv_cache, "kv_cache");
        Output err_t = optional_output(error_workspace, "error_workspace");
        Input scale_t = optional_input(device_scale, "kv_scale");
        require_cuda(latent_t.view, kv_latent, "kv_latent", kWriteOnCpu);
        require_cuda(rope_t.view, k_rope, "k_rope", kWriteOnCpu);
        require_cuda(slots_t.view, slots, "slots", kWriteOnCpu);
        require_cuda(cache_t.view, kv_cache, "kv_cache", kWriteOnCpu);
        require_cuda(err_t.view, error_workspace, "error_workspace", "a decode workspace");
        unsigned* error_word = err_t.view.defined() ? DecodePlan::device_error_word(err_t.view.data) : nullptr;
        WriteKVArgs args;
        args.kv_latent = latent_t.view;
        args.k_rope = rope_t.view;
        args.slots = slots_t.view;
        args.cache.data = cache_t.view;
        args.cache.format = kv_format;
        args.cache.scale = kv_scale;
        args.cache.device_scale = scale_t.view;
        args.e4m3_overflow = overflow;
        const cudaStream_t s = stream_or_current(stream, kv_cache, cache_t.view.device_id);
        nb::gil_scoped_release release;
        write_kv(args, s, error_word);
      },
      "kv_latent"_a.none(), "k_rope"_a.none(), "slots"_a.none(), "kv_cache"_a.none(), "kv_format"_a,
      "kv_scale"_a = 1.0f, "stream"_a.none() = 0, "error_workspace"_a = nb::none(), "device_scale"_a = nb::none(),
      "overflow"_a = E4M3Overflow::kSaturate,
      "Scatters n tokens into the paged cache, converting to its format, in one kernel on `stream`. kv_latent "
      "[n, 512] and k_rope [n, 64] (bfloat16, float16 or float32); slots [n] int32/int64 = page * 64 + offset "
      "(negative = skip); kv_cache [num_pages, 64, (1,) W]; kv_scale: an fp8_e4m3 cache stores e4m3(x / kv_scale); "
      "stream: as for DecodePlan.plan (None: kv_cache's framework's current stream). "
      "error_workspace: a decode workspace whose error word gets DEVICE_ERROR_SLOT_OUT_OF_RANGE for slots beyond "
      "the cache (skipped either way). device_scale: fp8_e4m3 only, a float32 one-element tensor on the cache's "
      "device read by the kernel instead of kv_scale; not finite and > 0: nothing is written and the error word "
      "gets DEVICE_ERROR_SCALE. overflow: E4M3Overflow (fp8_e4m3; nan is rejected for other formats). All CUDA "
      "tensors on the current device; ValueError / TypeError otherwise.");

  m.def(
      "move_kv",
      [](nb::handle caches, nb::handle src_slots, nb::handle dst_slots, nb::handle row_indptr, KVFormat kv_format,
         std::optional<std::uintptr_t> stream, nb::handle error_workspace) {
        Input src_t = input_tensor(src_slots, "src_slots");
        Input dst_t = input_tensor(dst_slots, "dst_slots");
        Input indptr_t = input_tensor(row_indptr, "row_indptr");
        Output err_t = optional_output(error_workspace, "error_workspace");
        CacheList list = cache_list(caches, kv_format, kMoveOnCpu);
        require_cuda(src_t.view, src_slots, "src_slots", kMoveOnCpu);
        require_cuda(dst_t.view, dst_slots, "dst_slots", kMoveOnCpu);
        require_cuda(indptr_t.view, row_indptr, "row_indptr", kMoveOnCpu);
        require_cuda(err_t.view, error_workspace, "error_workspace", "a decode workspace");
        unsigned* error_word = err_t.view.defined() ? DecodePlan::device_error_word(err_t.view.data) : nullptr;
        MoveKVArgs args;
        args.src_slots = src_t.view;
        args.dst_slots = dst_t.view;
        args.row_indptr = indptr_t.view;
        args.caches = list.caches.data();
        args.num_caches = static_cast<int>(list.caches.size());
        const cudaStream_t s = stream_or_current(stream, src_slots, list.caches[0].data.device_id);
        nb::gil_scoped_release release;
        move_kv(args, s, error_word);
      },
      "caches"_a.none(), "src_slots"_a.none(), "dst_slots"_a.none(), "row_indptr"_a.none(), "kv_format"_a,
      "stream"_a.none() = 0, "error_workspace"_a = nb::none(),
      "Moves KV rows between slots in every cache of `caches`, in one kernel on `stream` (the compaction after a "
      "speculative tree verify: PagePool.commit_path returns the moves). caches: a KV cache [num_pages, 64, (1,) W] "
      "or a list of 1 to 128 (every layer's), all of kv_format, one page count and page stride; src_slots / "
      "dst_slots [m] int32 or int64 (page * 64 + offset); row_indptr [g + 1] int32: group j (one request) owns rows "
      "row_indptr[j] .. row_indptr[j+1] - 1, at most 128, and reads all its sources before writing any destination. "
      "Whole token rows are copied as raw bytes (any format, no conversion). stream: as for DecodePlan.plan (None: "
      "src_slots' framework's current stream). error_workspace: a decode workspace whose error word gets "
      "DEVICE_ERROR_SLOT_OUT_OF_RANGE for a slot beyond the caches (that row is skipped) and "
      "DEVICE_ERROR_QUERY_OFFSETS for a bad group range (that group moves nothing). Graph-capturable; all CUDA "
      "tensors on the current device; ValueError / TypeError otherwise.");
}

}  // namespace openmla::python
