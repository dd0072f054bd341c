// Launcher template; included only by the instantiation files.
#pragma once

#include "kernels/common/launch_kernel.h"
#include "kernels/portable/decode/kernel.cuh"
#include "kernels/portable/decode/launch.h"

namespace openmla::kernels::portable {

template <class Cfg, typename T, int kKind, int kQueries>
cudaError_t prepare_portable_decode_kernel() {
  return cudaFuncSetAttribute(portable_decode_kernel<Cfg, T, kKind, kQueries>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                              static_cast<int>(sizeof(SharedStorage<Cfg, T, kKind>)));
}

template <class Cfg, typename T, int kKind, int kQueries>
cudaError_t portable_decode_occupancy(int* ctas) {
  return cudaOccupancyMaxActiveBlocksPerMultiprocessor(ctas, portable_decode_kernel<Cfg, T, kKind, kQueries>, Cfg::kThreads,
                                                       sizeof(SharedStorage<Cfg, T, kKind>));
}

template <class Cfg, typename T, int kKind, int kQueries>
cudaError_t run_portable_decode(const DecodeParams& p, bool programmatic, cudaStream_t stream) {
  const dim3 grid((p.rows + Cfg::M - 1) / Cfg::M, p.num_parts);
  return launch_kernel(portable_decode_kernel<Cfg, T, kKind, kQueries>, grid, Cfg::kThreads,
                       sizeof(SharedStorage<Cfg, T, kKind>), stream, programmatic, p);
}

// Every query variant of one tile, query type and cache kind (config.h, PortableQueries).
#define OPENMLA_INSTANTIATE_PORTABLE_VARIANT(CFG, T, KIND, QUERIES)                                         \
  template cudaError_t run_portable_decode<CFG, T, KIND, QUERIES>(const DecodeParams&, bool, cudaStream_t); \
  template cudaError_t prepare_portable_decode_kernel<CFG, T, KIND, QUERIES>();                            \
  template cudaError_t portable_decode_occupancy<CFG, T, KIND, QUERIES>(int*);
#define OPENMLA_INSTANTIATE_PORTABLE(CFG, T, KIND)                  \
  OPENMLA_INSTANTIATE_PORTABLE_VARIANT(CFG, T, KIND, kUniformQueries) \
  OPENMLA_INSTANTIATE_PORTABLE_VARIANT(CFG, T, KIND, kGeneralQueries) \
  OPENMLA_INSTANTIATE_PORTABLE_VARIANT(CFG, T, KIND, kSparseKeys)

}  // namespace openmla::kernels::portable
