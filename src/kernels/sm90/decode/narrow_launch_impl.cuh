// Definitions behind launch.h for the narrow kernel, one query type and cache kind; included by the
// instantiation files.
#pragma once

#include "kernels/common/launch.h"
#include "kernels/sm90/decode/launch.h"
#include "kernels/sm90/decode/narrow_kernel.cuh"

namespace openmla::kernels::sm90 {

template <typename T, int kKind>
cudaError_t prepare_narrow_decode_kernel() {
  return cudaFuncSetAttribute(narrow_decode_kernel<T, kKind>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                              static_cast<int>(kNarrowSmemBytes<kKind>));
}

template <typename T, int kKind>
cudaError_t run_narrow_decode(const DecodeParams& p, const KvMaps& maps, bool programmatic, cudaStream_t stream) {
  const dim3 grid((p.rows + NarrowConfig::kRows - 1) / NarrowConfig::kRows, p.num_parts);
  return launch_kernel(narrow_decode_kernel<T, kKind>, grid, NarrowConfig::kThreads, kNarrowSmemBytes<kKind>, stream,
                       programmatic, p, maps);
}

#define OPENMLA_INSTANTIATE_SM90_NARROW(T, KIND)                                                           \
  template cudaError_t run_narrow_decode<T, KIND>(const DecodeParams&, const KvMaps&, bool, cudaStream_t); \
  template cudaError_t prepare_narrow_decode_kernel<T, KIND>();

}  // namespace openmla::kernels::sm90
