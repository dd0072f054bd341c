// The O accumulator fragment of the 64-row sm90 schedules (wide, FP8 math): consumer c's 64 x 256 half,
// m64n256 (o[4 n8 + 2h + {0, 1}] is row h's columns 8 n8 + 2c + {0, 1}): the online-softmax rescale, and
// the segment's end, where it and the row sums become the request's out (or its split's partial) and lse.
#pragma once

#include <cstdint>

#include "kernels/arch/sm90/ptx.cuh"
#include "kernels/arch/sync.cuh"
#include "kernels/common/convert.cuh"
#include "kernels/common/decode_params.h"
#include "kernels/common/partial_rows.h"
#include "kernels/common/sector_stores.cuh"
#include "kernels/common/segment.cuh"
#include "kernels/common/softmax.cuh"
#include "kernels/sm90/decode/common.h"
#include "openmla/error.h"

namespace openmla::kernels::sm90 {

// O rows *= alpha (two rows per thread); skipped by a warp whose rows all kept their max (most tiles once
// the maxima settle). Warp-uniform is enough: the FMULs sit outside the wgmma fence/wait window.
__device__ __forceinline__ void rescale_rows(float (&o)[128], float alpha0, float alpha1) {
  if (!__any_sync(0xffffffffu, alpha0 != 1.f || alpha1 != 1.f)) return;
#pragma unroll
  for (int i = 0; i < 128; i += 4) {
    o[i + 0] *= alpha0;
    o[i + 1] *= alpha0;
    o[i + 2] *= alpha1;
    o[i + 3] *= alpha1;
  }
}

// This thread's two rows (row0, row1 of the m-tile) of its consumer's 256 output columns
// [me * 256, + 256), from the accumulator fragment o (m64n256: o[4 n8 + 2h + {0, 1}] is row h's columns
// 8 n8 + 2c + {0, 1}). l0 / l1: this thread's unreduced row sums, summed here over the quad and, through
// row_sum, over both consumers (a named barrier of the 256 consumer threads, id kBarrier, which also ORs bad_page:
// a thread's own share of the segment's page-id check is enough).
// out = o * out_scale / (o_scale * l) (out_scale: the call's, p.out_scale times any device-held factor);
// lse = lse_term + ln l (lse_term: the row's max in natural-log units). A segment with errors or a bad page id gets NaN; a row with l = 0 gets out 0, lse -inf.
// after_reduce() runs once both consumers passed the row sums' barrier (their tile loops are done).
// kFp16Partials: the kernel has the fp16 form of the partial rows (p.fp16_partials picks it per call).
template <typename T, int kBarrier, bool kFp16Partials, typename AfterReduce>
__device__ __forceinline__ void write_segment_rows(const DecodeParams& p, const Segment& seg, int req, int m_tile,
                                                   int rows_per_tile, int me, int c, int tid, int row0, int row1,
                                                   const float (&o)[128], float l0, float l1, float lse_term0,
                                                   float lse_term1, float o_scale, float out_scale,
                                                   float (&row_sum)[2][64], bool bad_page,
                                                   AfterReduce&& after_reduce) {
  constexpr int kHalfCols = 256;
  // A split segment's rows (partial_rows.h): the largest magnitude of each 64-column block (8 n8, held by the
  // quad), taken here, before the row sums' barrier (taken after it, the FP8-math kernel spills).
  float amax[2][4] = {};
  if (kFp16Partials && p.fp16_partials && !seg.write_final) {
#pragma unroll
    for (int n8 = 0; n8 < 32; ++n8)
#pragma unroll
      for (int h = 0; h < 2; ++h)
        amax[h][n8 / 8] = fmaxf(amax[h][n8 / 8], fmaxf(fabsf(o[4 * n8 + 2 * h]), fabsf(o[4 * n8 + 2 * h + 1])));
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int blk = 0; blk < 4; ++blk) amax[h][blk] = quad_max(amax[h][blk]);
  }
  l0 = quad_sum(l0);
  l1 = quad_sum(l1);
  if (c == 0) {
    row_sum[me][row0] = l0;
    row_sum[me][row1] = l1;
  }
  bad_page = named_barrier_sync_or(kBarrier, 256, bad_page);
  l0 = row_sum[0][row0] + row_sum[1][row0];
  l1 = row_sum[0][row1] + row_sum[1][row1];
  after_reduce();

  const unsigned errors = seg.errors | (bad_page ? kDeviceErrorPageIdOutOfRange : 0u);
  if (seg.errors && tid == 0 && m_tile == 0) atomicOr(p.error_word, seg.errors);
  const bool poison = errors != 0;
  // A row's factor: out = o * row_factor(l); NaN for a poisoned segment, 0 for a row that weighed nothing.
  const auto row_factor = [&](float l) { return poison ? NAN : (l > 0.f ? out_scale / (o_scale * l) : 0.f); };
  // Rows go out as whole sectors (store_swapped_words): a lane's offsets are in the row's pointer before its loop.
  // The output's loop spells the helper out: called there, it changes the FP8 wide kernels' register allocation
  // (the 16-bit kernels' code is the same either way).
  const bool odd = c & 1;
  if (seg.write_final) {  // the request's output, in the query type
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = opaque(m_tile * rows_per_tile + (h ? row1 : row0));  // row math here, not hoisted
      const bool in_tile = row < p.rows;
      const float inv = row_factor(h ? l1 : l0);
      const auto [qi, head] = query_row(p, row);
      T* out = static_cast<T*>(p.out) + out_offset(p, req, qi, head) + me * kHalfCols + odd * 8 + 2 * (c & 2);
#pragma unroll
      for (int n8 = 0; n8 < 32; n8 += 2) {
        const uint32_t w0 = pack2<T>(o[4 * n8 + 2 * h] * inv, o[4 * n8 + 2 * h + 1] * inv);
        const uint32_t w1 = pack2<T>(o[4 * n8 + 4 + 2 * h] * inv, o[4 * n8 + 4 + 2 * h + 1] * inv);
        const uint32_t got = __shfl_xor_sync(0xffffffffu, odd ? w0 : w1, 1);
        if (in_tile) *reinterpret_cast<uint2*>(out + n8 * 8) = odd ? make_uint2(got, w1) : make_uint2(w0, got);
      }
    }
  } else if (kFp16Partials && p.fp16_partials) {  // partial rows (partial_rows.h): fp16, a scale per 64 columns
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = opaque(m_tile * rows_per_tile + (h ? row1 : row0));
      const bool in_tile = row < p.rows;
      const float inv = row_factor(h ? l1 : l0);
      const size_t prow = partial_row_index(seg.partial_slot, p.rows, row);
      uint16_t* out = static_cast<uint16_t*>(p.o_partial) + prow * kHeadDimV + me * kHalfCols + odd * 8 + 2 * (c & 2);
#pragma unroll
      for (int blk = 0; blk < kHalfCols / kPartialBlockCols; ++blk) {
        // (o * inv) * encode, not o * (inv * encode): inv * encode overflows where O is kept small (ds_mla's
        // units of 1 / h) or a block is zero (encode 2^126); o * inv is the output value, which encode bounds.
        const PartialBlockScale scale = partial_block_scale(amax[h][blk] * inv);
        const float e = scale.encode;
#pragma unroll
        for (int n8 = 8 * blk; n8 < 8 * blk + 8; n8 += 2) {
          const uint32_t w0 = pack2<__half>(o[4 * n8 + 2 * h] * inv * e, o[4 * n8 + 2 * h + 1] * inv * e);
          const uint32_t w1 = pack2<__half>(o[4 * n8 + 4 + 2 * h] * inv * e, o[4 * n8 + 4 + 2 * h + 1] * inv * e);
          store_swapped_words(out + n8 * 8, w0, w1, odd, in_tile);
        }
        if (in_tile && c == 0)
          p.o_partial_scale[prow * kPartialBlocks + me * (kHalfCols / kPartialBlockCols) + blk] = scale.decode;
      }
    }
  } else {  // fp32 partial rows (8 bytes per lane: whole sectors already)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = opaque(m_tile * rows_per_tile + (h ? row1 : row0));
      if (row >= p.rows) continue;
      const float inv = row_factor(h ? l1 : l0);
      float* out = static_cast<float*>(p.o_partial) + partial_row_index(seg.partial_slot, p.rows, row) * kHeadDimV +
                   me * kHalfCols;
#pragma unroll
      for (int n8 = 0; n8 < 32; ++n8)
        *reinterpret_cast<float2*>(out + n8 * 8 + 2 * c) =
            make_float2(o[4 * n8 + 2 * h] * inv, o[4 * n8 + 2 * h + 1] * inv);
    }
  }
  if (me == 0 && c == 0) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = opaque(m_tile * rows_per_tile + (h ? row1 : row0));
      if (row >= p.rows) continue;
      const float lse = poison ? NAN : row_lse(h ? lse_term1 : lse_term0, h ? l1 : l0);
      if (seg.write_final) {
        const auto [qi, head] = query_row(p, row);
        p.lse[lse_offset(p, req, qi, head)] = lse;
      } else {
        p.lse_partial[partial_row_index(seg.partial_slot, p.rows, row)] = lse;
      }
    }
  }
}

}  // namespace openmla::kernels::sm90
