#include "tensor_args.h"

#include <string>
#include <type_traits>

#include <nanobind/stl/string.h>

#include "openmla/tensor.h"

namespace openmla::python {
namespace {

using dlpack_code = nb::dlpack::dtype_code;

std::string type_name_of(nb::handle obj) {
  return nb::cast<std::string>(nb::str(nb::handle(reinterpret_cast<PyObject*>(Py_TYPE(obj.ptr()))).attr("__name__")));
}

// Element types a framework may hold without DLPack support for them (NumPy + ml_dtypes,
// PyTorch builds whose DLPack export predates float8): their bits are exported through a same-size
// integer view and renamed here.
struct UnnamedType {
  const char* suffix;      // end of str(tensor.dtype)
  DType dtype;
  const char* numpy_view;  // integer dtype of the same size, as NumPy/CuPy spell it
  const char* torch_view;  // ... and as a torch attribute
};
constexpr UnnamedType kUnnamedTypes[] = {
    {"bfloat16", DType::kBFloat16, "uint16", "int16"},
    {"float8_e4m3fn", DType::kFloat8E4M3, "uint8", "uint8"},
};

// Imports obj (a DLPack producer, a buffer, or a Reinterpreted); returns false if it is no tensor.
template <typename Array>
bool import_array(nb::handle obj, Array& array, DType& dtype_override) {
  if (nb::isinstance<Reinterpreted>(obj)) {
    const auto& r = nb::cast<const Reinterpreted&>(obj);
    dtype_override = r.dtype;
    return nb::try_cast(r.tensor, array, /*convert=*/false);
  }
  if (nb::try_cast(obj, array, /*convert=*/false)) return true;
  if (!nb::hasattr(obj, "dtype") || !nb::hasattr(obj, "view")) return false;
  const nb::object dtype_obj = obj.attr("dtype");
  const std::string dtype_str = nb::cast<std::string>(nb::str(nb::handle(dtype_obj)));  // str(dtype)
  for (const UnnamedType& u : kUnnamedTypes) {
    const std::string suffix = u.suffix;
    if (dtype_str.size() < suffix.size() ||
        dtype_str.compare(dtype_str.size() - suffix.size(), suffix.size(), suffix) != 0)
      continue;
    const std::string module = nb::cast<std::string>(
        nb::handle(reinterpret_cast<PyObject*>(Py_TYPE(obj.ptr()))).attr("__module__"));
    nb::object view;
    if (module.rfind("torch", 0) == 0)
      view = obj.attr("view")(nb::module_::import_("torch").attr(u.torch_view));
    else
      view = obj.attr("view")(u.numpy_view);
    dtype_override = u.dtype;
    return nb::try_cast(view, array, /*convert=*/false);
  }
  return false;
}

template <typename Array>
Imported<Array> import_tensor(nb::handle obj, const char* name) {
  Imported<Array> result;
  DType override_dtype = DType::kUndefined;
  if (!import_array(obj, result.array, override_dtype)) {
    if constexpr (!std::is_same_v<Array, nb::ndarray<nb::ro>>) {
      nb::ndarray<nb::ro> read_only;
      DType ignored = DType::kUndefined;
      if (import_array(obj, read_only, ignored))
        throw nb::value_error(
            (std::string(name) + ": expected a writable tensor (an output), got a read-only " + type_name_of(obj))
                .c_str());
    }
    throw nb::type_error(
        (std::string(name) + ": expected a tensor (DLPack: torch, CuPy, JAX or NumPy), got " + type_name_of(obj))
            .c_str());
  }
  const auto& a = result.array;
  const nb::dlpack::dtype dt = a.dtype();
  DType dtype = dtype_from_dlpack(dt);
  if (override_dtype != DType::kUndefined) {
    if (static_cast<int>(a.itemsize()) != dtype_size(override_dtype) || dt.lanes != 1)
      throw nb::type_error((std::string(name) + ": expected " + std::to_string(dtype_size(override_dtype)) +
                            "-byte elements to view as " + dtype_name(override_dtype) + ", got " +
                            dlpack_dtype_name(dt))
                               .c_str());
    dtype = override_dtype;
  }
  if (dtype == DType::kUndefined)
    throw nb::type_error((std::string(name) +
                          ": expected dtype float32, float64, bfloat16, float16, float8_e4m3fn, uint8, int32 or "
                          "int64, got " + dlpack_dtype_name(dt))
                             .c_str());
  if (a.ndim() == 0 || a.ndim() > static_cast<size_t>(kMaxTensorDims))
    throw nb::value_error((std::string(name) + ": expected a tensor with 1 to " + std::to_string(kMaxTensorDims) +
                           " dimensions, got " + std::to_string(a.ndim()))
                              .c_str());

  TensorView& v = result.view;
  switch (a.device_type()) {
    case nb::device::cpu::value:
    case nb::device::cuda_host::value:  // pinned host memory: a CPU tensor to the host code
      v.device = DeviceType::kCPU;
      break;
    case nb::device::cuda::value:
    case nb::device::cuda_managed::value:
      v.device = DeviceType::kCUDA;
      break;
    default:
      throw nb::value_error((std::string(name) + ": expected a CPU or CUDA tensor, got DLPack device type " +
                             std::to_string(a.device_type()))
                                .c_str());
  }
  v.device_id = a.device_id();
  v.data = const_cast<void*>(static_cast<const void*>(a.data()));
  v.dtype = dtype;
  v.ndim = static_cast<int>(a.ndim());
  for (int d = 0; d < v.ndim; ++d) {
    v.shape[d] = static_cast<int64_t>(a.shape(d));
    v.strides[d] = a.stride(d);  // elements, as DLPack (nanobind fills compact strides if absent)
  }
  return result;
}

}  // namespace

DType dtype_from_dlpack(nb::dlpack::dtype t) noexcept {
  if (t.lanes != 1) return DType::kUndefined;
  switch (static_cast<dlpack_code>(t.code)) {
    case dlpack_code::Float:
      return t.bits == 32 ? DType::kFloat32 : t.bits == 16 ? DType::kFloat16 : t.bits == 64 ? DType::kFloat64
                                                                                            : DType::kUndefined;
    case dlpack_code::Bfloat: return t.bits == 16 ? DType::kBFloat16 : DType::kUndefined;
    case dlpack_code::Float8_E4M3FN: return t.bits == 8 ? DType::kFloat8E4M3 : DType::kUndefined;
    case dlpack_code::UInt: return t.bits == 8 ? DType::kUInt8 : DType::kUndefined;
    case dlpack_code::Int:
      return t.bits == 32 ? DType::kInt32 : t.bits == 64 ? DType::kInt64 : DType::kUndefined;
    default: return DType::kUndefined;
  }
}

std::string dlpack_dtype_name(nb::dlpack::dtype t) {
  std::string base;
  switch (static_cast<dlpack_code>(t.code)) {
    case dlpack_code::Int: base = "int"; break;
    case dlpack_code::UInt: base = "uint"; break;
    case dlpack_code::Float: base = "float"; break;
    case dlpack_code::Bfloat: base = "bfloat"; break;
    case dlpack_code::Complex: base = "complex"; break;
    case dlpack_code::Bool: return "bool";
    case dlpack_code::Float8_E3M4: return "float8_e3m4";
    case dlpack_code::Float8_E4M3: return "float8_e4m3";
    case dlpack_code::Float8_E4M3B11FNUZ: return "float8_e4m3b11fnuz";
    case dlpack_code::Float8_E4M3FN: return "float8_e4m3fn";
    case dlpack_code::Float8_E4M3FNUZ: return "float8_e4m3fnuz";
    case dlpack_code::Float8_E5M2: return "float8_e5m2";
    case dlpack_code::Float8_E5M2FNUZ: return "float8_e5m2fnuz";
    case dlpack_code::Float8_E8M0FNU: return "float8_e8m0fnu";
    default: base = "dlpack_code" + std::to_string(t.code) + "_"; break;
  }
  std::string s = base + std::to_string(t.bits);
  if (t.lanes != 1) s += "x" + std::to_string(t.lanes);
  return s;
}

Input input_tensor(nb::handle obj, const char* name) { return import_tensor<nb::ndarray<nb::ro>>(obj, name); }
Output output_tensor(nb::handle obj, const char* name) { return import_tensor<nb::ndarray<>>(obj, name); }

Input optional_input(nb::handle obj, const char* name) {
  return obj.is_none() ? Input{} : input_tensor(obj, name);
}
Output optional_output(nb::handle obj, const char* name) {
  return obj.is_none() ? Output{} : output_tensor(obj, name);
}

void require_cuda(const TensorView& view, nb::handle obj, const char* name, const char* hint) {
  if (!view.defined() || view.device == DeviceType::kCUDA) return;
  nb::handle producer = obj;
  if (nb::isinstance<Reinterpreted>(obj)) producer = nb::cast<const Reinterpreted&>(obj).tensor;
  const std::string module =
      nb::cast<std::string>(nb::handle(reinterpret_cast<PyObject*>(Py_TYPE(producer.ptr()))).attr("__module__"));
  const bool numpy = module == "numpy" || module.rfind("numpy.", 0) == 0;
  std::string message = std::string(name) + ": expected a CUDA tensor, got " + (numpy ? "a NumPy array" : "a CPU tensor");
  if (hint != nullptr) message += std::string(" (") + hint + ")";
  throw nb::value_error(message.c_str());
}

size_t contiguous_bytes(const TensorView& view, const char* name) {
  if (!view.is_contiguous())
    throw nb::value_error((std::string(name) + ": expected a contiguous tensor, got strides " + view.strides_str() +
                           " for shape " + view.shape_str())
                              .c_str());
  return static_cast<size_t>(view.numel()) * static_cast<size_t>(dtype_size(view.dtype));
}

}  // namespace openmla::python
