// Definitions behind launch.h for one query type; included by the instantiation files.
#pragma once

#include "kernels/common/launch.h"
#include "kernels/sm90/decode/kernel.cuh"
#include "kernels/sm90/decode/launch.h"

namespace openmla::kernels::sm90 {

template <typename T>
cudaError_t prepare_wide_decode_kernel() {
  return cudaFuncSetAttribute(wide_decode_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                              static_cast<int>(kWideSmemBytes));
}

template <typename T>
cudaError_t run_wide_decode(const DecodeParams& p, const void* kv_map, bool programmatic,
                            cudaStream_t stream) {
  const dim3 grid((p.rows + WideConfig::kRows - 1) / WideConfig::kRows, p.num_parts);
  return launch_kernel(wide_decode_kernel<T>, grid, WideConfig::kThreads, kWideSmemBytes, stream, programmatic, p,
                       *static_cast<const CUtensorMap*>(kv_map));
}

#define OPENMLA_INSTANTIATE_SM90_WIDE(T)                                                                     \
  template cudaError_t run_wide_decode<T>(const DecodeParams&, const void*, bool, cudaStream_t); \
  template cudaError_t prepare_wide_decode_kernel<T>();

}  // namespace openmla::kernels::sm90
