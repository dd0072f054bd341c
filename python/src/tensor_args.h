// Framework tensors (anything with __dlpack__ or the buffer protocol: PyTorch, CuPy, JAX, NumPy)
// as openmla::TensorView, without copies. Every failure raises a Python exception naming the
// argument: TypeError for "not a tensor" or an element type OpenMLA has no name for, ValueError for
// a device or rank it cannot take. Dtype/shape/stride checks against an operation stay in the C++
// validators (one place for every entry point).
// A tensor whose type offers DLPack's C exchange API (PyTorch 2.10+) is viewed through it, without
// the Python-level __dlpack__ call; everything else goes through __dlpack__ or the buffer protocol.
#pragma once

#include <cstdint>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include "openmla/kv_format.h"
#include "openmla/tensor.h"

namespace openmla::python {

namespace nb = nanobind;

// A tensor whose element type is named explicitly: same memory, shape and strides, dtype replaced
// by one of the same size. This is how bfloat16 / float8 data reach OpenMLA from a framework that
// cannot name those types (NumPy holds bf16 as uint16, fp8 as uint8). Python: openmla.view_as().
struct Reinterpreted {
  nb::object tensor;
  DType dtype = DType::kUndefined;
};

// An imported tensor: the ndarray keeps the producer's memory alive while `view` is in use.
// Read-only inputs accept read-only producers (a NumPy array with writeable=False); outputs don't.
template <typename Array>
struct Imported {
  Array array;
  TensorView view;  // undefined (ndim 0, null data) for an omitted optional argument
};
using Input = Imported<nb::ndarray<nb::ro>>;
using Output = Imported<nb::ndarray<>>;

// `name` is the Python argument's name, used in every message.
Input input_tensor(nb::handle obj, const char* name);
Output output_tensor(nb::handle obj, const char* name);
// None -> undefined view.
Input optional_input(nb::handle obj, const char* name);
Output optional_output(nb::handle obj, const char* name);

// DLPack element type -> DType (kUndefined when OpenMLA has no such type), and a name for any
// DLPack type ("int16", "float8_e5m2", "complex64") for messages.
DType dtype_from_dlpack(nb::dlpack::dtype t) noexcept;
std::string dlpack_dtype_name(nb::dlpack::dtype t);

// The current CUDA stream of the framework `obj` belongs to, on device_id, as the framework reports it
// through DLPack's C exchange API (PyTorch: torch.cuda.current_stream(device_id)). False when obj's
// type offers no such API.
bool framework_stream(nb::handle obj, int device_id, std::uintptr_t* stream);
// Whether tensors of this Python type report their stream that way (and are viewed without __dlpack__).
bool has_framework_stream(nb::handle type);

// Bytes of a contiguous tensor used as raw memory (a workspace); raises ValueError otherwise.
size_t contiguous_bytes(const TensorView& view, const char* name);

// Raises ValueError "<name>: expected a CUDA tensor, got a CPU tensor" ("got a NumPy array" for
// NumPy), followed by " (<hint>)" when a hint is given, unless `view` lives in device memory. The
// GPU entry points call it for every tensor before any CUDA call, so that host data is reported as
// such even where no CUDA driver is loaded. An undefined (omitted optional) view passes.
void require_cuda(const TensorView& view, nb::handle obj, const char* name, const char* hint = nullptr);

// The `caches` argument of move_kv: one cache tensor or a list / tuple of them, each imported as a
// writable tensor named "caches" (a single tensor) or "caches[i]", viewed as a KVCache of `format`.
// With `hint` (GPU entry points), every cache must be a CUDA tensor (require_cuda with that hint).
// The views stay valid while the CacheList lives. ValueError for an empty sequence or more than
// kMaxMoveCaches (128) caches; the library checks each view (shape, format, page stride, overlap).
struct CacheList {
  std::vector<Output> tensors;
  std::vector<KVCache> caches;
};
CacheList cache_list(nb::handle caches, KVFormat format, const char* hint);

}  // namespace openmla::python
