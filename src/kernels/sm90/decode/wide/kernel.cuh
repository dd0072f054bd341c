// sm90a split-KV MLA decode kernel, "wide" schedule (config.h).
//
// CTA (m_tile, part), 3 warpgroups:
//   producer: per KV tile, reads and range-checks the page id, waits for the stage (half) to be
//             free and issues the TMA boxes (page id = third coordinate of the map): a 16-bit
//             cache's 9 tiles, one copying thread per stage and half (lane 0 of warps 0-3), or an
//             FP8 page as stored, which the producer's four warps then expand in place into the
//             same 9 tiles (fp8_stage.cuh).
//   consumers 0 and 1: consumer c owns O[:, 256c, +256) and releases half c of a stage (its V
//             boxes) after its last read. Two schedules (WideSchedule, picked on the host):
//             alternating (consume_alternating): tile j's owner, consumer j % 2, computes S, the
//             softmax step and P, then both multiply P by their V halves; one tile at a time.
//             seesaw (consume_seesaw; 16-bit caches, >= 65 query rows): tiles in pairs, consumer 0
//             computes S of the first, consumer 1 of the second, so one consumer's softmax runs
//             under the other's wgmmas: it "see-saws" between them (docs/hopper-kernel.md).
// Guards as in the portable kernel (segment.cuh): a bad request covers no tile; a bad page id is
// never used as a coordinate (the producer skips the copy), the consumers check the segment's ids
// together before its tiles (segment_page_out_of_range) and the segment's rows become NaN. Tokens past
// seqlen in the last page are loaded but never weigh: their scores are masked and their V rows are
// zeroed in shared memory before PV (0 x NaN would be NaN).
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "kernels/arch/sm90/ptx.cuh"
#include "kernels/arch/sm90/wgmma_ops.cuh"
#include "kernels/arch/sync.cuh"
#include "kernels/common/convert.cuh"
#include "kernels/common/decode_params.h"
#include "kernels/common/fp16_query.cuh"
#include "kernels/common/page_table.cuh"
#include "kernels/common/segment.cuh"
#include "kernels/common/softmax.cuh"
#include "kernels/sm90/decode/o_fragment.cuh"
#include "kernels/sm90/decode/tile_mask.cuh"
#include "kernels/sm90/decode/wide/config.h"
#include "kernels/sm90/decode/wide/fp8_stage.cuh"
#include "kernels/sm90/decode/wide/seesaw_pairs.h"
#include "openmla/error.h"

namespace openmla::kernels::sm90 {

using Cfg = WideConfig;

// ---- operand descriptors ---------------------------------------------------------------------

// Each is the operand's base descriptor advanced by a constant (desc_advance), so that a wgmma costs one
// add per operand, not a re-encoded address.
// Q (A of S = Q K^T) for k-step ks of 36: box ks / 4, 32 B per k-step inside the 128-B row.
__device__ __forceinline__ uint64_t q_desc(const WideSharedStorage& sm, int ks) {
  return desc_advance(sw128_desc(smem_addr(sm.q), 16, 1024), (ks / 4) * Cfg::kBoxBytes + (ks % 4) * 32);
}
// K (B of S, K-major: tokens are N) of a stage, same stepping as Q.
__device__ __forceinline__ uint64_t k_desc(const WideSharedStorage& sm, int stage, int ks) {
  return desc_advance(sw128_desc(smem_addr(sm.kv[stage]), 16, 1024), (ks / 4) * Cfg::kBoxBytes + (ks % 4) * 32);
}
// V half (B of O += P V, MN-major: the tile's rows are K = tokens, its dims N). k-step kk covers
// tokens 16 kk..+16 (2 atoms of 8 rows); the 4 boxes of the half are the 64-column blocks.
__device__ __forceinline__ uint64_t v_desc(const WideSharedStorage& sm, int stage, int half, int kk) {
  return desc_advance(sw128_desc(smem_addr(sm.kv[stage]), Cfg::kBoxBytes, 1024),
                      half * Cfg::kHalfBoxes * Cfg::kBoxBytes + kk * 16 * 128);
}
// P (A of O += P V, K-major: 64 rows x 64 tokens, one 128-B row per query row) stored at `tile`.
__device__ __forceinline__ uint64_t p_desc(const uint8_t* tile, int kk) {
  return desc_advance(sw128_desc(smem_addr(tile), 16, 1024), kk * 32);
}


// ---- tile steps ------------------------------------------------------------------------------

// Q rows of this m-tile into the 9 swizzled boxes by TMA (one thread; rows past s_q * h_q are out of
// the map's bounds and land as zeros), completing on q_full. Row r of the m-tile is (token, head) =
// divmod(64 m_tile + r, h_q): the box's (h_q, s_q) extents are (h_q, 64 / h_q) below 64 heads, else (64, 1).
__device__ __forceinline__ void issue_q_load(const DecodeParams& p, const TensorMaps& maps, WideSharedStorage& sm,
                                             int req, int m_tile) {
  const QueryRow row0 = query_row(p, m_tile * Cfg::kRows);
  mbarrier_arrive_expect_tx(&sm.q_full, Cfg::kTileBytes);
#pragma unroll
  for (int box = 0; box < Cfg::kBoxes; ++box)
    tma_load_4d(sm.q + box * Cfg::kBoxBytes, &maps.q, box * Cfg::kBoxDims, row0.head, row0.token, req, &sm.q_full);
}

// The tile math's element type. Per-tensor e4m3 caches run their MMAs in fp16 whatever the query
// type: e4m3 -> f16 is one hardware conversion per pair of values (-> bf16 takes four instructions),
// and the expansion bounds that path. e4m3 values, the softmax's P in [0, 1] and
// the scaled query (below) are all in fp16's range; bf16 queries are converted once per segment.
template <typename T, int kKind>
using MathType = std::conditional_t<kKind == kKvE4M3, __half, T>;

// A bf16 Q tile (as issue_q_load wrote it) -> fp16 in place, times 2^-shift (common/fp16_query.cuh);
// returns the shift. 256 consumer threads; uses row_sum as scratch (free between segments).
__device__ __forceinline__ int q_to_fp16_in_place(WideSharedStorage& sm, int tid) {
  constexpr int kChunks = Cfg::kTileBytes / 16;
  float amax = 0.f;
  for (int i = tid; i < kChunks; i += 256) {
    const uint4 v = *reinterpret_cast<const uint4*>(sm.q + i * 16);
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) amax = fmaxf(amax, bf16x2_abs_max(w[j]));
  }
#pragma unroll
  for (int o = 16; o > 0; o /= 2) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
  if (tid % 32 == 0) sm.row_sum[0][tid / 32] = amax;
  named_barrier_sync(kBarConsumers, 256);
  amax = 0.f;
#pragma unroll
  for (int w = 0; w < 8; ++w) amax = fmaxf(amax, sm.row_sum[0][w]);
  const int shift = fp16_query_shift(amax);
  const float scale = exp2f(static_cast<float>(-shift));
  for (int i = tid; i < kChunks; i += 256) {
    uint4 v = *reinterpret_cast<const uint4*>(sm.q + i * 16);
    uint32_t* w = reinterpret_cast<uint32_t*>(&v);
#pragma unroll
    for (int j = 0; j < 4; ++j)
      w[j] = bf16x2_to_f16x2(w[j], scale);
    *reinterpret_cast<uint4*>(sm.q + i * 16) = v;
  }
  return shift;
}

// ptxas serializes every wgmma of the kernel (warnings C7514/C7515/C7519/C7520) if it sees a
// non-wgmma instruction touch an accumulator between wgmma.fence and the wait, or a branch between
// two wgmmas of a group. Hence: accumulators fenced before wgmma.fence and after the commit, the
// barrier waits before the first wgmma, and every wait unconditional.

// S[64 x 64] = Q K^T over 576 dims (all 9 boxes of the stage landed first).
template <typename T>
__device__ __forceinline__ void issue_qk(WideSharedStorage& sm, int stage, uint32_t parity, float (&s)[32]) {
#pragma unroll
  for (int box = 0; box < Cfg::kBoxes; ++box) mbarrier_wait(&sm.full[stage][box], parity);
  fence_operands(s);
  wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < kHeadDimQK / 16; ++ks) wgmma_m64n64k16_ss<T>(s, q_desc(sm, ks), k_desc(sm, stage, ks), ks > 0);
  wgmma_commit();
  fence_operands(s);
}

// Waits for the boxes of one V half (the other consumer's QK waited for all of them, but each
// thread that reads TMA data observes its barrier itself).
__device__ __forceinline__ void wait_v_half(WideSharedStorage& sm, int stage, int half, uint32_t parity) {
#pragma unroll
  for (int b = 0; b < Cfg::kHalfBoxes; ++b) mbarrier_wait(&sm.full[stage][half * Cfg::kHalfBoxes + b], parity);
}

// O_half[64 x 256] += P V_half, P from registers (the owner's) ...
template <typename T>
__device__ __forceinline__ void issue_pv_rs(const WideSharedStorage& sm, int stage, int half,
                                            uint32_t (&pa)[4][4], float (&o)[128]) {
  fence_operands(o);
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) fence_operands(pa[kk]);
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) wgmma_m64n256k16_rs_tb<T>(o, pa[kk], v_desc(sm, stage, half, kk), true);
  wgmma_commit();
  fence_operands(o);
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) fence_operands(pa[kk]);
}
// ... or from the P tile the other consumer stored.
template <typename T>
__device__ __forceinline__ void issue_pv_ss(const WideSharedStorage& sm, const uint8_t* p_stored, int stage, int half,
                                            float (&o)[128]) {
  fence_operands(o);
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) wgmma_m64n256k16_ss_tb<T>(o, p_desc(p_stored, kk), v_desc(sm, stage, half, kk), true);
  wgmma_commit();
  fence_operands(o);
}

// Zeroes V rows [valid, 64) of this consumer's half of a stage (tokens past seqlen). 128 threads.
__device__ __forceinline__ void zero_v_tail(WideSharedStorage& sm, int stage, int half, int valid, int t) {
  const int rows = Cfg::kTokens - valid;
  for (int i = t; i < rows * Cfg::kHalfBoxes * 8; i += 128) {
    const int chunk = i % 8, box = (i / 8) % Cfg::kHalfBoxes, r = valid + i / (8 * Cfg::kHalfBoxes);
    *reinterpret_cast<uint4*>(sm.kv[stage] + (half * Cfg::kHalfBoxes + box) * Cfg::kBoxBytes + r * 128 + chunk * 16) =
        make_uint4(0, 0, 0, 0);
  }
}


// ---- the softmax step and the two schedules -----------------------------------------------------

static_assert(Cfg::kRows == kMaskTileRows && Cfg::kTokens == kMaskTileTokens, "TileMask's tile (tile_mask.cuh)");

// One tile's softmax step on S (owner only): masks, new max, P = exp2(S - max) as the wgmma A
// fragments of P V, the rescale factors alpha of the old state, and the rows' sums of P.
// The max moves lazily: a row keeps its running max unless the tile's exceeds it by more than
// 2^kLazyRescaleLog2 in weight (P then stays below 2^8, far from overflow in bf16 / fp16 and fp32),
// so alpha stays 1 and both consumers skip rescaling O and P (rescale_rows, scale_p_rows) on most
// tiles, which the seesaw's long rows gain most from.
struct SoftmaxStep {
  float m0, m1, alpha0, alpha1, sum0, sum1;
  uint32_t pa[4][4];
};

// S itself is only read: the masked scores go to a separate array (an accumulator register defined
// by other instructions is what makes ptxas serialize wgmma once S is carried across a loop).
template <typename T>
__device__ __forceinline__ SoftmaxStep softmax_step(const float (&acc)[32], const DecodeParams& p, const TileMask& mask,
                                                    int first_token, int c, int row0, int row1, float m_prev0,
                                                    float m_prev1, float scale_log2) {
  float s[32];
#pragma unroll
  for (int i = 0; i < 32; ++i) s[i] = acc[i];
  if (mask.needs_mask(first_token))
    mask_scores(s, first_token, c, mask.limit_here(p, row0), mask.limit_here(p, row1));
  SoftmaxStep r;
  float mx0 = m_prev0, mx1 = m_prev1;
#pragma unroll
  for (int n8 = 0; n8 < 8; ++n8) {
    mx0 = fmaxf(mx0, fmaxf(s[4 * n8 + 0], s[4 * n8 + 1]));
    mx1 = fmaxf(mx1, fmaxf(s[4 * n8 + 2], s[4 * n8 + 3]));
  }
  r.m0 = quad_max(mx0);
  r.m1 = quad_max(mx1);
  r.m0 = lazy_running_max(m_prev0, r.m0, scale_log2);
  r.m1 = lazy_running_max(m_prev1, r.m1, scale_log2);
  r.alpha0 = r.m0 == -INFINITY ? 1.f : exp2f((m_prev0 - r.m0) * scale_log2);
  r.alpha1 = r.m1 == -INFINITY ? 1.f : exp2f((m_prev1 - r.m1) * scale_log2);
  const float base0 = softmax_base(r.m0) * scale_log2, base1 = softmax_base(r.m1) * scale_log2;
  r.sum0 = r.sum1 = 0.f;
#pragma unroll
  for (int n8 = 0; n8 < 8; ++n8) {
    const float e0 = exp2_ftz(fmaf(s[4 * n8 + 0], scale_log2, -base0));
    const float e1 = exp2_ftz(fmaf(s[4 * n8 + 1], scale_log2, -base0));
    const float e2 = exp2_ftz(fmaf(s[4 * n8 + 2], scale_log2, -base1));
    const float e3 = exp2_ftz(fmaf(s[4 * n8 + 3], scale_log2, -base1));
    r.sum0 += e0 + e1;
    r.sum1 += e2 + e3;
    // wgmma A fragment of k-step n8 / 2: {row g, row g+8} x {tokens 2c.., 2c+8..}
    r.pa[n8 / 2][(n8 % 2) * 2 + 0] = pack2<T>(e0, e1);
    r.pa[n8 / 2][(n8 % 2) * 2 + 1] = pack2<T>(e2, e3);
  }
  return r;
}

// A 64 x 64 P tile (this thread's fragments) into a K-major SW128 tile for the other consumer.
__device__ __forceinline__ void store_p_tile(uint8_t* tile, const uint32_t (&pa)[4][4], int c, int row0, int row1) {
#pragma unroll
  for (int n8 = 0; n8 < 8; ++n8) {
    *reinterpret_cast<uint32_t*>(tile + sw128_offset(row0, n8) + 4 * c) = pa[n8 / 2][(n8 % 2) * 2 + 0];
    *reinterpret_cast<uint32_t*>(tile + sw128_offset(row1, n8) + 4 * c) = pa[n8 / 2][(n8 % 2) * 2 + 1];
  }
}

// This thread's two rows' new max and rescale factor for the other consumer (lane 0 of each quad
// writes; the caller orders the quad's reads of the previous values before, with __syncwarp).
__device__ __forceinline__ void write_row_state(float* row_max, float* row_scale, float m0, float m1, float alpha0,
                                                float alpha1, int c, int row0, int row1) {
  if (c == 0) {
    row_max[row0] = m0;
    row_max[row1] = m1;
    row_scale[row0] = alpha0;
    row_scale[row1] = alpha1;
  }
}

// P (bf16/fp16) and the rows' new max and alpha into shared memory for the other consumer. The
// caller makes sure nobody still reads the previous P.
__device__ __forceinline__ void publish_p(WideSharedStorage& sm, const SoftmaxStep& st, int c, int row0, int row1) {
  // The quad's other lanes read this row's max and alpha in the previous tile (as the non-owner):
  // order those reads before lane 0's writes (one warp; racecheck wants the order explicit).
  __syncwarp();
  store_p_tile(sm.p, st.pa, c, row0, row1);
  write_row_state(sm.row_max, sm.row_scale, st.m0, st.m1, st.alpha0, st.alpha1, c, row0, row1);
  fence_proxy_async();  // P is read by the other consumer's wgmma
}

// Zeroes this consumer's half of V beyond seqlen in the segment's last tile (if it is partial). Its row and
// thread arithmetic starts from opaque values, so that nothing of it is computed ahead and held (spilled) through
// the tile loop for this rare path.
__device__ __forceinline__ void zero_tail_if_last(WideSharedStorage& sm, const TileMask& mask, int block, int stage,
                                                  uint32_t parity, int me) {
  const int first_token = block * Cfg::kTokens;
  if (first_token + Cfg::kTokens <= mask.seqlen) return;
  wait_v_half(sm, stage, me, parity);
  zero_v_tail(sm, stage, me, mask.seqlen - opaque(first_token), opaque(static_cast<int>(threadIdx.x)) % 128);
  fence_proxy_async();
  named_barrier_sync(kBarConsumer0 + me, 128);
}



// S (+)= Q K^T over boxes kFirst, kFirst + 1, ... (mod 9), kCount of them, each its own commit group
// issued as soon as the box landed, so that S starts on the boxes that came back first. kZero: the
// first box overwrites S.
template <typename T, int kFirst, int kCount, bool kZero>
__device__ __forceinline__ void issue_qk_boxes(WideSharedStorage& sm, int stage, uint32_t parity, float (&s)[32]) {
  if constexpr (kZero) {
    // wgmma names S as read-write even when it overwrites it: zeroing it first ends the previous S's
    // live range at the softmax (else it occupies 32 registers through the whole pair).
#pragma unroll
    for (int i = 0; i < 32; ++i) s[i] = 0.f;
  }
#pragma unroll
  for (int i = 0; i < kCount; ++i) {
    const int box = (kFirst + i) % Cfg::kBoxes;
    mbarrier_wait(&sm.full[stage][box], parity);
    fence_operands(s);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      const int ks = box * 4 + kk;
      wgmma_m64n64k16_ss<T>(s, q_desc(sm, ks), k_desc(sm, stage, ks), !(kZero && i == 0 && kk == 0));
    }
    wgmma_commit();
    fence_operands(s);
  }
}

// Alternating owners, one tile at a time: the owner of tile j (consumer j % 2) computes S, runs the
// softmax step, publishes P and multiplies its V half from registers; the other consumer waits for
// P and multiplies its half from shared memory. Each consumer waits for its previous PV before
// anything else in a tile and then releases that stage (one arrival per warp), so the producer
// refills it while the tile is computed. (Letting S queue behind the previous PV is not faster;
// docs/hopper-kernel.md.)
// kBoxByBox (FP8 caches): the owner's S starts on each group of boxes as the producer finishes
// expanding it, instead of waiting for the whole page (16-bit caches, whose boxes land by TMA at
// once, gain nothing that way and keep the single wait). rope_early: the owner gives box 8 back once S
// is done (the kernel's rope_early; 16-bit caches, few rows).
template <typename T, bool kBoxByBox>
__device__ __forceinline__ void consume_alternating(const DecodeParams& p, WideSharedStorage& sm, float scale_log2,
                                                    const Segment& seg, const TileMask& mask, int tiles, int me,
                                                    int lane, int c, int row0, int row1, uint32_t& it,
                                                    float (&o)[128], RowPairState& rs, bool rope_early) {
  // Every thread releases the stage itself: its own accesses (the tail zeroing included) are then
  // ordered before the next copy into it for racecheck too (a lane-0 arrival after the warpgroup
  // barrier orders them as well, but racecheck does not follow that chain).
  auto release = [&](uint32_t tile_it) { mbarrier_arrive(&sm.empty[tile_it % Cfg::kStages][me]); };
  for (int j = 0; j < tiles; ++j, ++it) {
    const int block = seg.block_begin + j;
    const int stage = it % Cfg::kStages;
    const uint32_t parity = (it / Cfg::kStages) & 1;
    const bool own = (j & 1) == me;
    // This consumer's PV of the previous tile is done: its stage goes back to the producer first.
    wgmma_wait<0>();
    fence_operands(o);
    if (j > 0) release(it - 1);
    zero_tail_if_last(sm, mask, block, stage, parity, me);

    SoftmaxStep st;
    if (own) {
      float s[32];
      if constexpr (kBoxByBox) {
        issue_qk_boxes<T, 0, Cfg::kBoxes, true>(sm, stage, parity, s);
      } else {
        issue_qk<T>(sm, stage, parity, s);
      }
      wgmma_wait<0>();
      fence_operands(s);
      if (rope_early) mbarrier_arrive(&sm.rope_empty[stage]);  // S was box 8's last reader
      st = softmax_step<T>(s, p, mask, block * Cfg::kTokens, c, row0, row1, rs.m0, rs.m1, scale_log2);
      publish_p(sm, st, c, row0, row1);
    } else {
      wait_v_half(sm, stage, me, parity);
    }
    // P handoff: both consumers meet at this one barrier instruction (a bar.arrive/bar.sync pair
    // would let the owner run ahead, but compute-sanitizer can then not order the row arrays'
    // reuse; the other consumer is waiting here anyway).
    named_barrier_sync(kBarPReady, 256);
    if (own) {
      rs.m0 = st.m0;
      rs.m1 = st.m1;
      rs.l0 = rs.l0 * st.alpha0 + st.sum0;
      rs.l1 = rs.l1 * st.alpha1 + st.sum1;
      rescale_rows(o, st.alpha0, st.alpha1);
      issue_pv_rs<T>(sm, stage, me, st.pa, o);
    } else {
      const float alpha0 = sm.row_scale[row0], alpha1 = sm.row_scale[row1];
      rs.m0 = sm.row_max[row0];
      rs.m1 = sm.row_max[row1];
      rs.l0 *= alpha0;
      rs.l1 *= alpha1;
      rescale_rows(o, alpha0, alpha1);
      issue_pv_ss<T>(sm, sm.p, stage, me, o);
    }
  }
  wgmma_wait<0>();
  fence_operands(o);
  if (tiles > 0) release(it - 1);
}

// ---- the seesaw schedule -----------------------------------------------------------------------

// P of a tile, for the other consumer: written over the tile's own rope box (box 8) once its S is done,
// which no one reads after S. The stage half that holds box 8 is released by the consumer that reads P
// (kernel below: the producer copies box 8 with consumer 1's half for tile a, with consumer 0's for b,
// or with consumer 1's for both when P_b is in the spare tile).
__device__ __forceinline__ uint8_t* p_tile(WideSharedStorage& sm, int stage) {
  return sm.kv[stage] + (Cfg::kBoxes - 1) * Cfg::kBoxBytes;
}
// Where P of a pair's second tile goes: over its rope box, or up to 128 rows the spare P tile (seesaw_pairs.h).
__device__ __forceinline__ uint8_t* p_b_tile(WideSharedStorage& sm, int stage_b, bool spare_pb) {
  return spare_pb ? sm.p : p_tile(sm, stage_b);
}

// P fragments (two rows per thread) times the rows' factors, in fp32, rounded once more.
template <typename T>
__device__ __forceinline__ void scale_p_rows(uint32_t (&pa)[4][4], float f0, float f1) {
  if (!__any_sync(0xffffffffu, f0 != 1.f || f1 != 1.f)) return;
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const float2 v = unpack2<T>(pa[kk][r]);
      const float f = (r % 2) ? f1 : f0;
      pa[kk][r] = pack2<T>(v.x * f, v.y * f);
    }
  }
}

// Tiles in pairs (a, b) = (j, j + 1) of a segment; consumer 0 computes S of every a, consumer 1 of
// every b, and each multiplies P of both tiles by its own V half (FlashMLA's "seesaw"). Per pair:
//   consumer 0: softmax(S_a) | O0 += P_a V_a | P_a rescaled to b's max for consumer 1 | O0 += P_b V_b
//               | S of a + 2 (boxes 0-3 first: its own half, released first)
//   consumer 1: softmax(S_b) after a's max | O1 += P_b V_b | O1 += P_a V_a | S of b + 2
// so one consumer's softmax runs while the other's wgmmas keep the tensor cores busy. Each consumer
// releases its V half of a stage after its last PV on it (the producer copies the halves separately),
// so S of the next pair starts on boxes that are already back. P of each tile is written
// over its tile's rope box (p_tile; up to 128 rows P_b goes to the spare P tile, p_b_tile). A missing b
// (odd tile count) skips its steps. The handoffs are
// rendezvous of both consumers (`barrier.sync` on both sides), met by both in one order per pair:
// Scale0 (a's max and alpha), Scale1 (b's max and alpha, and P_b), P0 (P_a at b's max). Faster than
// one-sided arrive/wait handoffs, and compute-sanitizer's racecheck orders them (it does not model
// `barrier.arrive`).
// The page ids are checked once per segment by the caller (segment_page_out_of_range), not per pair.
template <typename T>
__device__ __forceinline__ void consume_seesaw(const DecodeParams& p, WideSharedStorage& sm, float scale_log2,
                                               const Segment& seg, const TileMask& mask, int tiles, int me, int c,
                                               int row0, int row1, uint32_t& it, float (&o)[128], RowPairState& rs,
                                               bool spare_pb) {
  const uint32_t it0 = it;  // the segment's first tile in the stage sequence
  float s[32];
  // S of this consumer's first tile.
  if (me < tiles) {
    const uint32_t tile_it = it0 + me;
    if (me == 0) {
      issue_qk_boxes<T, 0, Cfg::kBoxes, true>(sm, tile_it % 2, (tile_it / 2) & 1, s);
    } else {
      issue_qk_boxes<T, Cfg::kHalfBoxes, Cfg::kBoxes, true>(sm, tile_it % 2, (tile_it / 2) & 1, s);
    }
  }
  wgmma_wait<0>();
  fence_operands(s);

  for (int j = 0; j < tiles; j += 2) {
    const bool has_b = j + 1 < tiles;
    const int block_a = seg.block_begin + j, block_b = block_a + 1;
    const uint32_t it_a = it0 + j, it_b = it_a + 1;
    const int stage_a = it_a % 2, stage_b = it_b % 2;
    const uint32_t parity_a = (it_a / 2) & 1, parity_b = (it_b / 2) & 1;
    if (me == 0) {
      SoftmaxStep st = softmax_step<T>(s, p, mask, block_a * Cfg::kTokens, c, row0, row1, rs.m0, rs.m1, scale_log2);
      __syncwarp();  // the quad's reads of the previous pair's values are done
      write_row_state(sm.row_max, sm.row_scale, st.m0, st.m1, st.alpha0, st.alpha1, c, row0, row1);
      named_barrier_wait(kBarScale0Ready, 256);
      rs.l0 = rs.l0 * st.alpha0 + st.sum0;
      rs.l1 = rs.l1 * st.alpha1 + st.sum1;
      rescale_rows(o, st.alpha0, st.alpha1);
      uint32_t (&pa)[4][4] = st.pa;
      zero_tail_if_last(sm, mask, block_a, stage_a, parity_a, 0);
      issue_pv_rs<T>(sm, stage_a, 0, pa, o);
      wgmma_wait<0>();
      fence_operands(o);
      mbarrier_arrive(&sm.empty[stage_a][0]);
      // b's max (or a's again without b): P_a for consumer 1 and this consumer's O move to it.
      named_barrier_wait(kBarScale1Ready, 256);
      const float f0 = sm.row_scale_b[row0], f1 = sm.row_scale_b[row1];
      rs.m0 = sm.row_max[row0];
      rs.m1 = sm.row_max[row1];
      scale_p_rows<T>(pa, f0, f1);
      store_p_tile(p_tile(sm, stage_a), pa, c, row0, row1);
      fence_proxy_async();
      named_barrier_wait(kBarP0Ready, 256);
      rs.l0 *= f0;
      rs.l1 *= f1;
      rescale_rows(o, f0, f1);
      if (has_b) {
        zero_tail_if_last(sm, mask, block_b, stage_b, parity_b, 0);
        issue_pv_ss<T>(sm, p_b_tile(sm, stage_b, spare_pb), stage_b, 0, o);
      }
      const bool next = j + 2 < tiles;
      if (next) {
        issue_qk_boxes<T, 0, Cfg::kHalfBoxes, true>(sm, stage_a, parity_a ^ 1, s);
        wgmma_wait<Cfg::kHalfBoxes>();  // P_b V_b is done
      } else {
        wgmma_wait<0>();
      }
      if (has_b) mbarrier_arrive(&sm.empty[stage_b][0]);
      if (next) issue_qk_boxes<T, Cfg::kHalfBoxes, Cfg::kBoxes - Cfg::kHalfBoxes, false>(sm, stage_a, parity_a ^ 1, s);
      wgmma_wait<0>();
      fence_operands(o);
      fence_operands(s);
    } else {
      named_barrier_wait(kBarScale0Ready, 256);
      const float alpha_a0 = sm.row_scale[row0], alpha_a1 = sm.row_scale[row1];
      const float m_a0 = sm.row_max[row0], m_a1 = sm.row_max[row1];
      SoftmaxStep st;
      float f0 = alpha_a0, f1 = alpha_a1;  // O1 and l1: from b - 2's max to this pair's last
      __syncwarp();  // the quad's reads above are done before lane 0 writes
      if (has_b) {
        st = softmax_step<T>(s, p, mask, block_b * Cfg::kTokens, c, row0, row1, m_a0, m_a1, scale_log2);
        write_row_state(sm.row_max, sm.row_scale_b, st.m0, st.m1, st.alpha0, st.alpha1, c, row0, row1);
        f0 *= st.alpha0;
        f1 *= st.alpha1;
        rs.m0 = st.m0;
        rs.m1 = st.m1;
      } else {
        st.sum0 = st.sum1 = 0.f;
        if (c == 0) {
          sm.row_scale_b[row0] = 1.f;
          sm.row_scale_b[row1] = 1.f;
        }
        rs.m0 = m_a0;
        rs.m1 = m_a1;
      }
      if (has_b) {  // P_b goes out with b's max
        store_p_tile(p_b_tile(sm, stage_b, spare_pb), st.pa, c, row0, row1);
        fence_proxy_async();
      }
      named_barrier_wait(kBarScale1Ready, 256);
      rs.l0 = rs.l0 * f0 + st.sum0;
      rs.l1 = rs.l1 * f1 + st.sum1;
      rescale_rows(o, f0, f1);
      if (has_b) {
        zero_tail_if_last(sm, mask, block_b, stage_b, parity_b, 1);
        issue_pv_rs<T>(sm, stage_b, 1, st.pa, o);
      }
      named_barrier_wait(kBarP0Ready, 256);
      zero_tail_if_last(sm, mask, block_a, stage_a, parity_a, 1);
      issue_pv_ss<T>(sm, p_tile(sm, stage_a), stage_a, 1, o);
      if (has_b) {
        wgmma_wait<1>();  // P_b V_b is done
        mbarrier_arrive(&sm.empty[stage_b][1]);
      }
      wgmma_wait<0>();
      fence_operands(o);
      mbarrier_arrive(&sm.empty[stage_a][1]);
      if (j + 3 < tiles) {
        // Its own half first (released above), then consumer 0's half of b's stage, in the order the producer copies
        // them. With P_b in the spare tile the rope box comes with its own half: 4-8, then 0-3. Else box 8 held P_b
        // and comes after 0-3, copied once consumer 0's P_b V_b is done: taking it before 0-3 would wait for the
        // half's last copy first.
        if (spare_pb) {
          issue_qk_boxes<T, Cfg::kHalfBoxes, Cfg::kBoxes, true>(sm, stage_b, parity_b ^ 1, s);
        } else {
          issue_qk_boxes<T, Cfg::kHalfBoxes, Cfg::kHalfBoxes, true>(sm, stage_b, parity_b ^ 1, s);
          issue_qk_boxes<T, 0, Cfg::kHalfBoxes, false>(sm, stage_b, parity_b ^ 1, s);
          issue_qk_boxes<T, Cfg::kBoxes - 1, 1, false>(sm, stage_b, parity_b ^ 1, s);
        }
      }
      wgmma_wait<0>();
      fence_operands(s);
    }
  }
  it = it0 + tiles;
}

// ---- the kernel ------------------------------------------------------------------------------

// The tensor maps the copies of a cache kind use, into the constant cache ahead of the first copy.
template <int kKind>
__device__ __forceinline__ void prefetch_kv_maps(const TensorMaps& maps) {
  prefetch_tensor_map(&maps.kv);
  if constexpr (kKind == kKvDsMla) {
    prefetch_tensor_map(&maps.scales);
    prefetch_tensor_map(&maps.rope);
  }
}

// Copy-issuing thread: one page into a stage (16-bit: the 9 tiles, each on its `full` barrier; FP8:
// the page as stored, on the stage's `raw` barrier). A bad page id is never a coordinate: it is
// recorded, the barriers complete without data, the stage keeps stale data and the consumers
// poison the segment.
// 16-bit caches copy the boxes [box_begin, box_end) (a stage half, kernel below).
template <int kKind>
__device__ __forceinline__ void load_page(const DecodeParams& p, WideSharedStorage& sm, const TensorMaps& maps,
                                          int stage, int page, uint64_t policy, int box_begin = 0,
                                          int box_end = Cfg::kBoxes) {
  const bool valid = page >= 0 && page < p.num_pages;
  if (!valid) atomicOr(p.error_word, kDeviceErrorPageIdOutOfRange);
  uint8_t* dst = sm.kv[stage];
  if constexpr (kKind == kKv16Bit) {
#pragma unroll
    for (int box = box_begin; box < box_end; ++box) {
      if (!valid) {
        mbarrier_arrive(&sm.full[stage][box]);
        continue;
      }
      mbarrier_arrive_expect_tx(&sm.full[stage][box], Cfg::kBoxBytes);
      tma_load_3d(dst + box * Cfg::kBoxBytes, &maps.kv, box * Cfg::kBoxDims, 0, page, &sm.full[stage][box], policy);
    }
  } else {
    // The whole page completes on one barrier: the expansion starts when all of it landed.
    using L = Fp8StageLayout<kKind>;
    uint64_t* bar = &sm.raw[stage][0];
    if (!valid) {
      mbarrier_arrive(bar);
      return;
    }
    constexpr uint32_t kRopeBytes = kKind == kKvDsMla ? Cfg::kBoxBytes : 0;
    mbarrier_arrive_expect_tx(bar, L::kExpandedBoxes * L::kRawBoxBytes + L::kScalesBytes + kRopeBytes);
    if constexpr (L::kHasScales) tma_load_3d(dst + L::kScalesOffset, &maps.scales, kDsMlaScalesOffset, 0, page, bar, policy);
    // kExpandedBoxes sub-tiles of 64 B x 64 tokens, one copy (encode_kv_maps: 576 / 64 chunks for e4m3, 512 / 64
    // for the ds_mla latent).
    static_assert(L::kRawBoxBytes == 64 * 64 && L::kExpandedBoxes * 64 == (kKind == kKvDsMla ? kHeadDimV : kHeadDimQK),
                  "the page map's chunks (tensor_maps.cu)");
    tma_load_4d(dst + L::kRawOffset, &maps.kv, 0, 0, 0, page, bar, policy);
    if constexpr (kKind == kKvDsMla)
      tma_load_3d(dst + Fp8StageLayout<kKvDsMla>::kRopeOffset, &maps.rope, kDsMlaRopeOffset, 0, page, bar, policy);
  }
}

// kFp16Partials: the kernel has the fp16 form of the partial rows (p.fp16_partials picks it per call; the seesaw's
// fp32 instantiation has none of its code: wide_fp16_partials in launch_config.h).
template <typename T, int kKind, WideSchedule kSchedule, bool kFp16Partials>
__global__ void __launch_bounds__(Cfg::kThreads, 1)
    wide_decode_kernel(const DecodeParams p, const __grid_constant__ TensorMaps maps) {
  extern __shared__ uint8_t smem_raw[];
  // Aligned by pointer arithmetic on the shared array itself (through a helper's pointer parameter
  // or an integer the compiler emits other code): shared-memory loads and stores, not generic ones.
  WideSharedStorage& sm =
      *reinterpret_cast<WideSharedStorage*>(smem_raw + ((1024u - (smem_addr(smem_raw) & 1023u)) & 1023u));
  // Broadcast from lane 0 so that the compiler knows the role is uniform across the warp: wgmma
  // issued under a branch it cannot prove uniform is serialized (ptxas C7520).
  const int warpgroup = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x / 128), 0);

  // With few rows the alternating schedule on a 16-bit cache gives box 8 back after S (rope_empty), and
  // lane 1 of producer warp 2 s copies it into stage s. One decision, read by both roles.
  constexpr bool kRopeEarlyKernel = kKind == kKv16Bit && kSchedule == WideSchedule::kAlternating;
  const bool rope_early = kRopeEarlyKernel && p.rows <= kRopeEarlyMaxRows;
  // The seesaw keeps P_b in the spare P tile up to kSeesawSparePbMaxRows rows (seesaw_pairs.h): where the
  // consumers store and read it, and which half of a stage the copy threads refill with box 8.
  const bool spare_pb = kSchedule == WideSchedule::kSeesaw && seesaw_spare_pb(p.rows);

  if (threadIdx.x == 0) {
    for (int s = 0; s < Cfg::kStages; ++s) {
      for (int b = 0; b < Cfg::kBoxes; ++b) {
        // 16-bit: the producer's expect_tx arrival; FP8: one arrival per dequantizing thread.
        mbarrier_init(&sm.full[s][b], kKind == kKv16Bit ? 1 : Cfg::kDequantThreads);
      }
      mbarrier_init(&sm.raw[s][0], 1);
      for (int h = 0; h < Cfg::kConsumers; ++h) mbarrier_init(&sm.empty[s][h], 128);  // consumer h's threads
      if constexpr (kRopeEarlyKernel) mbarrier_init(&sm.rope_empty[s], 128);  // the owner's threads
    }
    mbarrier_init(&sm.q_full, 1);
    fence_barrier_init();
  }
  __syncthreads();

  const int m_tile = wide_m_tile();
  const int part_idx = blockIdx.y;
  const SplitPart part = begin_part(p, part_idx);
  if (part.begin_req > part.end_req) return;
  const CallScales scales = call_scales<kKind>(p);

  if (warpgroup == 0) {
    // ---------------- producer ----------------
    warpgroup_reg_dealloc<Cfg::producer_regs(kKind)>();
    if constexpr (kKind != kKv16Bit) {
      if (threadIdx.x == 0) prefetch_kv_maps<kKind>(maps);
      const uint64_t policy = l2_evict_first_policy();
      expand_pages<MathType<T, kKind>, kKind>(
          p, part, part_idx, sm, [&](int stage, int page) { load_page<kKind>(p, sm, maps, stage, page, policy); });
      return;
    }
    // Lane 0 of warp 2 s + h copies half h of the pages of stage s as soon as consumer h released it:
    // the V boxes [4h, 4h + 4), and the rope box 8 when consumer h read the P that the stage's previous
    // tile wrote over it (seesaw: consumer 1 reads P of the first tile of a pair, consumer 0 of the
    // second; the alternating schedule reads box 8 only before both releases). A thread per stage as well
    // as per half: the seesaw's consumer 1 releases stage b's half before stage a's, and one thread
    // taking both stages' tiles in order would refill b only after a (docs/hopper-kernel.md).
    const bool rope_thread = rope_early && threadIdx.x % 32 == 1 && (threadIdx.x / 32) % Cfg::kConsumers == 0;
    if ((threadIdx.x % 32 != 0 && !rope_thread) || threadIdx.x / 32 >= Cfg::kStages * Cfg::kConsumers) return;
    const int half = (threadIdx.x / 32) % Cfg::kConsumers;
    const int my_stage = (threadIdx.x / 32) / Cfg::kConsumers;
    if (threadIdx.x == 0) {
      prefetch_kv_maps<kKind>(maps);
      issue_q_load(p, maps, sm, part.begin_req, m_tile);  // the first segment's Q, ahead of its pages
    }
    // Every CTA starts at once, and what its first S needs (Q and the first page) competes in HBM with
    // the second page: the copy of the first segment's second tile waits until Q has landed. (q_full
    // cannot pass phase 0 again before it: the next Q needs the consumers' S of this tile.)
    const uint64_t policy = l2_evict_first_policy();
    uint32_t it = 0;
    uint32_t second_of_pair = 0;  // rope_box_half's record of the stages' last tiles
    for (int req = part.begin_req; req <= part.end_req; ++req) {
      const Segment seg = make_segment(p, part, part_idx, req);
      for (int block = seg.block_begin; block < seg.block_end; ++block, ++it) {
        const int stage = it % Cfg::kStages;
        const int rope_half =  // every tile
            rope_box_half(second_of_pair, stage, block - seg.block_begin, spare_pb);
        if (stage != my_stage) continue;
        const int page = page_id(p, req, block);  // loads under the wait
        if (req == part.begin_req && block == seg.block_begin + 1) mbarrier_wait(&sm.q_full, 0);
        // Every release of this stage half is waited for, in order. A parity wait cannot tell phase k from
        // phase k + 2, so a waiter that skipped a release could pass while the stage is still in use (a variant
        // that let the consumers copy some tiles faulted that way: docs/hopper-kernel.md).
        if (rope_thread) {
          mbarrier_wait(&sm.rope_empty[stage], ((it / Cfg::kStages) & 1) ^ 1);
          load_page<kKind>(p, sm, maps, stage, page, policy, Cfg::kBoxes - 1, Cfg::kBoxes);
          continue;
        }
        mbarrier_wait(&sm.empty[stage][half], ((it / Cfg::kStages) & 1) ^ 1);
        load_page<kKind>(p, sm, maps, stage, page, policy, half * Cfg::kHalfBoxes, (half + 1) * Cfg::kHalfBoxes);
        if (!rope_early && rope_half == half)
          load_page<kKind>(p, sm, maps, stage, page, policy, Cfg::kBoxes - 1, Cfg::kBoxes);
      }
    }
    return;
  }

  // ---------------- consumers ----------------
  using MathT = MathType<T, kKind>;
  warpgroup_reg_alloc<Cfg::consumer_regs(kKind)>();
  const int me = warpgroup - 1;                       // consumer index = O column half
  const int tid = threadIdx.x - 128;                  // 0..255 over both consumers
  const int t = tid % 128, warp = t / 32, lane = t % 32;
  const int g = lane / 4, c = lane % 4;
  const int row0 = warp * 16 + g, row1 = row0 + 8;  // this thread's two rows of the m-tile
  uint32_t it = 0;
  // Q of every segment of the part is loaded, with or without tiles (q_full's phase = the segment's
  // index in the part): the first by the producer (16-bit caches) or below (FP8), each next one under
  // the previous segment's epilogue.

  for (int req = part.begin_req; req <= part.end_req; ++req) {
    const Segment seg = make_segment(p, part, part_idx, req);
    const int tiles = seg.block_end - seg.block_begin;

    // Previous segment's readers of Q, P and the row arrays are done.
    named_barrier_sync(kBarConsumers, 256);
    int q_shift = 0;  // Q is stored times 2^-q_shift (fp16 math for a bf16 query only)
    // FP8 caches: the first Q comes from here (the producer warpgroup is busy expanding the first page,
    // and issuing Q there is slower).
    if constexpr (kKind != kKv16Bit) {
      if (tid == 0 && req == part.begin_req) issue_q_load(p, maps, sm, req, m_tile);
    }
    mbarrier_wait(&sm.q_full, (req - part.begin_req) & 1);
    if (tiles > 0) {
      if constexpr (!std::is_same_v<MathT, T>) {
        q_shift = q_to_fp16_in_place(sm, tid);
        fence_proxy_async();  // the converted Q is read by wgmma
      }
    }
    named_barrier_sync(kBarConsumers, 256);
    const float q_unscale = exp2f(static_cast<float>(q_shift));  // scores back to the query's units

    const TileMask mask = TileMask::of_segment(p, seg.seqlen, m_tile);

    float o[128];
#pragma unroll
    for (int i = 0; i < 128; ++i) o[i] = 0.f;
    RowPairState rs;
    // The segment's page ids in one round of loads (this thread's share; write_segment_rows ORs them), so that the
    // tile loop holds no global load: the producer never uses a bad id as a coordinate, and the segment is poisoned.
    const bool bad_page = segment_page_out_of_range(p, seg, tid, 256);
    if constexpr (kSchedule == WideSchedule::kSeesaw) {
      consume_seesaw<MathT>(p, sm, p.scale_log2 * scales.score * q_unscale, seg, mask, tiles, me, c, row0, row1, it, o, rs, spare_pb);
    } else {
      consume_alternating<MathT, kKind != kKv16Bit>(p, sm, p.scale_log2 * scales.score * q_unscale, seg, mask, tiles, me, lane, c,
                                                    row0, row1, it, o, rs, rope_early);
    }
    const float lse_scale = p.softmax_scale * scales.score * q_unscale;  // raw scores to natural-log units
    // Once both consumers are past their last S (the row sums' barrier), the next segment's Q goes into
    // the Q buffer under this segment's output stores.
    const auto prefetch_next_q = [&] {
      if (tid == 0 && req < part.end_req) issue_q_load(p, maps, sm, req + 1, m_tile);
    };
    write_segment_rows<T, kBarConsumers, kFp16Partials>(p, seg, req, m_tile, Cfg::kRows, me, c, tid, row0, row1, o,
                                                        rs.l0, rs.l1, rs.m0 * lse_scale, rs.m1 * lse_scale, 1.f,
                                                        p.out_scale * scales.out, sm.row_sum, bad_page,
                                                        prefetch_next_q);
  }
}

}  // namespace openmla::kernels::sm90
