// SparseDecodeShape / SparseDecodePlan (sparse top-k decode: plan + run on caller-owned workspace).
#include <cstdint>
#include <string>

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include "bindings.h"
#include "openmla/kv_format.h"
#include "openmla/sparse_decode.h"
#include "tensor_args.h"

namespace openmla::python {
namespace {

using namespace nb::literals;

constexpr const char* kSparseOnCpu = "openmla.reference.sparse_decode runs on the CPU";

const char* py_bool(bool b) { return b ? "True" : "False"; }

std::string sparse_shape_repr(const SparseDecodeShape& s) {
  return "SparseDecodeShape(batch_size=" + std::to_string(s.batch_size) + ", q_len=" + std::to_string(s.q_len) +
         ", num_heads=" + std::to_string(s.num_heads) + ", q_dtype=" + dtype_name(s.q_dtype) +
         ", kv_format=" + kv_format_name(s.kv_format) + ", topk=" + std::to_string(s.topk) +
         ", extra_topk=" + std::to_string(s.extra_topk) + ", topk_length=" + py_bool(s.topk_length) +
         ", extra_topk_length=" + py_bool(s.extra_topk_length) + ", attn_sink=" + py_bool(s.attn_sink) + ")";
}

bool same_shape(const SparseDecodeShape& a, const SparseDecodeShape& b) {
  return a.batch_size == b.batch_size && a.q_len == b.q_len && a.num_heads == b.num_heads && a.q_dtype == b.q_dtype &&
         a.kv_format == b.kv_format && a.topk == b.topk && a.extra_topk == b.extra_topk &&
         a.topk_length == b.topk_length && a.extra_topk_length == b.extra_topk_length && a.attn_sink == b.attn_sink;
}

}  // namespace

void register_sparse_decode(nb::module_& m) {
  m.attr("MAX_SPARSE_QUERY_LEN") = kMaxSparseQueryLen;
  m.attr("MAX_SPARSE_TOPK") = kMaxSparseTopk;

  nb::class_<SparseDecodeShape>(
      m, "SparseDecodeShape",
      "Everything about a sparse top-k decode step that is fixed when planning: batch_size (b), q_len (s_q, 1 to "
      "MAX_SPARSE_QUERY_LEN), num_heads (h_q, 1 to 128), q_dtype (bfloat16 or float16), kv_format (every format; the "
      "extra cache has the same), topk (indices per query token, 1 to MAX_SPARSE_TOPK), extra_topk (indices into the "
      "extra cache; 0 = none), and whether plan() takes topk_length / extra_topk_length and run() an attn_sink. "
      "Checked when a SparseDecodePlan is built (ValueError).")
      .def(
          "__init__",
          [](SparseDecodeShape* self, int batch_size, int num_heads, int topk, int q_len, DType q_dtype,
             KVFormat kv_format, int extra_topk, bool topk_length, bool extra_topk_length, bool attn_sink) {
            SparseDecodeShape shape;
            shape.batch_size = batch_size;
            shape.q_len = q_len;
            shape.num_heads = num_heads;
            shape.q_dtype = q_dtype;
            shape.kv_format = kv_format;
            shape.topk = topk;
            shape.extra_topk = extra_topk;
            shape.topk_length = topk_length;
            shape.extra_topk_length = extra_topk_length;
            shape.attn_sink = attn_sink;
            new (self) SparseDecodeShape(shape);
          },
          "batch_size"_a, "num_heads"_a, "topk"_a, "q_len"_a = 1, "q_dtype"_a = DType::kBFloat16,
          "kv_format"_a = KVFormat::kFP8DsMla, "extra_topk"_a = 0, "topk_length"_a = false,
          "extra_topk_length"_a = false, "attn_sink"_a = false,
          "A shape; the values are checked by SparseDecodePlan.")
      .def_rw("batch_size", &SparseDecodeShape::batch_size, "Requests per step (b).")
      .def_rw("q_len", &SparseDecodeShape::q_len, "Query tokens per request (s_q).")
      .def_rw("num_heads", &SparseDecodeShape::num_heads, "Query heads (h_q).")
      .def_rw("q_dtype", &SparseDecodeShape::q_dtype, "bfloat16 or float16; out has the same dtype.")
      .def_rw("kv_format", &SparseDecodeShape::kv_format, "The format of the cache and of the extra cache.")
      .def_rw("topk", &SparseDecodeShape::topk, "Indices per query token into the cache.")
      .def_rw("extra_topk", &SparseDecodeShape::extra_topk, "Indices per query token into the extra cache (0: none).")
      .def_rw("topk_length", &SparseDecodeShape::topk_length, "plan() takes topk_length [b] int32.")
      .def_rw("extra_topk_length", &SparseDecodeShape::extra_topk_length,
              "plan() takes extra_topk_length [b] int32 (needs extra_topk > 0).")
      .def_rw("attn_sink", &SparseDecodeShape::attn_sink, "run() takes attn_sink [h_q] float32.")
      .def("__repr__", &sparse_shape_repr)
      .def(
          "__eq__",
          [](const SparseDecodeShape& a, nb::handle other) -> nb::object {
            if (!nb::isinstance<SparseDecodeShape>(other)) return nb::borrow(Py_NotImplemented);
            return nb::bool_(same_shape(a, nb::cast<const SparseDecodeShape&>(other)));
          },
          nb::sig("def __eq__(self, other: object, /) -> bool"), "Field-by-field equality with another SparseDecodeShape.");

  nb::class_<SparseDecodePlan>(
      m, "SparseDecodePlan",
      "A validated sparse decode configuration for one device. Per step: plan(topk_length, extra_topk_length, "
      "workspace, stream) (one small kernel, no host sync); per layer: run(...). Both are capturable in a CUDA graph. "
      "The workspace is caller-owned device memory of workspace_bytes bytes (a contiguous CUDA tensor, 256-byte "
      "aligned). openmla.SparseDecoder wraps a plan and its workspace.")
      .def(
          "__init__",
          [](SparseDecodePlan* self, const SparseDecodeShape& shape, Backend backend, int num_parts, int device) {
            DecodeOptions options;
            options.backend = backend;
            options.num_parts = num_parts;
            new (self) SparseDecodePlan(shape, options, device);
          },
          "shape"_a, "backend"_a = Backend::kAuto, "num_parts"_a = 0, "device"_a = -1,
          "Validates the shape and options and queries the device once (backend and num_parts as for DecodePlan). "
          "Raises ValueError for a bad shape or option, NotImplementedError when there is no CUDA device or the "
          "kernels are not available on it or in this build.")
      .def_prop_ro("shape", &SparseDecodePlan::shape, "The SparseDecodeShape planned for.")
      .def_prop_ro("backend", &SparseDecodePlan::backend, "The resolved backend (never Backend.auto).")
      .def_prop_ro("num_parts", &SparseDecodePlan::num_parts, "Work parts per query tile.")
      .def_prop_ro("device", &SparseDecodePlan::device, "The CUDA device index.")
      .def_prop_ro("workspace_bytes", &SparseDecodePlan::workspace_bytes, "Bytes of workspace plan() and run() need.")
      .def(
          "plan",
          [](const SparseDecodePlan& p, nb::handle topk_length, nb::handle extra_topk_length, nb::handle workspace,
             std::optional<std::uintptr_t> stream) {
            Input lengths = optional_input(topk_length, "topk_length");
            Input extra_lengths = optional_input(extra_topk_length, "extra_topk_length");
            require_cuda(lengths.view, topk_length, "topk_length", kSparseOnCpu);
            require_cuda(extra_lengths.view, extra_topk_length, "extra_topk_length", kSparseOnCpu);
            Workspace ws = workspace_arg(workspace, p.device());
            const cudaStream_t s = stream_or_current(stream, workspace, p.device());
            nb::gil_scoped_release release;
            p.plan(lengths.view, extra_lengths.view, ws.data, ws.bytes, s);
          },
          "topk_length"_a.none(), "extra_topk_length"_a.none(), "workspace"_a.none(), "stream"_a.none() = 0,
          "Writes the step's schedule into the workspace from topk_length / extra_topk_length (CUDA int32 [b], or "
          "None where the shape has none); one small kernel on `stream` (a cudaStream_t as int; None: the current "
          "stream of the workspace's framework where it reports one, as PyTorch does, else the legacy default "
          "stream), no host synchronisation. Raises ValueError / TypeError for a bad tensor.")
      .def(
          "run",
          [](const SparseDecodePlan& p, nb::handle q, nb::handle kv_cache, nb::handle indices, float softmax_scale,
             nb::handle out, nb::handle lse, nb::handle workspace, std::optional<std::uintptr_t> stream, float kv_scale,
             nb::handle kv_device_scale, nb::handle extra_kv_cache, nb::handle extra_indices, nb::handle attn_sink) {
            Input q_t = input_tensor(q, "q");
            Input kv_t = input_tensor(kv_cache, "kv_cache");
            Input indices_t = input_tensor(indices, "indices");
            Output out_t = optional_output(out, "out");
            Output lse_t = optional_output(lse, "lse");
            Input scale_t = optional_input(kv_device_scale, "kv_device_scale");
            Input extra_t = optional_input(extra_kv_cache, "extra_kv_cache");
            Input extra_indices_t = optional_input(extra_indices, "extra_indices");
            Input sink_t = optional_input(attn_sink, "attn_sink");
            require_cuda(q_t.view, q, "q", kSparseOnCpu);
            require_cuda(kv_t.view, kv_cache, "kv_cache", kSparseOnCpu);
            require_cuda(indices_t.view, indices, "indices", kSparseOnCpu);
            require_cuda(out_t.view, out, "out", kSparseOnCpu);
            require_cuda(lse_t.view, lse, "lse", kSparseOnCpu);
            require_cuda(scale_t.view, kv_device_scale, "kv_device_scale", kSparseOnCpu);
            require_cuda(extra_t.view, extra_kv_cache, "extra_kv_cache", kSparseOnCpu);
            require_cuda(extra_indices_t.view, extra_indices, "extra_indices", kSparseOnCpu);
            require_cuda(sink_t.view, attn_sink, "attn_sink", kSparseOnCpu);
            Workspace ws = workspace_arg(workspace, p.device());
            SparseDecodeArgs args;
            args.q = q_t.view;
            args.kv.data = kv_t.view;
            args.kv.format = p.shape().kv_format;
            args.kv.scale = kv_scale;
            args.kv.device_scale = scale_t.view;
            args.indices = indices_t.view;
            if (extra_t.view.defined()) {
              args.extra_kv = args.kv;
              args.extra_kv.data = extra_t.view;
            }
            args.extra_indices = extra_indices_t.view;
            args.attn_sink = sink_t.view;
            args.softmax_scale = softmax_scale;
            args.out = out_t.view;
            args.lse = lse_t.view;
            const cudaStream_t s = stream_or_current(stream, q, p.device());
            nb::gil_scoped_release release;
            p.run(args, ws.data, ws.bytes, s);
          },
          "q"_a.none(), "kv_cache"_a.none(), "indices"_a.none(), "softmax_scale"_a, "out"_a.none(), "lse"_a.none(),
          "workspace"_a.none(), "stream"_a.none() = 0, "kv_scale"_a = 1.0f, "kv_device_scale"_a = nb::none(),
          "extra_kv_cache"_a = nb::none(), "extra_indices"_a = nb::none(), "attn_sink"_a = nb::none(),
          "One layer's sparse attention with the schedule plan() wrote, into out and lse (both required here). "
          "q [b, s_q, h_q, 576] (q_dtype; stride(0) == s_q * stride(1)); kv_cache [num_pages, page_block_size, (1,) W] "
          "(kv_format, any page block size); indices [b, s_q, topk] int32 slots (page * page_block_size + offset; -1 "
          "skips); out [b, s_q, h_q, 512] (q_dtype); lse [b, s_q, h_q] float32 (any strides). kv_scale / "
          "kv_device_scale: an fp8_e4m3 cache's scale, a float or a float32 CUDA tensor of one element (read on the "
          "device), for both caches. extra_kv_cache / extra_indices [b, s_q, extra_topk] with extra_topk > 0; "
          "attn_sink [h_q] float32 with shape.attn_sink. Stream as for plan() (None: q's framework's current "
          "stream). Raises ValueError / TypeError for a bad shape, dtype, stride or device; bad indices or lengths in "
          "device memory give NaN rows and set the device error word.")
      .def_static(
          "reset_device_errors",
          [](nb::handle workspace, std::uintptr_t stream) {
            Output ws = output_tensor(workspace, "workspace");
            require_cuda(ws.view, workspace, "workspace");
            SparseDecodePlan::reset_device_errors(ws.view.data, as_stream(stream));
          },
          "workspace"_a.none(), "stream"_a = 0,
          "Clears the device error word in a plan's workspace (an asynchronous write on `stream`).")
      .def_static(
          "read_device_errors",
          [](nb::handle workspace, std::uintptr_t stream) {
            Input ws = input_tensor(workspace, "workspace");
            require_cuda(ws.view, workspace, "workspace");
            nb::gil_scoped_release release;
            return SparseDecodePlan::read_device_errors(ws.view.data, as_stream(stream));
          },
          "workspace"_a.none(), "stream"_a = 0,
          "Reads the sticky device error word of a plan's workspace as an int of DEVICE_ERROR_* bits "
          "(openmla.DeviceError); synchronizes `stream`.");
}

}  // namespace openmla::python
