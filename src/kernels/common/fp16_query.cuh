// A bf16 query for tiles computed in fp16 (e4m3 caches: e4m3 -> f16 is exact and one instruction
// per pair): the query is converted once per segment, times 2^-shift where shift >= 0 is the
// smallest that brings its largest |q| below 2^15 (0 unless |q| >= 32768), and the scores are
// scaled back by 2^shift. Exact in fp16's normal range.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/common/convert.cuh"

namespace openmla::kernels {

// max(|lo|, |hi|) of a bf16 pair.
__device__ __forceinline__ float bf16x2_abs_max(uint32_t w) {
  return fmaxf(fabsf(__uint_as_float(w << 16)), fabsf(__uint_as_float(w & 0xFFFF0000u)));
}

// A bf16 pair times `scale` (a power of two), as an fp16 pair.
__device__ __forceinline__ uint32_t bf16x2_to_f16x2(uint32_t w, float scale) {
  return pack2<__half>(__uint_as_float(w << 16) * scale, __uint_as_float(w & 0xFFFF0000u) * scale);
}

// The shift for a query whose largest |q| is amax. NaN or inf: no shift helps; they propagate as
// they would in bf16.
__device__ __forceinline__ int fp16_query_shift(float amax) {
  const int exponent = isfinite(amax) ? static_cast<int>((__float_as_uint(amax) >> 23) & 0xFF) - 127 : 0;
  return exponent > 14 ? exponent - 14 : 0;
}

}  // namespace openmla::kernels
