// Launcher template; included only by the instantiation files.
#pragma once

#include "kernels/common/launch_kernel.h"
#include "kernels/portable/decode/kernel.cuh"
#include "kernels/portable/decode/launch.h"

namespace openmla::kernels::portable {

template <class Cfg, typename T, int kKind>
cudaError_t prepare_portable_decode_kernel() {
  return cudaFuncSetAttribute(portable_decode_kernel<Cfg, T, kKind>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                              static_cast<int>(sizeof(SharedStorage<Cfg, T, kKind>)));
}

template <class Cfg, typename T, int kKind>
cudaError_t portable_decode_occupancy(int* ctas) {
  return cudaOccupancyMaxActiveBlocksPerMultiprocessor(ctas, portable_decode_kernel<Cfg, T, kKind>, Cfg::kThreads,
                                                       sizeof(SharedStorage<Cfg, T, kKind>));
}

template <class Cfg, typename T, int kKind>
cudaError_t run_portable_decode(const DecodeParams& p, bool programmatic, cudaStream_t stream) {
  const dim3 grid((p.rows + Cfg::M - 1) / Cfg::M, p.num_parts);
  return launch_kernel(portable_decode_kernel<Cfg, T, kKind>, grid, Cfg::kThreads,
                       sizeof(SharedStorage<Cfg, T, kKind>), stream, programmatic, p);
}

#define OPENMLA_INSTANTIATE_PORTABLE(CFG, T, KIND)                                                \
  template cudaError_t run_portable_decode<CFG, T, KIND>(const DecodeParams&, bool, cudaStream_t); \
  template cudaError_t prepare_portable_decode_kernel<CFG, T, KIND>();                            \
  template cudaError_t portable_decode_occupancy<CFG, T, KIND>(int*);

}  // namespace openmla::kernels::portable
