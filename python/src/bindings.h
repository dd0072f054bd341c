// The pieces of the openmla._C extension, one registration function per area.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <vector>

#include <cuda_runtime_api.h>
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include "tensor_args.h"

namespace openmla::python {

namespace nb = nanobind;

void register_errors(nb::module_& m);     // errors.cpp
void register_tensors(nb::module_& m);    // module.cpp: DType, view_as, describe
void register_decode(nb::module_& m);     // bind_decode.cpp: formats, DecodeShape, DecodePlan, write_kv
void register_sparse_decode(nb::module_& m);  // bind_sparse_decode.cpp: SparseDecodeShape, SparseDecodePlan
void register_reference(nb::module_& m);  // bind_reference.cpp: reference.decode / write_kv, fp8 codecs
void register_runtime(nb::module_& m);    // bind_runtime.cpp: PagePool, sizing

// Streams cross the boundary as integers (cudaStream_t values: torch.cuda.Stream.cuda_stream,
// cupy.cuda.Stream.ptr; 0 = the legacy default stream).
inline cudaStream_t as_stream(std::uintptr_t s) { return reinterpret_cast<cudaStream_t>(s); }

// A `stream` argument that may be None: the current stream that `like`'s framework reports for
// `device` through DLPack's C exchange API (PyTorch's current stream), else the legacy default stream.
cudaStream_t stream_or_current(const std::optional<std::uintptr_t>& stream, nb::handle like, int device);

// Raw device memory for a plan: a contiguous CUDA tensor on the plan's device (any dtype).
struct Workspace {
  Output tensor;
  void* data = nullptr;
  size_t bytes = 0;
};
// `obj` as a plan's workspace on CUDA device `device`; ValueError / TypeError naming "workspace" otherwise.
Workspace workspace_arg(nb::handle obj, int device);

// A NumPy array owning a fresh buffer of `shape` elements of T (C order).
template <typename T>
nb::ndarray<nb::numpy, T> new_numpy(std::initializer_list<size_t> shape) {
  size_t n = 1;
  for (size_t d : shape) n *= d;
  auto* storage = new std::vector<T>(n);
  nb::capsule owner(storage, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
  return nb::ndarray<nb::numpy, T>(storage->data(), shape.size(), shape.begin(), owner);
}

}  // namespace openmla::python
