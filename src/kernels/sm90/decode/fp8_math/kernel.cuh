// sm90a split-KV MLA decode with FP8 math (opt-in, per-tensor e4m3 caches): config.h.
//
// The wide kernel's seesaw (kernel.cuh: pairs of tiles; here at every row count) and a producer
// warpgroup, with both products on e4m3 wgmma (k = 32, twice the bf16 rate, half the operand bytes);
// the page as copied and its V^T live in separate rings (config.h):
//   - Q: each query row quantized once per segment to e4m3 with its own power-of-two scale
//     (fp8_math_query_exponent: the smallest 2^e with amax <= 448 * 2^e); S is scaled back by it.
//   - S = Q K^T reads the page as copied (TMA, 64-B swizzle: K-major for both operands).
//   - O += P V: 8-bit wgmma takes B K-major only, so the producer warps write V^T (512 dims x 64
//     tokens) per page. Its token order is the one in which P's S-accumulator registers are already
//     the A fragments of the e4m3 PV (position 32 kk + 16 h + 4 c + j holds token
//     32 kk + 16 h + 2 c + {0, 1, 8, 9}[j]), so the owner multiplies P from registers without shuffles.
//   - P = exp2(x - base) with base = ceil(running max) in log2 units, stored as e4m3(256 P): every
//     rescale factor is a power of two, so a weight's rounding does not depend on the tile order or
//     the split (e4m3 rounding commutes with powers of two); the row sums add the unrounded P.
// Guards as in the wide kernel; tokens past seqlen get zero V^T bytes (their scores are masked).
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "core/fp8_math.h"
#include "kernels/arch/sm80.cuh"
#include "kernels/arch/sm90/ptx.cuh"
#include "kernels/arch/sm90/wgmma_ops.cuh"
#include "kernels/arch/sync.cuh"
#include "kernels/common/decode_params.h"
#include "kernels/common/fp8_registers.cuh"
#include "kernels/common/page_table.cuh"
#include "kernels/common/segment.cuh"
#include "kernels/common/softmax.cuh"
#include "kernels/sm90/decode/fp8_math/config.h"
#include "kernels/sm90/decode/o_fragment.cuh"
#include "kernels/sm90/decode/tile_mask.cuh"
#include "openmla/error.h"

namespace openmla::kernels::sm90::fp8_math {

using Cfg = Fp8MathConfig;
using Smem = Fp8MathSharedStorage;

// ---- operand descriptors (all K-major, 64-B swizzle) -------------------------------------------

// Q (A of S) and K (B of S) for k-step ks of 18: box ks / 2, +32 B for the second half of a row.
__device__ __forceinline__ uint64_t q_desc(const Smem& sm, int ks) {
  return desc_advance(sw64_desc(smem_addr(sm.q)), (ks / 2) * Cfg::kBoxBytes + (ks % 2) * 32);
}
__device__ __forceinline__ uint64_t k_desc(const Smem& sm, int stage, int ks) {
  return desc_advance(sw64_desc(smem_addr(sm.k[stage])), (ks / 2) * Cfg::kBoxBytes + (ks % 2) * 32);
}
// V^T half (B of O += P V: N = 256 dims, K = 64 token positions) and P (A: 64 rows x 64 positions).
__device__ __forceinline__ uint64_t vt_desc(const Smem& sm, int stage, int half, int kk) {
  return desc_advance(sw64_desc(smem_addr(sm.vt[stage])), half * Cfg::kVtHalfBytes + kk * 32);
}
__device__ __forceinline__ uint64_t p_desc(const uint8_t* p_tile, int kk) {
  return desc_advance(sw64_desc(smem_addr(p_tile)), kk * 32);
}

// ---- e4m3 helpers ----------------------------------------------------------------------------

// Two floats -> two e4m3 (round to nearest even, saturating) in the low 16 bits, lo first.
__device__ __forceinline__ uint32_t e4m3x2(float lo, float hi) {
  return static_cast<uint32_t>(__nv_cvt_float2_to_fp8x2(make_float2(lo, hi), __NV_SATFINITE, __NV_E4M3));
}
__device__ __forceinline__ uint32_t e4m3x4(float a, float b, float c, float d) {
  return e4m3x2(a, b) | (e4m3x2(c, d) << 16);
}

// ---- Q: quantize once per segment ----------------------------------------------------------------

// Q rows of this m-tile as e4m3 (row r over 4 threads, 18 chunks of 8 values each) and each row's
// scale. Rows past s_q * h_q are zero. 256 consumer threads. One pass: a thread's 18 chunks are all in
// flight at once (72 registers, at the segment's start, where the tile loop's are free), then the
// quad's max and the conversion. The rows are in L2 by then (prefetch_q_l2, issued a segment ahead)
// except for a part's first segment. Two passes over the row (max, then convert) with fewer loads in
// flight each would expose the load latency twice per segment.
template <typename T>
__device__ __forceinline__ void load_q_e4m3(const DecodeParams& p, int req, int m_tile, Smem& sm, int tid) {
  constexpr int kChunks = kHeadDimQK / 8;     // 72 chunks of 8 values (16 B)
  constexpr int kPerThread = kChunks / 4;     // 18
  const int r = tid / 4, part = tid % 4;
  const int row = m_tile * Cfg::kRows + r;
  const bool valid = row < p.rows;
  const uint4* src = reinterpret_cast<const uint4*>(p.q);
  if (valid) {
    const auto [qi, head] = query_row(p, row);
    src = reinterpret_cast<const uint4*>(static_cast<const T*>(p.q) + q_offset(p, req, qi, head));
  }
  uint4 v[kPerThread];
#pragma unroll
  for (int i = 0; i < kPerThread; ++i) v[i] = valid ? src[part + 4 * i] : make_uint4(0, 0, 0, 0);
  float amax = 0.f;
#pragma unroll
  for (int i = 0; i < kPerThread; ++i) {
    const T* x = reinterpret_cast<const T*>(&v[i]);
#pragma unroll
    for (int j = 0; j < 8; ++j) amax = fmaxf(amax, fabsf(static_cast<float>(x[j])));
  }
  amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 1));
  amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 2));
  const int e = detail::fp8_math_query_exponent(amax);
  const float inv = __uint_as_float(static_cast<uint32_t>(127 - e) << 23);  // 2^-e, exact
  if (part == 0) sm.q_scale[r] = __uint_as_float(static_cast<uint32_t>(127 + e) << 23);
  // Chunk part + 4i of the row (dims 8 (part + 4i) ..) lands in box i / 2, 16-B column part / 2 + 2 (i % 2),
  // half part % 2: two addresses and constant offsets (computing each chunk's swizzled offset made ptxas
  // hoist 18 of them out of the segment loop and spill them).
  uint8_t* const dst0 = sm.q + sw64_offset(r, part / 2) + (part % 2) * 8;
  uint8_t* const dst1 = sm.q + sw64_offset(r, part / 2 + 2) + (part % 2) * 8;
#pragma unroll
  for (int i = 0; i < kPerThread; ++i) {
    const T* x = reinterpret_cast<const T*>(&v[i]);
    const uint2 w = make_uint2(
        e4m3x4(static_cast<float>(x[0]) * inv, static_cast<float>(x[1]) * inv, static_cast<float>(x[2]) * inv,
               static_cast<float>(x[3]) * inv),
        e4m3x4(static_cast<float>(x[4]) * inv, static_cast<float>(x[5]) * inv, static_cast<float>(x[6]) * inv,
               static_cast<float>(x[7]) * inv));
    *reinterpret_cast<uint2*>((i % 2 ? dst1 : dst0) + (i / 2) * Cfg::kBoxBytes) = w;
  }
}

// Segment req's Q rows of this m-tile into L2, one bulk prefetch per row (64 threads), so that its
// load_q_e4m3 a segment later reads L2 rather than HBM.
template <typename T>
__device__ __forceinline__ void prefetch_q_l2(const DecodeParams& p, int req, int m_tile, int tid) {
  const int row = m_tile * Cfg::kRows + tid;
  if (tid >= Cfg::kRows || row >= p.rows) return;
  const auto [qi, head] = query_row(p, row);
  bulk_prefetch_l2(static_cast<const T*>(p.q) + q_offset(p, req, qi, head), kHeadDimQK * sizeof(T));
}

// ---- producer: V^T ---------------------------------------------------------------------------

// V^T from the page as copied, with ldmatrix.trans / stmatrix on b16 (two dims as one element).
// A warp takes 16 dims x 32 tokens per step: ldmatrix.x4.trans reads four 8-token x 16-dim matrices
// (tokens 32 ui .. 32 ui + 31 of one 16-dim chunk, lane l giving the row of token 32 ui + l) and
// hands lane t, for each, tokens 2c and 2c + 1 (c = t % 4) of dims 2p and 2p + 1 (p = t / 4). One
// prmt then makes the word of dim 2p (or 2p + 1) at V^T positions 4c..4c + 3 of chunk u, which hold
// tokens 2c, 2c + 1, 2c + 8, 2c + 9 of the chunk: the order of P's registers (top of this file).
// stmatrix writes the words: matrix m holds chunk u + m / 2, and lanes with p >= 4 give the odd dim
// where the others give the even one, so that each matrix has four even and four odd rows and hits
// eight different bank groups (the 64-B swizzle alone would pair rows 8 dims apart). Loads are
// conflict-free too (two rows per 128 B). Per warp and page: 16 ldmatrix, 64 prmt, 16 stmatrix, four
// loads in flight at a time (a 4 x 4 byte transposition with 32-bit loads takes 64 loads, 128 prmt
// and 16 stores, and bounds the kernel).
struct TransposeTask {
  uint32_t row;      // offset in a box of this lane's token row (token l of 32)
  uint32_t phase;    // its 64-B swizzle: chunk cc lands at cc ^ phase
  uint32_t store[2];  // [ui]: offset in a 16-dim block of V^T of this lane's stmatrix row, chunk 2 ui + m / 2
  uint32_t sel0, sel1;  // prmt selectors of matrices m even / odd: even dim (0x6420) or odd dim (0x7531)
  int token0;           // first token of this lane's words in chunk 0: 2 (t % 4)
  __device__ explicit TransposeTask(int lane) {
    row = lane * 64;
    phase = (lane >> 1) & 3;
    const int m = lane / 8, r = lane % 8;
    const int dim = 2 * r + ((m & 1) ^ (r >= 4 ? 1 : 0));
#pragma unroll
    for (int ui = 0; ui < 2; ++ui) store[ui] = sw64_offset(dim, 2 * ui + m / 2);
    const bool swap = lane / 4 >= 4;
    sel0 = swap ? 0x7531u : 0x6420u;
    sel1 = swap ? 0x6420u : 0x7531u;
    token0 = 2 * (lane % 4);
  }
};

// Zero bytes for tokens [valid, 64) of a word holding tokens t, t + 1, t + 8, t + 9.
__device__ __forceinline__ uint32_t mask_tokens(uint32_t word, int t, int valid) {
  const uint32_t keep = (t < valid ? 0xFFu : 0u) | (t + 1 < valid ? 0xFF00u : 0u) |
                        (t + 8 < valid ? 0xFF0000u : 0u) | (t + 9 < valid ? 0xFF000000u : 0u);
  return word & keep;
}

// One warp step: dims [16 gd, 16 gd + 16) for tokens [32 ui, 32 ui + 32): load, then convert and
// store. Tokens [valid, 64) get zero bytes (valid < 64 only in a request's last page).
__device__ __forceinline__ void transpose_load(uint32_t page, int gd, int ui, const TransposeTask& task,
                                               uint32_t (&r)[4]) {
  ldmatrix_x4_trans(r, page + (gd / 4) * Cfg::kBoxBytes + ui * 2048 + task.row + (((gd % 4) ^ task.phase) << 4));
}
template <bool kTail>
__device__ __forceinline__ void transpose_store(uint32_t vt, int gd, int ui, const TransposeTask& task, int valid,
                                                const uint32_t (&r)[4]) {
  uint32_t w[4] = {prmt(r[0], r[1], task.sel0), prmt(r[0], r[1], task.sel1), prmt(r[2], r[3], task.sel0),
                   prmt(r[2], r[3], task.sel1)};
  if constexpr (kTail) {
#pragma unroll
    for (int m = 0; m < 4; ++m) w[m] = mask_tokens(w[m], 16 * (2 * ui + m / 2) + task.token0, valid);
  }
  stmatrix_x4(vt + gd * 16 * Cfg::kVtRowBytes + task.store[ui], w);
}

// Dims [16 gd, 16 gd + 32) of all 64 tokens: four loads in flight, then four stores.
template <bool kTail>
__device__ __forceinline__ void transpose_steps(uint32_t page, uint32_t vt, int gd, const TransposeTask& task,
                                                int valid) {
  uint32_t r[4][4];
#pragma unroll
  for (int s = 0; s < 4; ++s) transpose_load(page, gd + s / 2, s % 2, task, r[s]);
#pragma unroll
  for (int s = 0; s < 4; ++s) transpose_store<kTail>(vt, gd + s / 2, s % 2, task, valid, r[s]);
}

// Where tile `it` of the CTA's sequence sits in a ring of kStages buffers, and the phase of that
// buffer's barriers (the parity a "full" wait expects; an "empty" wait expects the other one).
template <int kStages>
struct RingSlot {
  int stage;
  uint32_t parity;
  __device__ explicit RingSlot(uint32_t it) : stage(static_cast<int>(it % kStages)), parity((it / kStages) & 1) {}
};
using KSlot = RingSlot<Cfg::kKStages>;
using VtSlot = RingSlot<Cfg::kVtStages>;

// Copy-issuing thread: one page as stored into a K stage (one copy of 9 sub-tiles, on k_full). A bad
// page id is never a coordinate: recorded, the barrier completes without data, the consumers poison
// the segment.
__device__ __forceinline__ void load_page(const DecodeParams& p, Smem& sm, const CUtensorMap* map, int stage, int page,
                                          uint64_t policy) {
  const bool valid = page >= 0 && page < p.num_pages;
  uint64_t* bar = &sm.k_full[stage];
  if (!valid) {
    atomicOr(p.error_word, kDeviceErrorPageIdOutOfRange);
    mbarrier_arrive(bar);
    return;
  }
  mbarrier_arrive_expect_tx(bar, Cfg::kPageBytes);
  tma_load_4d(sm.k[stage], map, 0, 0, 0, page, bar, policy);
}

// The producer warpgroup. Warp w writes dims [128 w, 128 w + 128) of each page's V^T, that is half
// w / 2, as soon as the page landed and that half is free: each consumer's half comes back after its
// own last PV on it. Each writer acquires the consumers' release itself (see fp8_stage.cuh).
// Lane 0 of warp 3 copies the pages into the K ring (kKStages slots; a slot is free once its page's S
// and every warp's transposition of it are done): two pages ahead at the start, then, after its warp's
// transposition of page it, page it + 2 into the slot of page it - 1, whose S and transpositions are
// done by then, so that the blocking wait is short and its warp's next page is not held back.
// Alternatives that are slower: an issuer polling between its transposition steps leaves the ring short
// (consumer 0 waits for V^T); a polling loop instead of the blocking waits takes issue slots from the
// consumers; trying slots without blocking issues too late. (Page it + 3 into page it's own slot, blocking
// on its S, is as fast.) A page is one copy, so which warp issues it does not matter.
__device__ __forceinline__ void produce(const DecodeParams& p, const SplitPart& part, int part_idx, Smem& sm,
                                        const CUtensorMap* map) {
  static_assert(Cfg::kKStages >= 3, "page it + 2 goes into the slot of page it - 1");
  const int t = threadIdx.x;
  const int warp = t / 32, half = warp / 2;
  const bool issuer = t == 3 * 32;
  const TransposeTask task(t % 32);
  const uint64_t policy = l2_evict_first_policy();
  TileCursor cur(p, part, part_idx);
  TileCursor load = cur;
  uint32_t issued = 0;
  auto issue = [&] {  // the next page into its K slot, once the slot's previous page is done with
    const KSlot slot(issued);
    mbarrier_wait(&sm.k_empty[slot.stage], slot.parity ^ 1);
    load_page(p, sm, map, slot.stage, load.page_id(), policy);
    load.next();
    ++issued;
  };
  if (issuer) {
    for (int n = 0; n < 2 && load.valid(); ++n) issue();
  }
  for (uint32_t it = 0; cur.valid(); cur.next(), ++it) {
    const KSlot k(it);
    const VtSlot vt_slot(it);
    mbarrier_wait(&sm.vt_empty[vt_slot.stage][half], vt_slot.parity ^ 1);
    mbarrier_wait(&sm.k_full[k.stage], k.parity);
    const int valid = cur.tokens_in_tile();  // > 0; 64 except in the last page
    const uint32_t page = smem_addr(sm.k[k.stage]), vt = smem_addr(sm.vt[vt_slot.stage]);
    __syncwarp();  // ldmatrix / stmatrix are warp-collective
    if (valid >= Cfg::kTokens) {
#pragma unroll 1
      for (int g = 0; g < 8; g += 2) transpose_steps<false>(page, vt, 8 * warp + g, task, valid);
    } else {
#pragma unroll 1
      for (int g = 0; g < 8; g += 2) transpose_steps<true>(page, vt, 8 * warp + g, task, valid);
    }
    __syncwarp();  // the warp's reads of the page are done
    if (t % 32 == 0) mbarrier_arrive(&sm.k_empty[k.stage]);
    fence_proxy_async();  // V^T is read by wgmma
    mbarrier_arrive(&sm.vt_full[vt_slot.stage][half]);
    if (issuer && load.valid()) issue();  // page it + 2
  }
}

// ---- consumers -------------------------------------------------------------------------------

// S[64 x 64] = Q K^T over 576 dims, e4m3 (18 x k32).
__device__ __forceinline__ void issue_qk(Smem& sm, int stage, uint32_t parity, float (&s)[32]) {
  mbarrier_wait(&sm.k_full[stage], parity);
  fence_operands(s);
  wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < kHeadDimQK / 32; ++ks) wgmma_m64n64k32_ss_e4m3(s, q_desc(sm, ks), k_desc(sm, stage, ks), ks > 0);
  wgmma_commit();
  fence_operands(s);
}

__device__ __forceinline__ void issue_pv_rs(const Smem& sm, int stage, int half, uint32_t (&pa)[2][4], float (&o)[128]) {
  fence_operands(o);
  fence_operands(pa[0]);
  fence_operands(pa[1]);
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < 2; ++kk) wgmma_m64n256k32_rs_e4m3(o, pa[kk], vt_desc(sm, stage, half, kk), true);
  wgmma_commit();
  fence_operands(o);
  fence_operands(pa[0]);
  fence_operands(pa[1]);
}

__device__ __forceinline__ void issue_pv_ss(const Smem& sm, const uint8_t* p_tile, int stage, int half,
                                            float (&o)[128]) {
  fence_operands(o);
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < 2; ++kk) wgmma_m64n256k32_ss_e4m3(o, p_desc(p_tile, kk), vt_desc(sm, stage, half, kk), true);
  wgmma_commit();
  fence_operands(o);
}

static_assert(Cfg::kRows == kMaskTileRows && Cfg::kTokens == kMaskTileTokens, "TileMask's tile (tile_mask.cuh)");

struct SoftmaxStep {
  uint32_t pa[2][4];  // e4m3 A fragments of P V, k-steps 0 and 1
  float b0, b1;       // new bases
  float alpha0, alpha1;
  float sum0, sum1;
};

// x = S * scale_log2 (the row's Q scale applied); masks, new base = ceil(max), P = exp2(x - base),
// alpha = exp2(old base - new base) (a power of two), P as e4m3(256 P) in A-fragment order.
// limit0 / limit1: this thread's rows' limits, held through the segment (TileMask::limit).
__device__ __forceinline__ SoftmaxStep softmax_step(float (&s)[32], const TileMask& mask, int first_token, int c,
                                                    int limit0, int limit1, const RowPairState& rs, float scale0,
                                                    float scale1) {
#pragma unroll
  for (int n8 = 0; n8 < 8; ++n8) {
    s[4 * n8 + 0] *= scale0;
    s[4 * n8 + 1] *= scale0;
    s[4 * n8 + 2] *= scale1;
    s[4 * n8 + 3] *= scale1;
  }
  if (mask.needs_mask(first_token)) mask_scores(s, first_token, c, limit0, limit1);
  float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
  for (int n8 = 0; n8 < 8; ++n8) {
    mx0 = fmaxf(mx0, fmaxf(s[4 * n8 + 0], s[4 * n8 + 1]));
    mx1 = fmaxf(mx1, fmaxf(s[4 * n8 + 2], s[4 * n8 + 3]));
  }
  mx0 = quad_max(mx0);
  mx1 = quad_max(mx1);
  SoftmaxStep r;
  r.b0 = fmaxf(rs.m0, mx0 == -INFINITY ? -INFINITY : ceilf(mx0));
  r.b1 = fmaxf(rs.m1, mx1 == -INFINITY ? -INFINITY : ceilf(mx1));
  r.alpha0 = r.b0 == -INFINITY ? 1.f : exp2f(rs.m0 - r.b0);
  r.alpha1 = r.b1 == -INFINITY ? 1.f : exp2f(rs.m1 - r.b1);
  const float base0 = softmax_base(r.b0), base1 = softmax_base(r.b1);
  float (&e)[32] = s;  // P in place of S
#pragma unroll
  for (int n8 = 0; n8 < 8; ++n8) {
    e[4 * n8 + 0] = exp2_ftz(s[4 * n8 + 0] - base0);
    e[4 * n8 + 1] = exp2_ftz(s[4 * n8 + 1] - base0);
    e[4 * n8 + 2] = exp2_ftz(s[4 * n8 + 2] - base1);
    e[4 * n8 + 3] = exp2_ftz(s[4 * n8 + 3] - base1);
  }
  r.sum0 = r.sum1 = 0.f;
#pragma unroll
  for (int n8 = 0; n8 < 8; ++n8) {
    r.sum0 += e[4 * n8 + 0] + e[4 * n8 + 1];
    r.sum1 += e[4 * n8 + 2] + e[4 * n8 + 3];
  }
  // A fragment of k-step kk: [0] row g, positions 4c.. (tokens of n8 = 4kk, 4kk + 1), [1] row g + 8,
  // [2] / [3] the same for n8 = 4kk + 2, 4kk + 3.
  constexpr float kP = Cfg::kPScale;
#pragma unroll
  for (int kk = 0; kk < 2; ++kk) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int n0 = 4 * kk + 2 * h, n1 = n0 + 1;
      r.pa[kk][2 * h + 0] = e4m3x4(e[4 * n0 + 0] * kP, e[4 * n0 + 1] * kP, e[4 * n1 + 0] * kP, e[4 * n1 + 1] * kP);
      r.pa[kk][2 * h + 1] = e4m3x4(e[4 * n0 + 2] * kP, e[4 * n0 + 3] * kP, e[4 * n1 + 2] * kP, e[4 * n1 + 3] * kP);
    }
  }
  return r;
}

// P's e4m3 A fragments into a P tile (SW64, the layout p_desc reads), for the other consumer.
__device__ __forceinline__ void store_p_tile(uint8_t* p_tile, const uint32_t (&pa)[2][4], int c, int row0, int row1) {
#pragma unroll
  for (int kk = 0; kk < 2; ++kk) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      *reinterpret_cast<uint32_t*>(p_tile + sw64_offset(row0, 2 * kk + h) + 4 * c) = pa[kk][2 * h + 0];
      *reinterpret_cast<uint32_t*>(p_tile + sw64_offset(row1, 2 * kk + h) + 4 * c) = pa[kk][2 * h + 1];
    }
  }
}

// The rows' new base and alpha (lane 0 of each quad). The quad's other lanes read the previous values
// before (one warp, no other order between the lanes): racecheck wants that order explicit.
__device__ __forceinline__ void write_row_state(float* base, float* scale, const SoftmaxStep& st, int c, int row0,
                                                int row1) {
  __syncwarp();
  if (c == 0) {
    base[row0] = st.b0;
    base[row1] = st.b1;
    scale[row0] = st.alpha0;
    scale[row1] = st.alpha1;
  }
}

// P fragments times the rows' factors (powers of two <= 1): e4m3 -> f16 (exact), one f16 multiply
// (exact down to f16's subnormals, far below what e4m3 keeps), -> e4m3 (the one rounding, which for
// a power of two differs from rounding the scaled weight directly only among e4m3 subnormals, below
// 2^-14 of the row's largest weight). Skipped when the warp's rows all kept their base.
__device__ __forceinline__ void scale_p_rows(uint32_t (&pa)[2][4], float f0, float f1) {
  if (!__any_sync(0xffffffffu, f0 != 1.f || f1 != 1.f)) return;
  const __half2 h0 = __float2half2_rn(f0), h1 = __float2half2_rn(f1);
  const uint32_t m0 = *reinterpret_cast<const uint32_t*>(&h0), m1 = *reinterpret_cast<const uint32_t*>(&h1);
#pragma unroll
  for (int kk = 0; kk < 2; ++kk) {
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const uint32_t m = (r % 2) ? m1 : m0;  // [2h] row0, [2h + 1] row1
      __half2_raw lo, hi;
      const uint32_t lo_bits = hmul2(e4m3x2_to_f16x2_cvt<false>(pa[kk][r]), m);
      const uint32_t hi_bits = hmul2(e4m3x2_to_f16x2_cvt<true>(pa[kk][r]), m);
      lo.x = static_cast<unsigned short>(lo_bits & 0xFFFFu);
      lo.y = static_cast<unsigned short>(lo_bits >> 16);
      hi.x = static_cast<unsigned short>(hi_bits & 0xFFFFu);
      hi.y = static_cast<unsigned short>(hi_bits >> 16);
      pa[kk][r] = static_cast<uint32_t>(__nv_cvt_halfraw2_to_fp8x2(lo, __NV_SATFINITE, __NV_E4M3)) |
                  (static_cast<uint32_t>(__nv_cvt_halfraw2_to_fp8x2(hi, __NV_SATFINITE, __NV_E4M3)) << 16);
    }
  }
}

// What the consumers pass around: the segment, this thread's place, and where its state lives.
struct ConsumerView {
  const Segment& seg;
  const TileMask& mask;
  int limit0, limit1;  // this thread's rows' limits
  int tiles;
  int me, c, row0, row1;
  float scale0, scale1;
};

// The seesaw (FlashMLA's schedule, as in kernel.cuh's consume_seesaw): tiles in pairs (a, b) = (j, j + 1);
// consumer 0 computes S of every a, consumer 1 of every b, and each multiplies P of both by its half
// of V^T. Per pair:
//   consumer 0: softmax(S_a) | O0 += P_a V_a | P_a to b's base, for consumer 1 | O0 += P_b V_b | S of a + 2
//   consumer 1: softmax(S_b) after a's base | O1 += P_b V_b | O1 += P_a V_a | S of b + 2
// so one consumer's softmax runs under the other's wgmmas. The pages go back when their S is done
// (the K ring is separate from V^T), so the next pair's S never waits for a PV. The handoffs are
// rendezvous (`barrier.sync` on both sides) met in one order: Scale0, Scale1, P0. P_a and P_b have
// their own tiles (p[0], p[1]); every reuse of a shared word is ordered by those barriers and by
// each consumer's wgmma wait at the end of each pair. A missing b (odd tile count) skips its steps.
// The page ids are checked once per segment by the caller (segment_page_out_of_range), not per pair.
__device__ __forceinline__ void consume_seesaw(Smem& sm, const ConsumerView& v, uint32_t& it, float (&o)[128],
                                               RowPairState& rs) {
  const uint32_t it0 = it;  // the segment's first tile in the CTA's sequence
  float s[32];
  if (v.me < v.tiles) {  // S of this consumer's first tile
    const KSlot k(it0 + v.me);
    issue_qk(sm, k.stage, k.parity, s);
  }
  wgmma_wait<0>();
  fence_operands(s);
  if (v.me < v.tiles) mbarrier_arrive(&sm.k_empty[KSlot(it0 + v.me).stage]);

  for (int j = 0; j < v.tiles; j += 2) {
    const bool has_b = j + 1 < v.tiles;
    const int block_a = v.seg.block_begin + j, block_b = block_a + 1;
    const VtSlot vt_a(it0 + j), vt_b(it0 + j + 1);
    if (v.me == 0) {
      SoftmaxStep st =
          softmax_step(s, v.mask, block_a * Cfg::kTokens, v.c, v.limit0, v.limit1, rs, v.scale0, v.scale1);
      write_row_state(sm.row_base, sm.row_scale, st, v.c, v.row0, v.row1);
      named_barrier_wait(kFp8MathBarScale0, 256);
      rs.l0 = rs.l0 * st.alpha0 + st.sum0;
      rs.l1 = rs.l1 * st.alpha1 + st.sum1;
      rescale_rows(o, st.alpha0, st.alpha1);
      mbarrier_wait(&sm.vt_full[vt_a.stage][0], vt_a.parity);
      issue_pv_rs(sm, vt_a.stage, 0, st.pa, o);
      wgmma_wait<0>();
      fence_operands(o);
      mbarrier_arrive(&sm.vt_empty[vt_a.stage][0]);
      // b's base (a's again without b): P_a for consumer 1 and this consumer's O move to it.
      named_barrier_wait(kFp8MathBarScale1, 256);
      const float f0 = sm.row_scale_b[v.row0], f1 = sm.row_scale_b[v.row1];
      rs.m0 = sm.row_base[v.row0];
      rs.m1 = sm.row_base[v.row1];
      scale_p_rows(st.pa, f0, f1);
      store_p_tile(sm.p[0], st.pa, v.c, v.row0, v.row1);
      fence_proxy_async();
      named_barrier_wait(kFp8MathBarP0, 256);
      rs.l0 *= f0;
      rs.l1 *= f1;
      rescale_rows(o, f0, f1);
      if (has_b) {
        mbarrier_wait(&sm.vt_full[vt_b.stage][0], vt_b.parity);
        issue_pv_ss(sm, sm.p[1], vt_b.stage, 0, o);
      }
      const bool next = j + 2 < v.tiles;
      if (next) {
        const KSlot k(it0 + j + 2);
        issue_qk(sm, k.stage, k.parity, s);
        wgmma_wait<1>();  // P_b V_b is done
      } else {
        wgmma_wait<0>();
      }
      if (has_b) mbarrier_arrive(&sm.vt_empty[vt_b.stage][0]);
      wgmma_wait<0>();
      fence_operands(o);
      fence_operands(s);
      if (next) mbarrier_arrive(&sm.k_empty[KSlot(it0 + j + 2).stage]);
    } else {
      named_barrier_wait(kFp8MathBarScale0, 256);
      RowPairState at_a;  // the rows' base after a, and a's alpha
      at_a.m0 = sm.row_base[v.row0];
      at_a.m1 = sm.row_base[v.row1];
      float f0 = sm.row_scale[v.row0], f1 = sm.row_scale[v.row1];  // O1 and l1: from b - 2's base to this pair's last
      SoftmaxStep st;
      if (has_b) {
        st = softmax_step(s, v.mask, block_b * Cfg::kTokens, v.c, v.limit0, v.limit1, at_a, v.scale0, v.scale1);
        write_row_state(sm.row_base, sm.row_scale_b, st, v.c, v.row0, v.row1);
        f0 *= st.alpha0;
        f1 *= st.alpha1;
        rs.m0 = st.b0;
        rs.m1 = st.b1;
        store_p_tile(sm.p[1], st.pa, v.c, v.row0, v.row1);  // P_b goes out with b's base
        fence_proxy_async();
      } else {
        st.sum0 = st.sum1 = 0.f;
        __syncwarp();  // the quad's reads above are done before lane 0 writes
        if (v.c == 0) {
          sm.row_scale_b[v.row0] = 1.f;
          sm.row_scale_b[v.row1] = 1.f;
        }
        rs.m0 = at_a.m0;
        rs.m1 = at_a.m1;
      }
      named_barrier_wait(kFp8MathBarScale1, 256);
      rs.l0 = rs.l0 * f0 + st.sum0;
      rs.l1 = rs.l1 * f1 + st.sum1;
      rescale_rows(o, f0, f1);
      if (has_b) {
        mbarrier_wait(&sm.vt_full[vt_b.stage][1], vt_b.parity);
        issue_pv_rs(sm, vt_b.stage, 1, st.pa, o);
      }
      named_barrier_wait(kFp8MathBarP0, 256);
      mbarrier_wait(&sm.vt_full[vt_a.stage][1], vt_a.parity);
      issue_pv_ss(sm, sm.p[0], vt_a.stage, 1, o);
      if (has_b) {
        wgmma_wait<1>();  // P_b V_b is done
        mbarrier_arrive(&sm.vt_empty[vt_b.stage][1]);
      }
      wgmma_wait<0>();
      fence_operands(o);
      mbarrier_arrive(&sm.vt_empty[vt_a.stage][1]);
      const bool next = j + 3 < v.tiles;
      if (next) {
        const KSlot k(it0 + j + 3);
        issue_qk(sm, k.stage, k.parity, s);
      }
      wgmma_wait<0>();
      fence_operands(s);
      if (next) mbarrier_arrive(&sm.k_empty[KSlot(it0 + j + 3).stage]);
    }
  }
  it = it0 + v.tiles;
}

}  // namespace openmla::kernels::sm90::fp8_math

namespace openmla::kernels::sm90 {

// T: the query / output type. The cache is per-tensor e4m3 (its scale is in p.softmax_scale,
// p.scale_log2 and p.out_scale, as for the other kernels).
template <typename T>
__global__ void __launch_bounds__(Fp8MathConfig::kThreads, 1)
    fp8_math_decode_kernel(const DecodeParams p, const __grid_constant__ CUtensorMap kv_map) {
  using namespace fp8_math;
  extern __shared__ uint8_t smem_raw[];
  Smem& sm = *reinterpret_cast<Smem*>(smem_raw + ((1024u - (smem_addr(smem_raw) & 1023u)) & 1023u));
  const int warpgroup = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x / 128), 0);

  if (threadIdx.x == 0) {
    for (int s = 0; s < Cfg::kKStages; ++s) {
      mbarrier_init(&sm.k_full[s], 1);
      mbarrier_init(&sm.k_empty[s], 128 + Cfg::kTransposeWarps);
    }
    for (int s = 0; s < Cfg::kVtStages; ++s) {
      for (int h = 0; h < Cfg::kConsumers; ++h) {
        mbarrier_init(&sm.vt_full[s][h], Cfg::kVtHalfWriters);
        mbarrier_init(&sm.vt_empty[s][h], 128);
      }
    }
    fence_barrier_init();
  }
  __syncthreads();

  const int m_tile = wide_m_tile();
  const int part_idx = blockIdx.y;
  const SplitPart part = begin_part(p, part_idx);
  if (part.begin_req > part.end_req) return;

  if (warpgroup == 0) {
    warpgroup_reg_dealloc<Cfg::kProducerRegs>();
    if (threadIdx.x == 0) prefetch_tensor_map(&kv_map);
    produce(p, part, part_idx, sm, &kv_map);
    return;
  }

  warpgroup_reg_alloc<Cfg::kConsumerRegs>();
  const int me = warpgroup - 1;
  const int tid = threadIdx.x - 128;
  const int t = tid % 128, warp = t / 32, lane = t % 32;
  const int g = lane / 4, c = lane % 4;
  const int row0 = warp * 16 + g, row1 = row0 + 8;
  uint32_t it = 0;

  for (int req = part.begin_req; req <= part.end_req; ++req) {
    const Segment seg = make_segment(p, part, part_idx, req);
    const int tiles = seg.block_end - seg.block_begin;

    named_barrier_sync(kFp8MathBarConsumers, 256);  // previous segment's readers of Q, P, rows done
    if (tiles > 0) {
      load_q_e4m3<T>(p, req, m_tile, sm, tid);
      fence_proxy_async();
    }
    if (req < part.end_req) prefetch_q_l2<T>(p, req + 1, m_tile, tid);
    named_barrier_sync(kFp8MathBarConsumers, 256);
    // Scores in log2 units: S * q_scale * (softmax scale * kv scale * log2 e).
    const float scale0 = tiles > 0 ? sm.q_scale[row0] * p.scale_log2 : 0.f;
    const float scale1 = tiles > 0 ? sm.q_scale[row1] * p.scale_log2 : 0.f;

    const TileMask mask = TileMask::of_segment(p, seg.seqlen, m_tile);

    float o[128];
#pragma unroll
    for (int i = 0; i < 128; ++i) o[i] = 0.f;
    RowPairState rs;
    // The segment's page ids in one round of loads (this thread's share; write_segment_rows ORs them): the producer
    // never uses a bad id as a coordinate, and the segment is poisoned.
    const bool bad_page = segment_page_out_of_range(p, seg, tid, 256);
    const ConsumerView view{seg, mask, mask.limit(p, m_tile, row0), mask.limit(p, m_tile, row1), tiles, me, c, row0,
                            row1, scale0, scale1};
    consume_seesaw(sm, view, it, o, rs);

    // O holds sum(e4m3(256 P) * v_e4m3): / 256 and the cache scale; the bases are in log2 units.
    constexpr float kLn2 = 0.6931471805599453f;
    write_segment_rows<T, kFp8MathBarConsumers, kFp8MathFp16Partials>(
        p, seg, req, m_tile, Cfg::kRows, me, c, tid, row0, row1, o, rs.l0, rs.l1, rs.m0 * kLn2, rs.m1 * kLn2,
        Cfg::kPScale, p.out_scale, sm.row_sum, bad_page, [] {});
  }
}

}  // namespace openmla::kernels::sm90
