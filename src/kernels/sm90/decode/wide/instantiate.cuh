// Definitions behind launch.h for one query type and cache kind; included by the instantiation files.
#pragma once

#include "kernels/common/launch_kernel.h"
#include "kernels/sm90/decode/wide/kernel.cuh"
#include "kernels/sm90/decode/wide/launch.h"

namespace openmla::kernels::sm90 {

template <typename T, int kKind, WideSchedule kSchedule, bool kFp16Partials>
cudaError_t prepare_wide_kernel() {
  // setmaxnreg.inc waits for registers that setmaxnreg.dec released in the same CTA: a budget
  // beyond the launch's register count would hang, so refuse it here.
  auto* kernel = wide_decode_kernel<T, kKind, kSchedule, kFp16Partials>;
  cudaFuncAttributes attributes{};
  if (const cudaError_t e = cudaFuncGetAttributes(&attributes, kernel); e != cudaSuccess) return e;
  if (WideConfig::producer_regs(kKind) + WideConfig::kConsumers * WideConfig::consumer_regs(kKind) >
      (1 + WideConfig::kConsumers) * attributes.numRegs)
    return cudaErrorInvalidConfiguration;
  return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kWideSmemBytes));
}

template <typename T, int kKind>
cudaError_t prepare_wide_decode_kernel() {
  if (const cudaError_t e = prepare_wide_kernel<T, kKind, WideSchedule::kAlternating, true>(); e != cudaSuccess)
    return e;
  if constexpr (kKind == kKv16Bit) {
    if (const cudaError_t e = prepare_wide_kernel<T, kKind, WideSchedule::kSeesaw, true>(); e != cudaSuccess) return e;
    return prepare_wide_kernel<T, kKind, WideSchedule::kSeesaw, false>();
  }
  return cudaSuccess;
}

template <typename T, int kKind>
cudaError_t run_wide_decode(const DecodeParams& p, const TensorMaps& maps, bool seesaw, bool programmatic,
                            cudaStream_t stream) {
  const dim3 grid((p.rows + WideConfig::kRows - 1) / WideConfig::kRows, p.num_parts);
  if constexpr (kKind == kKv16Bit) {
    if (seesaw) {  // one instantiation per partial-row form (wide_fp16_partials, launch_config.h)
      auto* kernel = p.fp16_partials ? wide_decode_kernel<T, kKind, WideSchedule::kSeesaw, true>
                                     : wide_decode_kernel<T, kKind, WideSchedule::kSeesaw, false>;
      return launch_kernel(kernel, grid, WideConfig::kThreads, kWideSmemBytes, stream, programmatic, p, maps);
    }
  }
  if (seesaw && kKind != kKv16Bit) return cudaErrorInvalidValue;  // the seesaw takes 16-bit caches only
  return launch_kernel(wide_decode_kernel<T, kKind, WideSchedule::kAlternating, true>, grid, WideConfig::kThreads,
                       kWideSmemBytes, stream, programmatic, p, maps);
}

#define OPENMLA_INSTANTIATE_SM90_WIDE(T, KIND)                                                           \
  template cudaError_t run_wide_decode<T, KIND>(const DecodeParams&, const TensorMaps&, bool, bool, cudaStream_t); \
  template cudaError_t prepare_wide_decode_kernel<T, KIND>();

}  // namespace openmla::kernels::sm90
