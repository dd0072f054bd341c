// Register-level FP8 primitives shared by the kernels that dequantize e4m3 pages straight into
// tensor-core fragments (sm90 narrow, portable): shared-memory vector loads, byte permutes, and the
// e4m3 pair -> f16 pair conversion.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

namespace openmla::kernels {

__device__ __forceinline__ uint32_t lds32(uint32_t addr) {
  uint32_t v;
  asm volatile("ld.shared.b32 %0, [%1];" : "=r"(v) : "r"(addr));
  return v;
}
__device__ __forceinline__ uint4 lds128(uint32_t addr) {
  uint4 v;
  asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(addr));
  return v;
}
__device__ __forceinline__ uint2 lds64(uint32_t addr) {
  uint2 v;
  asm volatile("ld.shared.v2.b32 {%0, %1}, [%2];" : "=r"(v.x), "=r"(v.y) : "r"(addr));
  return v;
}

__device__ __forceinline__ uint32_t word(const uint4& v, int i) {
  return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

template <uint32_t kSelector>
__device__ __forceinline__ uint32_t prmt(uint32_t a, uint32_t b) {
  uint32_t d;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "n"(kSelector));
  return d;
}
// The same with a selector chosen at run time (per lane).
__device__ __forceinline__ uint32_t prmt(uint32_t a, uint32_t b, uint32_t selector) {
  uint32_t d;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(selector));
  return d;
}

__device__ __forceinline__ uint32_t hmul2(uint32_t a, uint32_t b) {
  uint32_t d;
  asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  return d;
}

// e4m3 pair in the low (kHigh = false) or high half of w -> f16x2, exact for every finite e4m3.
// sm_89+: one cvt (NaN kept).
template <bool kHigh>
__device__ __forceinline__ uint32_t e4m3x2_to_f16x2_cvt(uint32_t w) {
  uint32_t d;
  if constexpr (kHigh) {
    asm("{\n.reg .b16 lo, hi;\nmov.b32 {lo, hi}, %1;\ncvt.rn.f16x2.e4m3x2 %0, hi;\n}" : "=r"(d) : "r"(w));
  } else {
    asm("{\n.reg .b16 lo, hi;\nmov.b32 {lo, hi}, %1;\ncvt.rn.f16x2.e4m3x2 %0, lo;\n}" : "=r"(d) : "r"(w));
  }
  return d;
}
// Any arch: the e4m3 bits placed in an f16's sign / low exponent / high mantissa bits are the value
// times 2^-8 (subnormals included: f16 keeps them down to 2^-24).
template <bool kHigh>
__device__ __forceinline__ uint32_t e4m3x2_to_f16x2_over_256(uint32_t w) {
  // Byte 0 (2) of w into bits 8-15, byte 1 (3) into bits 24-31, zeros elsewhere.
  const uint32_t x = kHigh ? prmt<0x3424>(w, 0u) : prmt<0x1404>(w, 0u);
  return (x & 0x80008000u) | ((x >> 1) & 0x3F803F80u);
}
// The conversion the kernels use: cvt from sm_89 (63 values per clock per SM on the H200, against
// 25 for the bit operations: tools/repro/fp8_convert_throughput.cu); on sm_80 the bit operations
// times 256 (exact). The writers never store e4m3 NaN, which the sm_80 path maps to 480.
template <bool kHigh>
__device__ __forceinline__ uint32_t e4m3x2_to_f16x2(uint32_t w) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  return e4m3x2_to_f16x2_cvt<kHigh>(w);
#else
  return hmul2(e4m3x2_to_f16x2_over_256<kHigh>(w), 0x5C005C00u);  // 256 in each half
#endif
}

}  // namespace openmla::kernels
