// Definitions behind launch.h for the narrow kernel, one query type, cache kind, row count and producer form;
// included by the instantiation files.
#pragma once

#include "kernels/common/launch_kernel.h"
#include "kernels/sm90/decode/narrow/kernel.cuh"
#include "kernels/sm90/decode/narrow/launch.h"

namespace openmla::kernels::sm90 {

template <typename T, int kKind, int kRows, int kProducerWarps>
cudaError_t prepare_narrow_decode_kernel() {
  using Cfg = NarrowConfig<kRows, kKind, kProducerWarps>;
  if constexpr (Cfg::kRebalanceRegisters) {
    // setmaxnreg.inc waits for registers that setmaxnreg.dec released in the same CTA: a budget
    // beyond the launch's register count would hang, so refuse it here.
    cudaFuncAttributes attributes{};
    if (const cudaError_t e = cudaFuncGetAttributes(&attributes, narrow_decode_kernel<T, kKind, kRows, kProducerWarps>);
        e != cudaSuccess)
      return e;
    if (Cfg::kProducerRegs + Cfg::kConsumers * Cfg::kConsumerRegs > (1 + Cfg::kConsumers) * attributes.numRegs)
      return cudaErrorInvalidConfiguration;
  }
  return cudaFuncSetAttribute(narrow_decode_kernel<T, kKind, kRows, kProducerWarps>,
                              cudaFuncAttributeMaxDynamicSharedMemorySize,
                              static_cast<int>(kNarrowSmemBytes<kKind, kRows>));
}

template <typename T, int kKind, int kRows, int kProducerWarps>
cudaError_t run_narrow_decode(const DecodeParams& p, const TensorMaps& maps, bool programmatic, cudaStream_t stream) {
  const dim3 grid((p.rows + kRows - 1) / kRows, p.num_parts);
  return launch_kernel(narrow_decode_kernel<T, kKind, kRows, kProducerWarps>, grid,
                       NarrowConfig<kRows, kKind, kProducerWarps>::kThreads, kNarrowSmemBytes<kKind, kRows>, stream,
                       programmatic, p, maps);
}

#define OPENMLA_INSTANTIATE_SM90_NARROW(T, KIND, ROWS, PRODUCER_WARPS)                                          \
  template cudaError_t run_narrow_decode<T, KIND, ROWS, PRODUCER_WARPS>(const DecodeParams&, const TensorMaps&, bool, \
                                                                        cudaStream_t);                               \
  template cudaError_t prepare_narrow_decode_kernel<T, KIND, ROWS, PRODUCER_WARPS>();

}  // namespace openmla::kernels::sm90
