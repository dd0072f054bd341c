// Definitions behind launch.h for one (query type, schedule); included by the instantiation files.
#pragma once

#include "kernels/common/launch.h"
#include "kernels/sm90/decode/kernel.cuh"
#include "kernels/sm90/decode/launch.h"

namespace openmla::kernels::sm90 {

template <typename T, bool kNarrow>
cudaError_t prepare_decode_kernel() {
  return cudaFuncSetAttribute(decode_kernel<T, kNarrow>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                              static_cast<int>(kWideSmemBytes));
}

template <typename T, bool kNarrow>
cudaError_t run_decode(const DecodeParams& p, const void* kv_map, bool programmatic, cudaStream_t stream) {
  // Narrow: one CTA per part holds all (<= 16) rows. Wide: 64-row m-tiles.
  const int m_tiles = kNarrow ? 1 : (p.rows + WideConfig::kRows - 1) / WideConfig::kRows;
  const dim3 grid(m_tiles, p.num_parts);
  return launch_kernel(decode_kernel<T, kNarrow>, grid, WideConfig::kThreads, kWideSmemBytes, stream, programmatic,
                       p, *static_cast<const CUtensorMap*>(kv_map));
}

#define OPENMLA_INSTANTIATE_SM90_DECODE(T, NARROW)                                                         \
  template cudaError_t run_decode<T, NARROW>(const DecodeParams&, const void*, bool, cudaStream_t); \
  template cudaError_t prepare_decode_kernel<T, NARROW>();

}  // namespace openmla::kernels::sm90
