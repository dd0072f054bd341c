// SparseDecodePlan without its GPU kernels: every entry point reports kUnsupported. Stands in for
// src/api/sparse_decode.cpp so that the library and the Python extension link in builds without it.
#include "openmla/error.h"
#include "openmla/sparse_decode.h"

namespace openmla {
namespace {

[[noreturn]] void not_built() { throw Error(Status::kUnsupported, "sparse decode: not built"); }

}  // namespace

SparseDecodePlan::SparseDecodePlan(const SparseDecodeShape& shape, const DecodeOptions&, int) : shape_(shape) {
  not_built();
}

void SparseDecodePlan::plan(const TensorView&, const TensorView&, void*, size_t, cudaStream_t) const { not_built(); }

void SparseDecodePlan::run(const SparseDecodeArgs&, void*, size_t, cudaStream_t) const { not_built(); }

unsigned* SparseDecodePlan::device_error_word(void*) noexcept { return nullptr; }

void SparseDecodePlan::reset_device_errors(void*, cudaStream_t) { not_built(); }

unsigned SparseDecodePlan::read_device_errors(const void*, cudaStream_t) { not_built(); }

}  // namespace openmla
