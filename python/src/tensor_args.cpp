#include "tensor_args.h"

#include <string>
#include <type_traits>

#include <nanobind/stl/string.h>

#include "openmla/move_kv.h"
#include "openmla/tensor.h"

namespace openmla::python {
namespace {

using dlpack_code = nb::dlpack::dtype_code;

// ---- DLPack's C exchange API ---------------------------------------------------------------------
// A framework that implements it (PyTorch 2.10 and newer) sets a PyCapsule named "dlpack_exchange_api"
// as `__dlpack_c_exchange_api__` on its tensor type. Through its function table a tensor is viewed
// without calling the Python-level __dlpack__ (which builds a capsule and, for CUDA tensors, queries
// and compares streams: about two microseconds per tensor), and the framework's current stream is
// read without Python. Layouts as in dlpack.h (1.3); only major version 1 is used.
struct ExDevice { int32_t device_type; int32_t device_id; };
struct ExDType { uint8_t code; uint8_t bits; uint16_t lanes; };
struct ExTensor {
  void* data;
  ExDevice device;
  int32_t ndim;
  ExDType dtype;
  int64_t* shape;
  int64_t* strides;
  uint64_t byte_offset;
};
struct ExVersion { uint32_t major; uint32_t minor; };
struct ExHeader { ExVersion version; ExHeader* prev_api; };
struct ExchangeAPI {
  ExHeader header;
  void* managed_tensor_allocator;
  void* managed_tensor_from_py_object_no_sync;
  void* managed_tensor_to_py_object_no_sync;
  int (*dltensor_from_py_object_no_sync)(void* py_object, ExTensor* out);
  int (*current_work_stream)(int32_t device_type, int32_t device_id, void** out_stream);
};
constexpr int32_t kExCPU = 1, kExCUDA = 2, kExCUDAHost = 3, kExCUDAManaged = 13;

// The exchange table of exactly this type (not inherited: a subclass such as a fake or functional
// tensor may hold no real memory), or null. Cached per type; the cache keeps the types alive so
// that an address is never reused for another type.
const ExchangeAPI* exchange_api(PyTypeObject* type) {
  struct Entry { PyTypeObject* type; const ExchangeAPI* api; };
  static Entry cache[8];
  static int used = 0;
  for (int i = 0; i < used; ++i)
    if (cache[i].type == type) return cache[i].api;
  const ExchangeAPI* api = nullptr;
  PyObject* capsule = type->tp_dict ? PyDict_GetItemString(type->tp_dict, "__dlpack_c_exchange_api__") : nullptr;
  if (capsule != nullptr && PyCapsule_CheckExact(capsule)) {
    auto* candidate = static_cast<const ExchangeAPI*>(PyCapsule_GetPointer(capsule, "dlpack_exchange_api"));
    if (candidate == nullptr) PyErr_Clear();
    else if (candidate->header.version.major == 1 && candidate->dltensor_from_py_object_no_sync != nullptr &&
             candidate->current_work_stream != nullptr)
      api = candidate;
  }
  if (used < static_cast<int>(sizeof(cache) / sizeof(cache[0]))) {
    Py_INCREF(reinterpret_cast<PyObject*>(type));
    cache[used++] = {type, api};
  }
  return api;
}

// Views obj through its type's exchange table; false (no Python error set) when the type has none
// or the framework cannot describe this tensor, so that the caller takes the __dlpack__ path.
bool exchange_view(nb::handle obj, TensorView& v, DType& dtype_out, nb::dlpack::dtype& raw) {
  const ExchangeAPI* api = exchange_api(Py_TYPE(obj.ptr()));
  if (api == nullptr) return false;
  ExTensor t{};
  if (api->dltensor_from_py_object_no_sync(obj.ptr(), &t) != 0) {
    PyErr_Clear();
    return false;
  }
  if (t.ndim < 0 || t.ndim > kMaxTensorDims) return false;
  switch (t.device.device_type) {
    case kExCPU:
    case kExCUDAHost: v.device = DeviceType::kCPU; break;
    case kExCUDA:
    case kExCUDAManaged: v.device = DeviceType::kCUDA; break;
    default: return false;  // the __dlpack__ path reports it
  }
  raw.code = t.dtype.code;
  raw.bits = t.dtype.bits;
  raw.lanes = t.dtype.lanes;
  dtype_out = dtype_from_dlpack(raw);
  v.device_id = t.device.device_id;
  v.data = static_cast<char*>(t.data) + t.byte_offset;
  v.dtype = dtype_out;
  v.ndim = t.ndim;
  int64_t compact = 1;
  for (int d = t.ndim - 1; d >= 0; --d) {
    v.shape[d] = t.shape[d];
    v.strides[d] = t.strides != nullptr ? t.strides[d] : compact;
    compact *= t.shape[d];
  }
  return true;
}

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

// The element type and rank every import must have; view.ndim is set, the rest may not be yet.
void check_imported(const TensorView& view, DType dtype, nb::dlpack::dtype raw, const char* name) {
  if (dtype == DType::kUndefined)
    throw nb::type_error((std::string(name) +
                          ": expected dtype float32, float64, bfloat16, float16, float8_e4m3fn, uint8, int32 or "
                          "int64, got " + dlpack_dtype_name(raw))
                             .c_str());
  if (view.ndim == 0 || view.ndim > kMaxTensorDims)
    throw nb::value_error((std::string(name) + ": expected a tensor with 1 to " + std::to_string(kMaxTensorDims) +
                           " dimensions, got " + std::to_string(view.ndim))
                              .c_str());
}

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
  {
    DType dtype = DType::kUndefined;
    nb::dlpack::dtype raw;
    if (exchange_view(obj, result.view, dtype, raw)) {
      check_imported(result.view, dtype, raw, name);
      return result;
    }
  }
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
  TensorView& v = result.view;
  v.ndim = static_cast<int>(a.ndim());
  check_imported(v, dtype, dt, name);

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

bool framework_stream(nb::handle obj, int device_id, std::uintptr_t* stream) {
  const ExchangeAPI* api = exchange_api(Py_TYPE(obj.ptr()));
  if (api == nullptr) return false;
  void* s = nullptr;
  if (api->current_work_stream(kExCUDA, device_id, &s) != 0) {
    PyErr_Clear();
    return false;
  }
  *stream = reinterpret_cast<std::uintptr_t>(s);
  return true;
}

bool has_framework_stream(nb::handle type) {
  return PyType_Check(type.ptr()) && exchange_api(reinterpret_cast<PyTypeObject*>(type.ptr())) != nullptr;
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

CacheList cache_list(nb::handle caches, KVFormat format, const char* hint) {
  CacheList list;
  const bool sequence = nb::isinstance<nb::list>(caches) || nb::isinstance<nb::tuple>(caches);
  const size_t count = sequence ? nb::len(caches) : 1;
  if (count < 1 || count > static_cast<size_t>(kMaxMoveCaches))
    throw nb::value_error(("caches: expected a KV cache or a list of 1 to " + std::to_string(kMaxMoveCaches) +
                           " KV caches, got " + std::to_string(count))
                              .c_str());
  list.tensors.reserve(count);
  list.caches.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    nb::object obj = sequence ? nb::object(caches[i]) : nb::borrow(caches);
    const std::string name = sequence ? "caches[" + std::to_string(i) + "]" : std::string("caches");
    list.tensors.push_back(output_tensor(obj, name.c_str()));
    if (hint != nullptr) require_cuda(list.tensors.back().view, obj, name.c_str(), hint);
    KVCache cache;
    cache.data = list.tensors.back().view;
    cache.format = format;
    list.caches.push_back(cache);
  }
  return list;
}

}  // namespace openmla::python
