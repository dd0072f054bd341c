// Definitions behind launch.h for the FP8-math kernel, one query type; included by the
// instantiation files.
#pragma once

#include "kernels/common/launch_kernel.h"
#include "kernels/sm90/decode/fp8_math/kernel.cuh"
#include "kernels/sm90/decode/fp8_math/launch.h"

namespace openmla::kernels::sm90 {

template <typename T>
cudaError_t prepare_fp8_math_decode_kernel() {
  // setmaxnreg.inc waits for registers that setmaxnreg.dec released: refuse a budget the launch's
  // register count cannot pay (it would hang).
  cudaFuncAttributes attributes{};
  if (const cudaError_t e = cudaFuncGetAttributes(&attributes, fp8_math_decode_kernel<T>); e != cudaSuccess) return e;
  if (Fp8MathConfig::kProducerRegs + Fp8MathConfig::kConsumers * Fp8MathConfig::kConsumerRegs >
      (1 + Fp8MathConfig::kConsumers) * attributes.numRegs)
    return cudaErrorInvalidConfiguration;
  return cudaFuncSetAttribute(fp8_math_decode_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                              static_cast<int>(kFp8MathSmemBytes));
}

template <typename T>
cudaError_t run_fp8_math_decode(const DecodeParams& p, const TensorMaps& maps, bool programmatic, cudaStream_t stream) {
  const dim3 grid((p.rows + Fp8MathConfig::kRows - 1) / Fp8MathConfig::kRows, p.num_parts);
  return launch_kernel(fp8_math_decode_kernel<T>, grid, Fp8MathConfig::kThreads, kFp8MathSmemBytes, stream,
                       programmatic, p, maps.kv);
}

#define OPENMLA_INSTANTIATE_SM90_FP8_MATH(T)                                                               \
  template cudaError_t run_fp8_math_decode<T>(const DecodeParams&, const TensorMaps&, bool, cudaStream_t); \
  template cudaError_t prepare_fp8_math_decode_kernel<T>();

}  // namespace openmla::kernels::sm90
