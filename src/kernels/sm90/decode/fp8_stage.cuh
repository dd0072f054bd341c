// FP8 pages in the sm90a pipeline. A quantized page is copied by TMA as stored into the upper
// part of its 73,728-B stage and expanded in place, box by box, into the nine swizzled 64 x 64
// tiles of the query's type that the consumers read. An FP8 stage therefore costs no shared memory
// beyond a 16-bit one, and two pages stay in flight as with 16-bit caches. Warp 0 of the producer
// warpgroup issues the copies; warps 1-3 (96 threads) expand, and each box they finish completes
// the box's `full` barrier, so the consumers' S = Q K^T starts on box 0 while box 8 is expanded.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>
#include <type_traits>

#include "kernels/common/kv_kind.h"
#include "kernels/sm90/common/ptx.cuh"
#include "kernels/sm90/decode/config.h"

namespace openmla::kernels::sm90 {

// Where the parts of a quantized page land in its stage (byte offsets from the stage base).
// Output box j (the tile of dims 64 j..+64) covers [8192 j, 8192 (j + 1)).
template <int kKind>
struct Fp8StageLayout;

template <>
struct Fp8StageLayout<kKvE4M3> {
  static constexpr int kTokenBytes = 576;
  static constexpr int kExpandedBoxes = 9;           // the rope is e4m3 too
  static constexpr int kRawBoxBytes = 64 * 64;       // 64 tokens x 64 e4m3, rows of 64 B
  static constexpr int kRawOffset = WideConfig::kTileBytes - kExpandedBoxes * kRawBoxBytes;  // 36,864
  static constexpr bool kHasScales = false;
  static constexpr int kScalesOffset = 0, kScalesBytes = 0;
};

template <>
struct Fp8StageLayout<kKvDsMla> {
  static constexpr int kTokenBytes = 656;
  static constexpr int kExpandedBoxes = 8;           // the 512 e4m3 latent values
  static constexpr int kRawBoxBytes = 64 * 64;
  static constexpr int kRopeOffset = 8 * WideConfig::kBoxBytes;  // box 8: the bf16 rope lands in place
  static constexpr bool kHasScales = true;
  static constexpr int kScalesBytes = 64 * 16;                   // 4 float tile scales per token
  static constexpr int kScalesOffset = kRopeOffset - kScalesBytes;                // 64,512
  static constexpr int kRawOffset = kScalesOffset - kExpandedBoxes * kRawBoxBytes;  // 31,744
};

// In-place expansion is safe when, before any thread writes output box j, every thread has read
// the raw bytes box j covers. Raw box r is read at step r and the scales at every step, so step j
// needs a barrier between its reads and its writes iff box j covers raw data read since the last
// such barrier. Returns the steps as a bit mask, or ~0 if some box covers data a later step reads.
constexpr bool covers(int box, int begin, int end) {
  return begin < (box + 1) * WideConfig::kBoxBytes && end > box * WideConfig::kBoxBytes;
}
template <int kKind>
constexpr uint32_t expand_barrier_steps() {
  using L = Fp8StageLayout<kKind>;
  uint32_t steps = 0;
  int last = -1;
  for (int j = 0; j < L::kExpandedBoxes; ++j) {
    int need = -1;
    for (int r = 0; r < L::kExpandedBoxes; ++r) {
      if (!covers(j, L::kRawOffset + r * L::kRawBoxBytes, L::kRawOffset + (r + 1) * L::kRawBoxBytes)) continue;
      if (r > j) return ~0u;
      need = r > need ? r : need;
    }
    if (L::kHasScales && covers(j, L::kScalesOffset, L::kScalesOffset + L::kScalesBytes)) {
      if (j != L::kExpandedBoxes - 1) return ~0u;
      need = j;
    }
    if (need > last) {
      steps |= 1u << j;
      last = j;
    }
  }
  return steps;
}
static_assert(expand_barrier_steps<kKvE4M3>() != ~0u && expand_barrier_steps<kKvDsMla>() != ~0u,
              "an output box overwrites raw bytes that a later step still reads");
static_assert(Fp8StageLayout<kKvE4M3>::kRawOffset % 128 == 0 && Fp8StageLayout<kKvDsMla>::kRawOffset % 128 == 0 &&
                  Fp8StageLayout<kKvDsMla>::kScalesOffset % 128 == 0,
              "TMA destinations are 128-B aligned");

// ---- e4m3 -> bf16 / fp16 -----------------------------------------------------------------------

// e4m3 pair (bytes lo, hi of w) -> bf16x2 of value x 2^-120: prmt sign-extends each byte to 16
// bits, and << 4 with the mask keeps the sign at bit 15 and moves exponent and mantissa into bf16's
// fields. Exact for every finite e4m3, subnormals included (they become bf16 subnormals). The NaN
// encodings (|byte| = 0x7F) would read as +-480: chunks holding one take the exact path.
template <uint32_t kSelector>  // 0x9180: bytes 0, 1; 0xB3A2: bytes 2, 3
__device__ __forceinline__ uint32_t e4m3x2_to_bf16x2_scaled_down(uint32_t w) {
  uint32_t sext;
  asm("prmt.b32 %0, %1, 0, %2;" : "=r"(sext) : "r"(w), "n"(kSelector));
  return (sext << 4) & 0x87F087F0u;
}

// Whether any of 16 e4m3 is NaN: (b & 0x7F) + 1 reaches 0x80 only for 0x7F, without carries.
__device__ __forceinline__ bool has_e4m3_nan(uint4 raw) {
  const uint32_t m = 0x7F7F7F7Fu, one = 0x01010101u;
  return (((raw.x & m) + one) | ((raw.y & m) + one) | ((raw.z & m) + one) | ((raw.w & m) + one)) & 0x80808080u;
}

__device__ __forceinline__ uint32_t bf16x2_mul(uint32_t a, __nv_bfloat162 b) {
  __nv_bfloat162 v = __hmul2(*reinterpret_cast<const __nv_bfloat162*>(&a), b);
  return *reinterpret_cast<const uint32_t*>(&v);
}

// 16 e4m3 (value i in byte i) -> values 0-7 (lo) and 8-15 (hi) in T, each times `scale` (1 for
// per-tensor e4m3, whose scale is folded into the softmax scale and the output).
template <typename T>
__device__ __forceinline__ void expand_chunk(uint4 raw, float scale, uint4& lo, uint4& hi) {
  const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
  uint32_t out[8];
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    // x 2^120 restores the value; with a ds_mla tile scale the product is exact for power-of-two
    // scales (FlashMLA's quantizer and write_kv). Scales >= 2^8 would overflow the bf16 factor;
    // they and NaN encodings take the float path (e4m3 -> f16 in hardware, exact, NaN kept).
    if (scale < 256.f && !has_e4m3_nan(raw)) {
      const __nv_bfloat162 mul = __float2bfloat162_rn(scale * 0x1p120f);
#pragma unroll
      for (int w = 0; w < 4; ++w) {
        out[2 * w + 0] = bf16x2_mul(e4m3x2_to_bf16x2_scaled_down<0x9180>(words[w]), mul);
        out[2 * w + 1] = bf16x2_mul(e4m3x2_to_bf16x2_scaled_down<0xB3A2>(words[w]), mul);
      }
    } else {
#pragma unroll
      for (int w = 0; w < 8; ++w) {
        const __half2_raw h =
            __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(words[w / 2] >> (16 * (w % 2))), __NV_E4M3);
        const float2 f = __half22float2(__half2(h));
        const __nv_bfloat162 v = __floats2bfloat162_rn(f.x * scale, f.y * scale);
        out[w] = *reinterpret_cast<const uint32_t*>(&v);
      }
    }
  } else {
    // e4m3 -> f16 is exact in hardware (cvt, sm_89+). A ds_mla scale that is a power of two in
    // [2^-14, 2^7] multiplies exactly in f16 (|product| <= 57,344; subnormal results are exact
    // multiples of 2^-23); any other scale is applied in float and rounded once.
    const bool exact_half_scale = scale >= 0x1p-14f && scale <= 128.f && (__float_as_uint(scale) & 0x7FFFFFu) == 0;
    const __half2 mul = __float2half2_rn(scale);
#pragma unroll
    for (int w = 0; w < 8; ++w) {
      const __half2_raw h =
          __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(words[w / 2] >> (16 * (w % 2))), __NV_E4M3);
      __half2 v = __half2(h);
      if (scale != 1.f) {
        if (exact_half_scale) {
          v = __hmul2(v, mul);
        } else {
          const float2 f = __half22float2(v);
          v = __floats2half2_rn(f.x * scale, f.y * scale);
        }
      }
      out[w] = *reinterpret_cast<const uint32_t*>(&v);
    }
  }
  lo = make_uint4(out[0], out[1], out[2], out[3]);
  hi = make_uint4(out[4], out[5], out[6], out[7]);
}

// ---- the expansion -----------------------------------------------------------------------------

// Output box `box` of a stage from its raw box: 256 tasks (token, 16-value chunk) over 96 threads,
// the starting thread rotating by a warp per box so that every warp does 8 tasks per 3 boxes.
template <typename T, int kKind>
__device__ __forceinline__ void expand_box(uint8_t* stage, int box, int d, bool barrier_before_writes) {
  using L = Fp8StageLayout<kKind>;
  constexpr int kTasks = WideConfig::kTokens * 4;
  constexpr int kPerThread = (kTasks + WideConfig::kDequantThreads - 1) / WideConfig::kDequantThreads;
  const int first = (d + 32 * (box % 3)) % WideConfig::kDequantThreads;
  uint4 raw[kPerThread];
  float scale[kPerThread];
#pragma unroll
  for (int k = 0; k < kPerThread; ++k) {
    const int i = first + k * WideConfig::kDequantThreads;
    if (i < kTasks) {
      const unsigned token = unsigned(i) / 4, chunk = unsigned(i) % 4;
      raw[k] = *reinterpret_cast<const uint4*>(stage + L::kRawOffset + box * L::kRawBoxBytes + token * 64 + chunk * 16);
      scale[k] = 1.f;
      if constexpr (L::kHasScales)
        scale[k] = *reinterpret_cast<const float*>(stage + L::kScalesOffset + token * 16 + (box / 2) * 4);
    }
  }
  if (barrier_before_writes) named_barrier_sync(kBarDequant, WideConfig::kDequantThreads);
#pragma unroll
  for (int k = 0; k < kPerThread; ++k) {
    const int i = first + k * WideConfig::kDequantThreads;
    if (i < kTasks) {
      const unsigned token = unsigned(i) / 4, chunk = unsigned(i) % 4;
      uint4 lo, hi;
      expand_chunk<T>(raw[k], scale[k], lo, hi);
      uint8_t* row = stage + box * WideConfig::kBoxBytes + token * 128;
      *reinterpret_cast<uint4*>(row + (((2 * chunk) ^ (token & 7)) << 4)) = lo;
      *reinterpret_cast<uint4*>(row + (((2 * chunk + 1) ^ (token & 7)) << 4)) = hi;
    }
  }
}

// ds_mla rope (box 8, landed in place as bf16) for an fp16 query: rounded once, chunk by chunk.
__device__ __forceinline__ void rope_to_fp16_in_place(uint8_t* stage, int d) {
  uint8_t* box = stage + Fp8StageLayout<kKvDsMla>::kRopeOffset;
  for (int i = d; i < WideConfig::kBoxBytes / 16; i += WideConfig::kDequantThreads) {
    uint4 v = *reinterpret_cast<const uint4*>(box + i * 16);
    uint32_t* w = reinterpret_cast<uint32_t*>(&v);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float2 f = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&w[j]));
      const __half2 h = __floats2half2_rn(f.x, f.y);
      w[j] = *reinterpret_cast<const uint32_t*>(&h);
    }
    *reinterpret_cast<uint4*>(box + i * 16) = v;
  }
}

// One stage's page: waits for each raw box, expands it, and completes the box's `full` barrier
// (one arrival per dequantizing warp). d = 0..95 over the dequantizing warps.
template <typename T, int kKind>
__device__ __forceinline__ void expand_stage(WideSharedStorage& sm, int stage, uint32_t parity, int d, int lane) {
  using L = Fp8StageLayout<kKind>;
  constexpr uint32_t kBarrierSteps = expand_barrier_steps<kKind>();
  auto box_ready = [&](int box) {
    fence_proxy_async();  // this thread's stores are read by wgmma
    __syncwarp();
    if (lane == 0) mbarrier_arrive(&sm.full[stage][box]);
  };
#pragma unroll 1
  for (int box = 0; box < L::kExpandedBoxes; ++box) {
    mbarrier_wait(&sm.raw[stage][box], parity);
    expand_box<T, kKind>(sm.kv[stage], box, d, (kBarrierSteps >> box) & 1u);
    box_ready(box);
  }
  if constexpr (kKind == kKvDsMla) {
    mbarrier_wait(&sm.raw[stage][8], parity);
    if constexpr (std::is_same_v<T, __half>) rope_to_fp16_in_place(sm.kv[stage], d);
    box_ready(8);
  }
}

}  // namespace openmla::kernels::sm90
