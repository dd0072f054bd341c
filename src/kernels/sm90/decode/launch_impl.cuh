// Definitions behind launch.h for one query type; included by the instantiation files.
#pragma once

#include "kernels/common/launch.h"
#include "kernels/sm90/decode/kernel.cuh"
#include "kernels/sm90/decode/launch.h"

namespace openmla::kernels::sm90 {

template <typename T>
cudaError_t prepare_wide_decode_kernel() {
  for (auto kernel : {wide_decode_kernel<T, Schedule::kEarlyRelease>, wide_decode_kernel<T, Schedule::kQueued>}) {
    const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               static_cast<int>(kWideSmemBytes));
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

template <typename T>
cudaError_t run_wide_decode(const DecodeParams& p, const void* kv_map, bool queued, bool programmatic,
                            cudaStream_t stream) {
  const dim3 grid((p.rows + WideConfig::kRows - 1) / WideConfig::kRows, p.num_parts);
  const auto kernel =
      queued ? wide_decode_kernel<T, Schedule::kQueued> : wide_decode_kernel<T, Schedule::kEarlyRelease>;
  return launch_kernel(kernel, grid, WideConfig::kThreads, kWideSmemBytes, stream, programmatic, p,
                       *static_cast<const CUtensorMap*>(kv_map));
}

#define OPENMLA_INSTANTIATE_SM90_WIDE(T)                                                                     \
  template cudaError_t run_wide_decode<T>(const DecodeParams&, const void*, bool, bool, cudaStream_t); \
  template cudaError_t prepare_wide_decode_kernel<T>();

}  // namespace openmla::kernels::sm90
