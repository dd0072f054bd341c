// The narrow kernel's producer steps: the page copies (TMA, one barrier per stage) and finishing a landed page
// (zeroing rows past seqlen, ds_mla's scale table). The two producer forms that schedule them are in the kernel
// (kernel.cuh): written as functions taking the shared storage, they compile to other code.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/arch/sm90/ptx.cuh"
#include "kernels/common/decode_params.h"
#include "kernels/common/page_table.cuh"
#include "kernels/common/segment.cuh"
#include "kernels/sm90/decode/common.h"
#include "kernels/sm90/decode/narrow/common.cuh"
#include "openmla/error.h"

namespace openmla::kernels::sm90::narrow {

// ---- copies and the scale table ------------------------------------------------------------------

// The page with id `page` into a stage (NarrowPage: e4m3's five boxes, or ds_mla's page in one box).
// A bad id is recorded and never a coordinate: the barrier completes without data (the stage keeps
// stale bytes; the consumers poison the segment).
template <int kKind, int kRows>
__device__ __forceinline__ void load_page(const DecodeParams& p, NarrowSharedStorage<kKind, kRows>& sm,
                                          const TensorMaps& maps, int stage, int page, uint64_t policy) {
  using Page = NarrowPage<kKind>;
  uint64_t* bar = &sm.full[stage];
  if (page < 0 || page >= p.num_pages) {
    atomicOr(p.error_word, kDeviceErrorPageIdOutOfRange);
    if constexpr (kKind == kKv16Bit) {
      mbarrier_arrive(&sm.front[stage][0]);
      mbarrier_arrive(&sm.front[stage][1]);
    }
    mbarrier_arrive(bar);
    return;
  }
  uint8_t* dst = sm.kv[stage];
  if constexpr (kKind == kKv16Bit) {
    // Three copies of three boxes: parts 0 and 1 on `front`, part 2 on `full`.
#pragma unroll
    for (int part = 0; part < Page::kParts; ++part) {
      uint64_t* part_bar = part + 1 < Page::kParts ? &sm.front[stage][part] : bar;
      mbarrier_arrive_expect_tx(part_bar, Page::kPartBytes);
      tma_load_4d(dst + part * Page::kPartBytes, &maps.kv, 0, 0, part * Page::kPartBoxes, page, part_bar, policy);
    }
    return;
  }
  mbarrier_arrive_expect_tx(bar, Page::kBytes);
  if constexpr (kKind == kKvE4M3) {
    static_assert(Page::kLatentBoxes * 128 == kHeadDimV, "the latent map's chunks (tensor_maps.cu)");
    tma_load_4d(dst, &maps.kv, 0, 0, 0, page, bar, policy);  // the kLatentBoxes boxes, one copy
    tma_load_3d(dst + Page::kRopeOffset, &maps.rope, kHeadDimV, 0, page, bar, policy);
  } else {
    tma_load_3d(dst, &maps.kv, 0, 0, page, bar, policy);
  }
}

// A landed page made ready for the consumers by the producer warp: tokens from `valid` on (past
// seqlen in a request's last page; their bytes may be anything, NaN included) get zero latent rows,
// since P = 0 times V must be 0. Their keys need nothing: their scores are masked. ds_mla: the
// page's scales factored into the NarrowScaleTable (two tokens a lane; 0 past seqlen): hi = 2^(E - 6)
// with E the largest unbiased exponent of the token's four scales (at least -126, so that hi > 0 for
// all-zero scales), lo = scale / hi < 2^7, rounded to fp16 (exact for powers of two down to
// 2^-24 hi, which FlashMLA's quantizer and write_kv produce).
template <int kKind>
__device__ __forceinline__ void finish_page(uint8_t* stage, NarrowScaleTable& table, int valid, int lane) {
  using Page = NarrowPage<kKind>;
  if (valid < kTileTokens) {
    const int rows = kTileTokens - valid;
    // The latent part of a row (the values): 512 e4m3, or 512 16-bit values in eight boxes.
    constexpr int kChunks = kKind == kKv16Bit ? kHeadDimV * 2 / 16 : kHeadDimV / 16;
    for (int i = lane; i < rows * kChunks; i += 32) {
      const int row = valid + i / kChunks, chunk = i % kChunks;
      // Whole rows: the swizzle only permutes chunks inside a box row.
      const int offset = Page::kSwizzled ? (chunk / 8) * 8192 + row * 128 + (chunk % 8) * 16
                                         : row * NarrowPage<kKvDsMla>::kRowBytes + chunk * 16;
      *reinterpret_cast<uint4*>(stage + offset) = make_uint4(0, 0, 0, 0);
    }
    fence_proxy_async();  // the stage is TMA's again after this page
  }
  if constexpr (kKind == kKvDsMla) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int tok = lane + 32 * h;
      const float4 sc = *reinterpret_cast<const float4*>(stage + tok * Page::kRowBytes + Page::kScalesOffset);
      const float v[4] = {sc.x, sc.y, sc.z, sc.w};
      int e = 1;
#pragma unroll
      for (int j = 0; j < 4; ++j) e = max(e, static_cast<int>((__float_as_uint(v[j]) >> 23) & 0xFF));
      const int exponent = e - 127;  // biased e in [1, 255]
      const bool inside = tok < valid;
      table.hi[tok] = inside ? ldexpf(1.f, exponent - 6) : 0.f;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const __half lo = __float2half_rn(inside ? ldexpf(v[j], 6 - exponent) : 0.f);
        table.lo[j][tok] = *reinterpret_cast<const uint16_t*>(&lo);
      }
    }
  }
}

// ---- the producer's steps (both producer forms below) ------------------------------------------

template <int kKind>
__device__ __forceinline__ void prefetch_page_maps(const TensorMaps& maps) {
  prefetch_tensor_map(&maps.kv);
  if (kKind == kKvE4M3) prefetch_tensor_map(&maps.rope);
}

// A landed page finished (finish_page) and handed to the consumers (`ready`); the whole warp.
template <int kKind, int kRows>
__device__ __forceinline__ void finish_and_release(NarrowSharedStorage<kKind, kRows>& sm, int stage, int valid,
                                                   int lane) {
  finish_page<kKind>(sm.kv[stage], sm.scales[kKind == kKvDsMla ? stage : 0], valid, lane);
  mbarrier_arrive(&sm.ready[stage]);
}

}  // namespace openmla::kernels::sm90::narrow
