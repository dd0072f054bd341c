// FP8 pages in the sm90a pipeline. A quantized page is copied by TMA as stored into the upper
// part of its 73,728-B stage and expanded in place, in groups of boxes, into the nine swizzled 64 x 64
// tiles of the query's type that the consumers read. An FP8 stage therefore costs no shared memory
// beyond a 16-bit one, and two pages stay in flight as with 16-bit caches. The four warps of the
// producer warpgroup expand (one of their lanes also issues the copies) while the consumers compute
// on the other stage.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>
#include <type_traits>

#include "kernels/arch/sm90/ptx.cuh"
#include "kernels/arch/sync.cuh"
#include "kernels/common/convert.cuh"
#include "kernels/common/decode_params.h"
#include "kernels/common/fp8_registers.cuh"
#include "kernels/common/kv_kind.h"
#include "kernels/common/segment.cuh"
#include "kernels/sm90/decode/wide/config.h"

namespace openmla::kernels::sm90 {

// Where the parts of a quantized page land in its stage (byte offsets from the stage base).
// Output box j (the tile of dims 64 j..+64) covers [8192 j, 8192 (j + 1)).
template <int kKind>
struct Fp8StageLayout;

template <>
struct Fp8StageLayout<kKvE4M3> {
  static constexpr int kExpandedBoxes = 9;           // the rope is e4m3 too
  static constexpr int kRawBoxBytes = 64 * 64;       // 64 tokens x 64 e4m3, rows of 64 B
  static constexpr int kRawOffset = WideConfig::kTileBytes - kExpandedBoxes * kRawBoxBytes;  // 36,864
  static constexpr bool kHasScales = false;
  static constexpr int kScalesOffset = 0, kScalesBytes = 0;
};

template <>
struct Fp8StageLayout<kKvDsMla> {
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
// encodings (|byte| = 0x7F) read as +-480 (see needs_exact_path).
template <uint32_t kSelector>  // 0x9180: bytes 0, 1; 0xB3A2: bytes 2, 3
__device__ __forceinline__ uint32_t e4m3x2_to_bf16x2_scaled_down(uint32_t w) {
  uint32_t sext;
  asm("prmt.b32 %0, %1, 0, %2;" : "=r"(sext) : "r"(w), "n"(kSelector));
  return (sext << 4) & 0x87F087F0u;
}

__device__ __forceinline__ uint32_t bf16x2_mul(uint32_t a, __nv_bfloat162 b) {
  __nv_bfloat162 v = __hmul2(*reinterpret_cast<const __nv_bfloat162*>(&a), b);
  return *reinterpret_cast<const uint32_t*>(&v);
}

// 16 e4m3 (value i in byte i) -> values 0-7 and 8-15 in T, each times `scale` (1 for per-tensor
// e4m3, whose scale is folded into the softmax scale and the output), stored at the shared
// addresses lo / hi: the exact path, for every input (NaN encodings and any scale included).
// e4m3 -> f16 is exact in hardware (cvt, sm_89+); the scale is applied in float and rounded once.
// Not inlined: it is the cold path, and inlined into the expansion loop it cost instruction-cache
// misses there.
template <typename T>
__device__ __noinline__ void expand_chunk_exact(uint4 raw, float scale, uint32_t lo, uint32_t hi) {
  const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
  uint32_t out[8];
#pragma unroll
  for (int w = 0; w < 8; ++w) {
    const uint32_t h = w % 2 ? e4m3x2_to_f16x2<true>(words[w / 2]) : e4m3x2_to_f16x2<false>(words[w / 2]);
    const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&h));
    out[w] = pack2<T>(f.x * scale, f.y * scale);
  }
  st_shared_v4(lo, make_uint4(out[0], out[1], out[2], out[3]));
  st_shared_v4(hi, make_uint4(out[4], out[5], out[6], out[7]));
}

// The fast path, for chunks with a scale the fast factor holds.
//   bf16 (ds_mla with a bf16 query): bit moves plus one multiply by 2^120 x scale (exact for
//         power-of-two scales, which FlashMLA's quantizer and write_kv produce; others round twice,
//         bf16-level error). The scale alone decides: a tile that held NaN or inf has a non-finite
//         scale (the quantizer's rule), which the exact path turns into NaN. The bytes are not
//         tested for the NaN code, which only a writer breaking that rule stores under a finite
//         scale (it reads as +-480 x scale, as on the portable sm80 path); with the per-group
//         arrivals the byte test would cost ds_mla a few percent.
//   fp16: the hardware conversion (NaN kept), times a power-of-two scale in [2^-14, 2^7] in f16
//         (exact: |product| <= 57,344, subnormal results are multiples of 2^-23).
template <typename T>
__device__ __forceinline__ bool needs_exact_path(float scale) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return !(scale < 256.f);  // also NaN and inf
  } else {
    return !(scale == 1.f ||
             (scale >= 0x1p-14f && scale <= 128.f && (__float_as_uint(scale) & 0x7FFFFFu) == 0));
  }
}
template <typename T>
__device__ __forceinline__ void expand_chunk_fast(uint4 raw, float scale, uint4& lo, uint4& hi) {
  const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
  uint32_t out[8];
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    const __nv_bfloat162 mul = __float2bfloat162_rn(scale * 0x1p120f);
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      out[2 * w + 0] = bf16x2_mul(e4m3x2_to_bf16x2_scaled_down<0x9180>(words[w]), mul);
      out[2 * w + 1] = bf16x2_mul(e4m3x2_to_bf16x2_scaled_down<0xB3A2>(words[w]), mul);
    }
  } else {
    const __half2 mul = __float2half2_rn(scale);
#pragma unroll
    for (int w = 0; w < 8; ++w) {
      const uint32_t h = w % 2 ? e4m3x2_to_f16x2<true>(words[w / 2]) : e4m3x2_to_f16x2<false>(words[w / 2]);
      __half2 v = *reinterpret_cast<const __half2*>(&h);
      if (scale != 1.f) v = __hmul2(v, mul);
      out[w] = *reinterpret_cast<const uint32_t*>(&v);
    }
  }
  lo = make_uint4(out[0], out[1], out[2], out[3]);
  hi = make_uint4(out[4], out[5], out[6], out[7]);
}

// ---- the expansion -----------------------------------------------------------------------------

// A thread's two tasks per box: token t/4 and t/4 + 32, 16-value chunk t%4 (64 tokens x 4 chunks
// over 128 threads; both tokens share the row's swizzle phase).
struct ExpandTasks {
  uint32_t raw;      // byte offset of the first task's chunk in a raw box
  uint32_t scale;    // byte offset of the first task's token scales (ds_mla)
  uint32_t out_lo;   // byte offsets of its two output chunks in an output box
  uint32_t out_hi;
  __device__ explicit ExpandTasks(int t) {
    const uint32_t token = t / 4, chunk = t % 4;
    raw = token * 64 + chunk * 16;
    scale = token * 16;
    out_lo = token * 128 + (((2 * chunk) ^ (token & 7)) << 4);
    out_hi = token * 128 + (((2 * chunk + 1) ^ (token & 7)) << 4);
  }
  static constexpr uint32_t kSecondRaw = 32 * 64, kSecondScale = 32 * 16, kSecondOut = 32 * 128;
};

// Boxes expanded per step: their chunks (two per thread and box) are read, then (if the step covers
// raw bytes another thread may still read) the warps meet, then all are converted and written.
// Four boxes give the scheduler eight independent chunks under the producer's 72 registers (three
// under 56 is slower); ds_mla for an fp16 query keeps two (its scale handling).
template <typename T, int kKind>
constexpr int expand_group_size() {
  return kKind == kKvDsMla && std::is_same_v<T, __half> ? 2 : 4;
}

// Whether a group of boxes needs the barrier between its reads and its writes.
template <typename T, int kKind>
constexpr bool group_needs_barrier(int first_box) {
  constexpr uint32_t steps = expand_barrier_steps<kKind>();
  return ((steps >> first_box) & ((1u << expand_group_size<T, kKind>()) - 1)) != 0;
}

// One step: boxes [first, first + group size) of a stage (fewer at the end of the page). Every chunk
// is converted and stored by the fast path; a group that holds a chunk the fast path cannot take
// (needs_exact_path, rare) is then written again, whole, by the exact path, so that the test is off
// the fast path's dependency chain.
template <typename T, int kKind>
__device__ __forceinline__ void expand_group(uint8_t* stage, int first, const ExpandTasks& tasks, bool barrier) {
  using L = Fp8StageLayout<kKind>;
  constexpr int kExpandGroup = expand_group_size<T, kKind>();
  uint4 raw[kExpandGroup][2];
  float scale[kExpandGroup][2];
#pragma unroll
  for (int g = 0; g < kExpandGroup; ++g) {
    const int box = first + g;
    if (box >= L::kExpandedBoxes) break;
    const uint8_t* in = stage + L::kRawOffset + box * L::kRawBoxBytes + tasks.raw;
    raw[g][0] = *reinterpret_cast<const uint4*>(in);
    raw[g][1] = *reinterpret_cast<const uint4*>(in + ExpandTasks::kSecondRaw);
    scale[g][0] = scale[g][1] = 1.f;
    if constexpr (L::kHasScales) {
      const uint8_t* scales = stage + L::kScalesOffset + tasks.scale + (box / 2) * 4;
      scale[g][0] = *reinterpret_cast<const float*>(scales);
      scale[g][1] = *reinterpret_cast<const float*>(scales + ExpandTasks::kSecondScale);
    }
  }
  if (barrier) named_barrier_sync(kBarDequant, WideConfig::kDequantThreads);
  bool exact = false;
#pragma unroll
  for (int g = 0; g < kExpandGroup; ++g) {
    const int box = first + g;
    if (box >= L::kExpandedBoxes) break;
    uint8_t* out = stage + box * WideConfig::kBoxBytes;
    uint4 lo0, hi0, lo1, hi1;
    expand_chunk_fast<T>(raw[g][0], scale[g][0], lo0, hi0);
    expand_chunk_fast<T>(raw[g][1], scale[g][1], lo1, hi1);
    *reinterpret_cast<uint4*>(out + tasks.out_lo) = lo0;
    *reinterpret_cast<uint4*>(out + tasks.out_hi) = hi0;
    *reinterpret_cast<uint4*>(out + tasks.out_lo + ExpandTasks::kSecondOut) = lo1;
    *reinterpret_cast<uint4*>(out + tasks.out_hi + ExpandTasks::kSecondOut) = hi1;
    exact |= needs_exact_path<T>(scale[g][0]) | needs_exact_path<T>(scale[g][1]);
  }
  if (exact) {
#pragma unroll
    for (int g = 0; g < kExpandGroup; ++g) {
      const int box = first + g;
      if (box >= L::kExpandedBoxes) break;
      const uint32_t base = smem_addr(stage + box * WideConfig::kBoxBytes);
      expand_chunk_exact<T>(raw[g][0], scale[g][0], base + tasks.out_lo, base + tasks.out_hi);
      expand_chunk_exact<T>(raw[g][1], scale[g][1], base + tasks.out_lo + ExpandTasks::kSecondOut,
                            base + tasks.out_hi + ExpandTasks::kSecondOut);
    }
  }
}

// ds_mla rope (box 8, landed in place as bf16) for an fp16 query: rounded once, chunk by chunk.
__device__ __forceinline__ void rope_to_fp16_in_place(uint8_t* stage, int t) {
  uint8_t* box = stage + Fp8StageLayout<kKvDsMla>::kRopeOffset;
#pragma unroll
  for (int i = t; i < WideConfig::kBoxBytes / 16; i += WideConfig::kDequantThreads) {
    uint4 v = *reinterpret_cast<const uint4*>(box + i * 16);
    uint32_t* w = reinterpret_cast<uint32_t*>(&v);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float2 f = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&w[j]));
      w[j] = pack2<__half>(f.x, f.y);
    }
    *reinterpret_cast<uint4*>(box + i * 16) = v;
  }
}

// Both halves of a stage released by their consumers (an FP8 page is expanded into the whole stage).
__device__ __forceinline__ void wait_stage_free(WideSharedStorage& sm, int stage, uint32_t parity) {
  mbarrier_wait(&sm.empty[stage][0], parity);
  mbarrier_wait(&sm.empty[stage][1], parity);
}

// The producer warpgroup for FP8 caches. All four warps expand each page and complete its `full`
// barriers (one arrival per thread). Lane 0 of warp 0 also issues the copies one
// tile ahead: the next tile's stage is freed by the consumers during the current expansion, so it
// polls that stage's two `empty` barriers (one per consumer half) between groups instead of blocking the expansion on it.
// load_page: kernel.cuh (the copies of one page).
template <typename T, int kKind, class LoadPage>
__device__ __forceinline__ void expand_pages(const DecodeParams& p, const SplitPart& part, int part_idx,
                                             WideSharedStorage& sm, LoadPage&& load_page) {
  using L = Fp8StageLayout<kKind>;
  const int t = threadIdx.x;
  const bool issuer = t == 0;
  const ExpandTasks tasks(t);
  TileCursor expand(p, part, part_idx);
  TileCursor load = expand;  // issuer: the next tile to copy
  uint32_t issued = 0;       // issuer: tiles whose copies are issued
  // Issues the next tile's copies once its stage is free: blocking, or only if free now.
  auto issue = [&](bool block) {
    const int stage = issued % WideConfig::kStages;
    const uint32_t parity = ((issued / WideConfig::kStages) & 1) ^ 1;
    if (block) {
      wait_stage_free(sm, stage, parity);
    } else if (!mbarrier_test_wait(&sm.empty[stage][0], parity) || !mbarrier_test_wait(&sm.empty[stage][1], parity)) {
      return;
    }
    load_page(stage, load.page_id());
    load.next();
    ++issued;
  };
  for (uint32_t it = 0; expand.valid(); expand.next(), ++it) {
    const int stage = it % WideConfig::kStages;
    const uint32_t parity = (it / WideConfig::kStages) & 1;
    if (issuer) {
      while (issued <= it) issue(true);
    }
    // Every expanding thread acquires the consumers' release of this stage itself (the phase the
    // issuer waited for before copying; it completed long ago), so that the order of the previous
    // round's reads and tail zeroing before this round's writes does not rest on the chain through
    // the issuer and the copy's completion alone (compute-sanitizer's racecheck does not follow it).
    wait_stage_free(sm, stage, ((it / WideConfig::kStages) & 1) ^ 1);
    // Groups of boxes in order, each followed by one proxy fence and its boxes' `full` arrivals, so
    // that the owner's S starts on the first group while the rest is expanded (a fence per single box
    // leaves the expansion latency-bound). Every thread
    // arrives for its own stores (count kDequantThreads): the release orders them before the
    // consumers' reads and their tail zeroing without relying on a warp-level sync. ds_mla's rope box
    // landed in place; for an fp16 query it is rounded in place last, and the fp16 ds_mla boxes all
    // arrive after it.
    constexpr bool kArrivePerGroup = !(kKind == kKvDsMla && std::is_same_v<T, __half>);
    uint8_t* const kv = sm.kv[stage];
    mbarrier_wait(&sm.raw[stage][0], parity);  // the whole page (one barrier for all its copies)
#pragma unroll
    for (int first = 0; first < L::kExpandedBoxes; first += expand_group_size<T, kKind>()) {
      if (issuer && issued == it + 1 && load.valid()) issue(false);
      expand_group<T, kKind>(kv, first, tasks, group_needs_barrier<T, kKind>(first));
      if constexpr (kArrivePerGroup) {
        fence_proxy_async();  // this thread's stores are read by wgmma
#pragma unroll
        for (int g = 0; g < expand_group_size<T, kKind>(); ++g)
          if (first + g < L::kExpandedBoxes) mbarrier_arrive(&sm.full[stage][first + g]);
      }
    }
    if constexpr (kKind == kKvDsMla && std::is_same_v<T, __half>) rope_to_fp16_in_place(kv, t);
    if constexpr (!kArrivePerGroup) fence_proxy_async();
#pragma unroll
    for (int box = 0; box < WideConfig::kBoxes; ++box)
      if (!kArrivePerGroup || box >= L::kExpandedBoxes) mbarrier_arrive(&sm.full[stage][box]);
  }
}

}  // namespace openmla::kernels::sm90
