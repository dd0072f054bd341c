// The narrow kernel's online-softmax step over the 64 tokens of a tile, on S^T (query rows are columns),
// with lazy rescaling.
#pragma once

#include <cstdint>

#include "kernels/arch/sync.cuh"
#include "kernels/common/convert.cuh"
#include "kernels/common/decode_params.h"
#include "kernels/common/segment.cuh"
#include "kernels/common/softmax.cuh"
#include "kernels/sm90/decode/narrow/common.cuh"

namespace openmla::kernels::sm90::narrow {

// ---- softmax -----------------------------------------------------------------------------------

// The online-softmax state of a thread's query rows. Not the 64-row kernels' RowPairState
// (kernels/common/softmax.cuh): here the query rows are the wgmma's columns, kRows / 4 of them per thread,
// and ds_mla keeps O in units of its largest scale factor h.
template <int kRows>
struct RowState {
  static constexpr int kN = NarrowConfig<kRows>::kRowsPerThread;
  float m[kN];  // running max (score units)
  float l[kN];  // this thread's share of the row sums
  // ds_mla: O is kept in units of 1 / h, h the largest scale factor `hi` seen so far (so that
  // P * hi_t / h <= 1 fits fp16); 1 for e4m3.
  float h = 0.f;
  __device__ RowState() {
#pragma unroll
    for (int i = 0; i < kN; ++i) {
      m[i] = -INFINITY;
      l[i] = 0.f;
    }
  }
};

// One tile's softmax step: masks S^T, turns it into P^T in shared memory (buffer `p_buf`; ds_mla:
// times hi_t / h) and returns the rescale factors of O (alpha_o) and l (alpha). hi0 / hi1: the
// thread's tokens' scale factors (ds_mla; 0 past seqlen). `me`: the consumer. Keys a row may see are
// those below key_limit (seqlen, or the causal limit of its query token); `min_limit` is the m-tile's
// smallest, so tiles below it need no mask and the rows' limits are only computed for the last tile
// or two.
// Lazy rescaling (as in the portable kernel, kLazyRescaleLog2): the weights are first taken against
// the running max and h as they stand, so no maxima are exchanged, alpha = 1 and the step has one
// barrier. Only when a weight would exceed 2^kLazyRescaleLog2 or a token's hi exceeds h (then P * hi / h
// might not fit fp16) is the tile redone exactly, with the rows' new max across the warpgroup.
template <int kKind, typename PT, int kRows>
__device__ __forceinline__ void softmax_step(NarrowSharedStorage<kKind, kRows>& sm, int me, int p_buf,
                                             float (&s)[kRows / 2], const Lane& ln, const DecodeParams& p, int seqlen,
                                             int m_tile, int first_token, int min_limit, float scale_log2, float hi0,
                                             float hi1, RowState<kRows>& rs, float (&alpha)[kRows / 4],
                                             float (&alpha_o)[kRows / 4]) {
  constexpr int kN = kRows / 4;
  if (first_token + kTileTokens > min_limit) {  // uniform
#pragma unroll
    for (int i = 0; i < kN; ++i) {
      const int limit = key_limit(p, seqlen, m_tile * kRows + row_of(i, ln.c));
      s[score_of(i)] = first_token + ln.tok0 >= limit ? -INFINITY : s[score_of(i)];
      s[score_of(i) + 2] = first_token + ln.tok1 >= limit ? -INFINITY : s[score_of(i) + 2];
    }
  }
  const uint32_t p_base = smem_addr(sm.p[me][p_buf]);
  // P^T[n][tok] (the PV k order is the tokens' own, pv_token), for rows' bases in log2 units. Returns
  // whether a weight's exponent passes its row's lazy limit: x - limit > 0 (NaN, which fmaxf drops, for
  // a masked score of a row with no key yet, whose limit is -inf).
  auto store_weights = [&](const float (&base)[kN], float f0, float f1, float (&sum)[kN]) {
    float x_max = -INFINITY;
#pragma unroll
    for (int i = 0; i < kN; ++i) {
      const int n = row_of(i, ln.c);
      const float x0 = fmaf(s[score_of(i)], scale_log2, -base[i]);
      const float x1 = fmaf(s[score_of(i) + 2], scale_log2, -base[i]);
      x_max = fmaxf(x_max, fmaxf(x0, x1) - lazy_rescale_limit(rs.m[i]));
      const float p0 = exp2_ftz(x0), p1 = exp2_ftz(x1);
      sum[i] = p0 + p1;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int k = h ? ln.tok1 : ln.tok0;
        const uint16_t v = static_cast<uint16_t>(pack2<PT>(h ? p1 * f1 : p0 * f0, 0.f));  // P^T's type (NarrowPType)
        sts16(p_base + sw128_offset(n, k / 8) + (k % 8) * 2, v);
      }
    }
    fence_proxy_async();  // P^T is read by wgmma
    return x_max > 0.f;
  };
  float base[kN], sum[kN];
#pragma unroll
  for (int i = 0; i < kN; ++i) base[i] = softmax_base(rs.m[i]) * scale_log2;
  bool over;
  if constexpr (kKind == kKvDsMla) {
    // hi_t <= h keeps P * hi_t / h <= P (h and hi are powers of two: the factor is exact).
    const float inv_h = rs.h > 0.f ? 1.f / rs.h : 0.f;
    over = store_weights(base, hi0 * inv_h, hi1 * inv_h, sum) || fmaxf(hi0, hi1) > rs.h;
  } else {
    over = store_weights(base, 1.f, 1.f, sum);
  }
  if (!named_barrier_sync_or(kBarWarpgroup0 + me, 128, over)) {
#pragma unroll
    for (int i = 0; i < kN; ++i) {
      alpha[i] = alpha_o[i] = 1.f;
      rs.l[i] += sum[i];
    }
    return;
  }

  // Exact: the rows' new max (and h) across the warpgroup, then the weights against them.
  float mx[kN];
#pragma unroll
  for (int i = 0; i < kN; ++i) {
    mx[i] = fmaxf(s[score_of(i)], s[score_of(i) + 2]);
#pragma unroll
    for (int o = 4; o < 32; o *= 2) mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], o));
  }
  float hmax = 0.f;
  if constexpr (kKind == kKvDsMla) {
    hmax = fmaxf(hi0, hi1);
#pragma unroll
    for (int o = 4; o < 32; o *= 2) hmax = fmaxf(hmax, __shfl_xor_sync(0xffffffffu, hmax, o));
  }
  if (ln.g == 0) {
#pragma unroll
    for (int i = 0; i < kN; ++i) sm.red[me][ln.warp][row_of(i, ln.c)] = mx[i];
    if (kKind == kKvDsMla && ln.c == 0) sm.red_hi[me][ln.warp] = hmax;
  }
  named_barrier_sync(kBarWarpgroup0 + me, 128);
  float h_ratio = 1.f, f0 = 1.f, f1 = 1.f;  // O's rescale for a new h; P's factors hi_t / h
  if constexpr (kKind == kKvDsMla) {
    const float h_new = fmaxf(rs.h, fmaxf(fmaxf(sm.red_hi[me][0], sm.red_hi[me][1]),
                                          fmaxf(sm.red_hi[me][2], sm.red_hi[me][3])));
    h_ratio = h_new == rs.h ? 1.f : rs.h / h_new;
    rs.h = h_new;
    f0 = hi0 / h_new;
    f1 = hi1 / h_new;
  }
#pragma unroll
  for (int i = 0; i < kN; ++i) {
    const int n = row_of(i, ln.c);
    float m_new = fmaxf(fmaxf(sm.red[me][0][n], sm.red[me][1][n]), fmaxf(sm.red[me][2][n], sm.red[me][3][n]));
    m_new = fmaxf(m_new, rs.m[i]);
    alpha[i] = m_new == -INFINITY ? 1.f : exp2f((rs.m[i] - m_new) * scale_log2);
    alpha_o[i] = alpha[i] * h_ratio;
    base[i] = softmax_base(m_new) * scale_log2;
    rs.m[i] = m_new;
  }
  store_weights(base, f0, f1, sum);
#pragma unroll
  for (int i = 0; i < kN; ++i) rs.l[i] = rs.l[i] * alpha[i] + sum[i];
  named_barrier_sync(kBarWarpgroup0 + me, 128);
}

// O^T columns (query rows) times per-row factors: rows i of the thread, both of its dims per m-block.
template <int kRows>
__device__ __forceinline__ void scale_rows(float (&o)[8][kRows / 2], const float (&f)[kRows / 4]) {
#pragma unroll
  for (int b = 0; b < 8; ++b)
#pragma unroll
    for (int i = 0; i < kRows / 4; ++i) {
      o[b][score_of(i)] *= f[i];
      o[b][score_of(i) + 2] *= f[i];
    }
}

template <int kRows>
__device__ __forceinline__ void rescale(float (&o)[8][kRows / 2], const float (&alpha)[kRows / 4]) {
  bool any = false;
#pragma unroll
  for (int i = 0; i < kRows / 4; ++i) any |= alpha[i] != 1.f;
  if (__any_sync(0xffffffffu, any)) scale_rows<kRows>(o, alpha);
}

}  // namespace openmla::kernels::sm90::narrow
