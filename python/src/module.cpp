// openmla._C: the nanobind extension. The Pythonic layer (python/openmla/*.py) sits on top.
#include <cstdint>
#include <optional>
#include <string>

#include <cuda_runtime_api.h>
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>

#include "bindings.h"
#include "openmla/error.h"
#include "openmla/kv_format.h"
#include "openmla/version.h"
#include "tensor_args.h"

namespace openmla::python {
namespace {

using namespace nb::literals;

// (dtype, shape, device type, device id) of any tensor, through the same import as every call.
nb::tuple describe(nb::handle obj, const char* name) {
  Input t = input_tensor(obj, name);
  nb::list shape;
  for (int d = 0; d < t.view.ndim; ++d) shape.append(t.view.shape[d]);
  return nb::make_tuple(t.view.dtype, nb::tuple(shape), t.view.device == DeviceType::kCUDA ? "cuda" : "cpu",
                        t.view.device_id);
}

// The format a cache tensor's dtype and row width imply: bf16 -> bf16, fp16 -> fp16, 1-byte
// elements with 576 per token -> fp8_e4m3, with 656 -> fp8_ds_mla.
KVFormat infer_kv_format(nb::handle kv_cache) {
  Input t = input_tensor(kv_cache, "kv_cache");
  const TensorView& v = t.view;
  const int64_t row = v.shape[v.ndim - 1];
  switch (v.dtype) {
    case DType::kBFloat16: return KVFormat::kBF16;
    case DType::kFloat16: return KVFormat::kFP16;
    case DType::kUInt8:
    case DType::kFloat8E4M3:
      if (row == kHeadDimQK) return KVFormat::kFP8E4M3;
      if (row == kDsMlaBytesPerToken) return KVFormat::kFP8DsMla;
      throw nb::value_error(("kv_cache: expected a last dimension of 576 (fp8_e4m3) or 656 (fp8_ds_mla) bytes for "
                             "a 1-byte cache, got shape " + v.shape_str())
                                .c_str());
    default:
      throw nb::type_error((std::string("kv_cache: expected dtype bfloat16, float16, float8_e4m3fn or uint8, got ") +
                            dtype_name(v.dtype))
                               .c_str());
  }
}

// Identifies the capture sequence `stream` is in (0 when it is not capturing). Lets the Python
// layer redo per-step work (planning) once inside each captured graph.
unsigned long long stream_capture_id(std::uintptr_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  unsigned long long id = 0;
  if (cudaStreamGetCaptureInfo(as_stream(stream), &status, &id) != cudaSuccess) {
    (void)cudaGetLastError();  // e.g. the legacy stream queried while another stream captures
    return 0;
  }
  return status == cudaStreamCaptureStatusActive ? id : 0;
}

// The current stream of tensor's framework on tensor's device (see framework_stream), or None.
std::optional<std::uintptr_t> current_stream(nb::handle tensor) {
  Input t = input_tensor(tensor, "tensor");
  std::uintptr_t stream = 0;
  if (t.view.device != DeviceType::kCUDA || !framework_stream(tensor, t.view.device_id, &stream)) return std::nullopt;
  return stream;
}

}  // namespace

void register_tensors(nb::module_& m) {
  nb::enum_<DType>(m, "DType",
                   "Element types of openmla tensors (as DLPack names them; bfloat16 and float8_e4m3fn also reach "
                   "OpenMLA from frameworks that cannot export them, see openmla.view_as).")
      .value("undefined", DType::kUndefined)
      .value("float32", DType::kFloat32)
      .value("bfloat16", DType::kBFloat16)
      .value("float16", DType::kFloat16)
      .value("float8_e4m3fn", DType::kFloat8E4M3)
      .value("uint8", DType::kUInt8)
      .value("int32", DType::kInt32)
      .value("int64", DType::kInt64)
      .value("float64", DType::kFloat64);
  m.def("dtype_size", &dtype_size, "dtype"_a, "Bytes per element of a DType (0 for undefined).");

  nb::class_<Reinterpreted>(m, "Reinterpreted",
                            "A tensor passed with an explicit element type (see openmla.view_as).")
      .def(
          "__init__",
          [](Reinterpreted* self, nb::object tensor, DType dtype) {
            // Import once now so that a bad tensor fails here, naming the call that made it.
            nb::ndarray<nb::ro> check;
            if (!nb::try_cast(tensor, check, /*convert=*/false))
              throw nb::type_error(("tensor: expected a tensor (DLPack: torch, CuPy, JAX or NumPy), got " +
                                    nb::cast<std::string>(nb::str(nb::handle(
                                        reinterpret_cast<PyObject*>(Py_TYPE(tensor.ptr()))).attr("__name__"))))
                                       .c_str());
            if (static_cast<int>(check.itemsize()) != dtype_size(dtype))
              throw nb::type_error((std::string("dtype: expected a type of ") + std::to_string(check.itemsize()) +
                                    " bytes (the tensor's element size), got " + dtype_name(dtype))
                                       .c_str());
            new (self) Reinterpreted{std::move(tensor), dtype};
          },
          "tensor"_a.none(), "dtype"_a,
          "Wraps `tensor` (any DLPack tensor) to be read as `dtype`. Raises TypeError for a non-tensor or an "
          "element size other than dtype's.")
      .def_ro("tensor", &Reinterpreted::tensor, "The wrapped tensor.")
      .def_ro("dtype", &Reinterpreted::dtype, "The element type OpenMLA reads it as.")
      .def_prop_ro(
          "shape", [](const Reinterpreted& r) { return r.tensor.attr("shape"); }, "The wrapped tensor's shape.");

  m.def("describe", &describe, "tensor"_a.none(), "name"_a = "tensor",
        "(DType, shape, 'cpu' | 'cuda', device id) of a tensor, as OpenMLA sees it.");
  m.def("infer_kv_format", &infer_kv_format, "kv_cache"_a.none(),
        "The KVFormat a cache tensor implies: bfloat16 -> bf16, float16 -> fp16, 1-byte elements with a last "
        "dimension of 576 -> fp8_e4m3, of 656 -> fp8_ds_mla. Raises TypeError for another dtype, ValueError for "
        "another 1-byte row width.");
  m.def("has_dlpack_exchange_api", &has_framework_stream, "tensor_type"_a,
        "Whether tensors of exactly this type are viewed through DLPack's C exchange API (PyTorch 2.10 and newer: "
        "no __dlpack__ call per tensor), which also reports the framework's current CUDA stream: the GPU entry "
        "points then take stream=None to mean that stream.");
  m.def("current_stream", &current_stream, "tensor"_a.none(),
        "The current CUDA stream (cudaStream_t as int) of a CUDA tensor's framework on the tensor's device, as the "
        "framework reports it through DLPack's C exchange API; None where it reports none (or for a CPU tensor).");
  m.def("stream_capture_id", &stream_capture_id, "stream"_a,
        "The id of the CUDA graph capture `stream` (a cudaStream_t as int) takes part in, 0 when it is not "
        "capturing.");

  m.attr("DEVICE_ERROR_NEGATIVE_SEQLEN") = static_cast<unsigned>(kDeviceErrorNegativeSeqlen);
  m.attr("DEVICE_ERROR_SEQLEN_BEYOND_TABLE") = static_cast<unsigned>(kDeviceErrorSeqlenBeyondTable);
  m.attr("DEVICE_ERROR_SEQLEN_BELOW_QUERY_LEN") = static_cast<unsigned>(kDeviceErrorSeqlenBelowQueryLen);
  m.attr("DEVICE_ERROR_PAGE_ID_OUT_OF_RANGE") = static_cast<unsigned>(kDeviceErrorPageIdOutOfRange);
  m.attr("DEVICE_ERROR_SLOT_OUT_OF_RANGE") = static_cast<unsigned>(kDeviceErrorSlotOutOfRange);
  m.attr("DEVICE_ERROR_PLAN_MISMATCH") = static_cast<unsigned>(kDeviceErrorPlanMismatch);
  m.attr("DEVICE_ERROR_QUERY_OFFSETS") = static_cast<unsigned>(kDeviceErrorQueryOffsets);
  m.attr("DEVICE_ERROR_SCALE") = static_cast<unsigned>(kDeviceErrorScale);
  m.attr("DEVICE_ERROR_SPARSE_INDEX") = static_cast<unsigned>(kDeviceErrorSparseIndex);
  m.def("describe_device_errors", &describe_device_errors, "word"_a,
        "A device error word as text, e.g. 'negative_seqlen|page_id_out_of_range' ('none' for 0).");
}

}  // namespace openmla::python

NB_MODULE(_C, m) {
  namespace py = openmla::python;
  m.doc() = "OpenMLA native extension (nanobind). Use the `openmla` package rather than this module.";
  // Objects still referenced from module globals when the interpreter exits (e.g. view_as() results
  // kept in a test's parameter table) are not leaks of this binding; don't report them as such.
  nanobind::set_leak_warnings(false);
  m.attr("__version__") = openmla::kVersion;
  py::register_errors(m);
  py::register_tensors(m);
  py::register_decode(m);
  py::register_sparse_decode(m);
  py::register_reference(m);
  py::register_runtime(m);
}
