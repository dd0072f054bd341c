// sm90a split-KV MLA decode kernel, "narrow" schedule (config.h): FP8 pages, kRows = 16 query
// rows per CTA (or 32, from 64 requests: two consumer warpgroups on alternate tiles, merged once per segment);
// or 16-bit pages, 16 or 32 rows, one consumer warpgroup (kKv16Bit: both operands of every wgmma from
// shared memory, nothing converted; see the end of this comment).
//
// CTA (m_tile, part), 16 rows: 5 warps (32 rows: 12):
//   producer  (the warp after the consumers, or two: one copying, one finishing; with 32 rows in a
//             warpgroup): per KV tile, lane 0 reads and range-checks the page id, waits for the stage
//             to be free and copies the page (TMA, one barrier per stage; NarrowPage). A bad id is
//             never a coordinate: the barrier completes without data and the consumers poison the
//             segment. Once a page landed the warp zeroes its rows past seqlen and (ds_mla) factors
//             its scales (finish_page), then releases it (`ready`).
//   consumers (warps 0-3, one warpgroup; 32 rows: two), per tile:
//     S^T[64 tokens x kRows] = K Q^T: 36 wgmma m64nNk16 (N = kRows), K from registers (each
//       thread converts its two tokens' 16-byte chunks, e4m3 -> f16 in hardware; ds_mla: times the
//       fp16 part of the tile scale, the power-of-two part applied to the fp32 scores; its bf16
//       rope straight from shared memory in bf16 wgmmas), Q^T from shared memory;
//     the online-softmax step over the 64 tokens (rows are columns here: a max across the four
//       warps goes through shared memory), P^T to shared memory;
//     O^T[512 x kRows] += V^T P^T: 4 k-steps x 8 m-blocks of m64nNk16, V^T from registers (a thread
//       owns 16 consecutive dims and reads them for 4 tokens per k-step with one 16-B load each).
// The order of the 16 values of a QK k-step is free as long as both operands agree: a thread's
// fragment takes 4 consecutive dims, so that its loads are whole 16-B chunks, and Q^T is stored in
// the matching order (qk_chunk_dim below). PV reads four tokens per thread in their natural
// order. Each layout keeps a quarter-warp's 16-B loads in distinct bank groups (config.h).
// 16-bit pages: S^T = K Q^T with K as a K-major A operand straight from its 64-dim boxes, Q^T in natural
// dim order; O^T += V^T P^T with V^T as an MN-major A operand (m-block b = dims 64 b ..+64 = box b). A
// stage is released once the PV that reads it has completed (at the next tile, or the segment's end).
// The padding that the wide kernel's 64-row tile spends on 16-32 rows (2-4x the tensor work) is gone,
// which is what counts at the power cap (docs/hopper-kernel.md, "The narrow kernel on 16-bit caches").
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "kernels/common/decode_params.h"
#include "kernels/arch/sync.cuh"
#include "kernels/common/convert.cuh"
#include "kernels/common/softmax.cuh"
#include "kernels/common/partial_rows.h"
#include "kernels/common/sector_stores.cuh"
#include "kernels/common/segment.cuh"
#include "kernels/common/fp16_query.cuh"
#include "kernels/common/fp8_registers.cuh"
#include "kernels/arch/sm90/ptx.cuh"
#include "kernels/arch/sm90/wgmma_ops.cuh"
#include "kernels/sm90/decode/common.h"
#include "kernels/sm90/decode/narrow/config.h"
#include "openmla/error.h"

namespace openmla::kernels::sm90 {
namespace narrow {

// Named barriers (0 is __syncthreads): all consumer threads, and one per consumer warpgroup.
inline constexpr int kBarNarrowConsumers = 1;
inline constexpr int kBarWarpgroup0 = 2;  // + the consumer index
inline constexpr int kTileTokens = 64;

// wgmma m64nNk16, A from registers, B K-major: N = the CTA's query rows.
template <typename T, int kRows>
__device__ __forceinline__ void wgmma_rows(float (&d)[kRows / 2], const uint32_t (&a)[4], uint64_t desc_b,
                                           bool accumulate) {
  if constexpr (kRows == 16) {
    wgmma_m64n16k16_rs<T>(d, a, desc_b, accumulate);
  } else {
    wgmma_m64n32k16_rs<T>(d, a, desc_b, accumulate);
  }
}

// wgmma m64nNk16, both operands from shared memory (16-bit pages); kTransA: A MN-major (V^T).
template <typename T, int kRows, bool kTransA>
__device__ __forceinline__ void wgmma_rows_ss(float (&d)[kRows / 2], uint64_t desc_a, uint64_t desc_b,
                                              bool accumulate) {
  if constexpr (kRows == 16) {
    if constexpr (kTransA) wgmma_m64n16k16_ss_ta<T>(d, desc_a, desc_b, accumulate);
    else wgmma_m64n16k16_ss<T>(d, desc_a, desc_b, accumulate);
  } else {
    if constexpr (kTransA) wgmma_m64n32k16_ss_ta<T>(d, desc_a, desc_b, accumulate);
    else wgmma_m64n32k16_ss<T>(d, desc_a, desc_b, accumulate);
  }
}

// The type P^T is stored in: the cache's own for 16-bit pages (both PV operands alike), fp16 for FP8.
template <typename T, int kKind>
using NarrowPType = std::conditional_t<kKind == kKv16Bit, T, __half>;

// ---- primitives --------------------------------------------------------------------------------

__device__ __forceinline__ void sts16(uint32_t addr, uint16_t v) {
  asm volatile("st.shared.b16 [%0], %1;" ::"r"(addr), "h"(v));
}

// ---- operand layout ----------------------------------------------------------------------------

// QK's k order. A fragment thread (quad lane c) holds positions {2c, 2c+1, 2c+8, 2c+9} of a 16-dim
// k-step; it takes them from physical dims 4 s + {0, 1, 2, 3} of one 16-dim chunk of its own, so
// that one 16-B load of an e4m3 row covers four k-steps (s = 0..3) of a 64-dim block kb: position
// p of k-step s in block kb is dim qk_chunk_dim(kb, (p % 8) / 2) + 4 s + p % 2 + 2 (p / 8). The
// chunk of lane c in block kb < 8 is 2c + kb % 2 of the 128-dim group kb / 2 (the 16-B chunk index
// that keeps a quarter-warp's loads in distinct bank groups); the rope block (kb = 8) takes chunk c.
__host__ __device__ constexpr int qk_chunk_dim(int kb, int c) {
  return kb < 8 ? (kb / 2) * 128 + (2 * c + kb % 2) * 16 : kHeadDimV + c * 16;
}


// Q^T (B of S^T, K-major: kRows rows x 64 dims per box) and P^T (B of O^T, K-major: kRows rows x 64
// tokens) descriptors: the k-step's is the first one plus a constant (the address field counts 16 B).
template <int kRows>
struct Descriptors {
  uint64_t q, p;
  __device__ uint64_t q_step(int ks) const {
    return desc_advance(q, (ks / 4) * NarrowConfig<kRows>::kQBoxBytes + (ks % 4) * 32);
  }
  // P^T buffer `buf` (NarrowSharedStorage::p), k-step kk.
  __device__ uint64_t p_step(int buf, int kk) const {
    return desc_advance(p, buf * kRows * 128 + kk * 32);
  }
};

// ---- Q -----------------------------------------------------------------------------------------

// Q rows of this m-tile into Q^T, every 64-dim box's k-steps in QK's k order (qk_chunk_dim); rows past
// s_q * h_q are zero. The dims multiplied with e4m3 values are stored in fp16 (a bf16 query times
// 2^-shift, common/fp16_query.cuh; the shift is returned); ds_mla's rope dims (box 8) stay bf16, as
// its cache stores them. All consumer threads (8 per row).
template <typename T, int kKind, int kRows>
__device__ __forceinline__ int load_q(const DecodeParams& p, int req, int m_tile, NarrowSharedStorage<kKind, kRows>& sm,
                                      int t) {
  using Cfg = NarrowConfig<kRows>;
  constexpr bool kConvert = !std::is_same_v<T, __half>;
  constexpr int kFp16Boxes = kKind == kKvDsMla ? 8 : Cfg::kQBoxes;  // boxes multiplied with e4m3 values
  // Thread t: row t / 8, chunk t % 8 of every box (so every address is one base plus constants).
  static_assert(kRows * 8 == Cfg::kConsumerThreads, "one chunk column per consumer thread");
  const int r = t / 8, chunk = t % 8;
  const int step = chunk / 2, half = chunk % 2;
  const int row = m_tile * kRows + r;
  const char* q = static_cast<const char*>(p.q);
  uint32_t v[Cfg::kQBoxes][4];
  float amax = 0.f;
  const uint32_t* src = nullptr;
  if (row < p.rows) {
    const auto [qi, head] = query_row(p, row);
    src = reinterpret_cast<const uint32_t*>(q + q_offset(p, req, qi, head) * 2) +
          2 * step + half;
  }
#pragma unroll
  for (int box = 0; box < Cfg::kQBoxes; ++box) {
    // Positions 8 half + 2j, +1 of k-step `step` (stored as pair j of this chunk), per qk_chunk_dim.
#pragma unroll
    for (int j = 0; j < 4; ++j) v[box][j] = src ? src[qk_chunk_dim(box, j) / 2] : 0u;
    if (kConvert && box < kFp16Boxes) {
#pragma unroll
      for (int j = 0; j < 4; ++j) amax = fmaxf(amax, bf16x2_abs_max(v[box][j]));
    }
  }
  int shift = 0;
  if constexpr (kConvert) {
#pragma unroll
    for (int o = 16; o > 0; o /= 2) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    if (t % 32 == 0) sm.q_amax[t / 32] = amax;
    named_barrier_sync(kBarNarrowConsumers, Cfg::kConsumerThreads);
    amax = 0.f;
#pragma unroll
    for (int w = 0; w < Cfg::kConsumers * Cfg::kConsumerWarps; ++w) amax = fmaxf(amax, sm.q_amax[w]);
    shift = fp16_query_shift(amax);
    const float scale = exp2f(static_cast<float>(-shift));
#pragma unroll
    for (int box = 0; box < kFp16Boxes; ++box)
#pragma unroll
      for (int j = 0; j < 4; ++j)
        v[box][j] = bf16x2_to_f16x2(v[box][j], scale);
  }
#pragma unroll
  for (int box = 0; box < Cfg::kQBoxes; ++box)
    st_shared_v4(smem_addr(sm.q) + box * Cfg::kQBoxBytes + sw128_offset(r, chunk),
                 make_uint4(v[box][0], v[box][1], v[box][2], v[box][3]));
  return shift;
}

// ---- the two products --------------------------------------------------------------------------

// A thread's place in its consumer warpgroup's fragments.
struct Lane {
  int warp, g, c;  // warp inside the warpgroup
  int tok0, tok1;  // its two token rows of S^T: 16 warp + g, + 8
};

// The thread's 16-B chunk of 64-dim block kb (qk_chunk_dim) of token `tok`, e4m3 values (the latent,
// or e4m3's rope).
template <int kKind>
__device__ __forceinline__ uint32_t qk_chunk_addr(uint32_t stage_base, int kb, int tok, int c) {
  using Page = NarrowPage<kKind>;
  if constexpr (Page::kSwizzled) {
    if (kb < 8) return stage_base + (kb / 2) * Page::kLatentBoxBytes + sw128_offset(tok, 2 * c + kb % 2);
    return stage_base + Page::kRopeOffset + tok * Page::kRopeRowBytes + c * 16;
  } else {
    return stage_base + tok * Page::kRowBytes + qk_chunk_dim(kb, c);
  }
}

// The thread's 16 dims (16 (8 warp + g) + [0, 16)) of token `tok`, for V^T.
template <int kKind>
__device__ __forceinline__ uint32_t pv_chunk_addr(uint32_t stage_base, int tok, const int warp, int g) {
  using Page = NarrowPage<kKind>;
  if constexpr (Page::kSwizzled) {
    return stage_base + warp * Page::kLatentBoxBytes + sw128_offset(tok, g);
  } else {
    return stage_base + tok * Page::kRowBytes + (warp * 8 + g) * kNarrowDimsPerThread;
  }
}

__device__ __forceinline__ uint32_t broadcast_half(uint16_t h) { return static_cast<uint32_t>(h) * 0x10001u; }

// S^T = K Q^T over 576 dims: per 64-dim block, two 16-B loads (one per token row), eight
// conversions (ds_mla: and eight multiplies by the fp16 part of the tile scale) and four wgmmas.
// Groups of one block are committed separately so that only two blocks' fragments are live; the
// next block's bytes are loaded before this block's wgmmas issue. ds_mla: the latent scores are then
// scaled by the power-of-two part of the scale (`hi`, per token, times 2^q_shift) and the rope
// k-steps added in bf16 from shared memory. Leaves the last group in flight.
template <int kKind, int kRows>
__device__ __forceinline__ void issue_qk(uint32_t stage_base, const NarrowScaleTable& table,
                                         const Descriptors<kRows>& desc, const Lane& ln, float hi0, float hi1,
                                         float (&s)[kRows / 2]) {
  constexpr int kE4m3Blocks = kKind == kKvDsMla ? 8 : NarrowConfig<kRows>::kQBoxes;
  uint32_t lo0[4], lo1[4];  // ds_mla: the fp16 scale factors of tok0 / tok1 per tile, broadcast to pairs
  if constexpr (kKind == kKvDsMla) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      lo0[j] = broadcast_half(table.lo[j][ln.tok0]);
      lo1[j] = broadcast_half(table.lo[j][ln.tok1]);
    }
  }
  fence_operands(s);
  uint4 r0 = lds128(qk_chunk_addr<kKind>(stage_base, 0, ln.tok0, ln.c));
  uint4 r1 = lds128(qk_chunk_addr<kKind>(stage_base, 0, ln.tok1, ln.c));
#pragma unroll
  for (int kb = 0; kb < kE4m3Blocks; ++kb) {
    uint32_t a[4][4];
#pragma unroll
    for (int st = 0; st < 4; ++st) {
      a[st][0] = e4m3x2_to_f16x2<false>(word(r0, st));
      a[st][1] = e4m3x2_to_f16x2<false>(word(r1, st));
      a[st][2] = e4m3x2_to_f16x2<true>(word(r0, st));
      a[st][3] = e4m3x2_to_f16x2<true>(word(r1, st));
      if constexpr (kKind == kKvDsMla) {
        a[st][0] = hmul2(a[st][0], lo0[kb / 2]);
        a[st][1] = hmul2(a[st][1], lo1[kb / 2]);
        a[st][2] = hmul2(a[st][2], lo0[kb / 2]);
        a[st][3] = hmul2(a[st][3], lo1[kb / 2]);
      }
    }
    if (kb + 1 < kE4m3Blocks) {
      r0 = lds128(qk_chunk_addr<kKind>(stage_base, kb + 1, ln.tok0, ln.c));
      r1 = lds128(qk_chunk_addr<kKind>(stage_base, kb + 1, ln.tok1, ln.c));
    }
    wgmma_fence();
#pragma unroll
    for (int st = 0; st < 4; ++st) wgmma_rows<__half, kRows>(s, a[st], desc.q_step(kb * 4 + st), kb > 0 || st > 0);
    wgmma_commit();
    wgmma_wait<1>();
  }
  if constexpr (kKind == kKvDsMla) {
    // The rope: bf16 fragments as stored (k-step st of the thread: 8 B at 32c + 8st of the row).
    using Page = NarrowPage<kKvDsMla>;
    // bf16 dims qk_chunk_dim(8, c) + [0, 16): 32 B at 32c of the rope.
    const uint32_t rope0 = stage_base + ln.tok0 * Page::kRowBytes + Page::kRopeOffset + ln.c * 32;
    const uint32_t rope1 = stage_base + ln.tok1 * Page::kRowBytes + Page::kRopeOffset + ln.c * 32;
    const uint4 c00 = lds128(rope0), c01 = lds128(rope0 + 16);
    const uint4 c10 = lds128(rope1), c11 = lds128(rope1 + 16);
    uint32_t a[4][4];
#pragma unroll
    for (int st = 0; st < 4; ++st) {
      const uint4& t0 = st < 2 ? c00 : c01;
      const uint4& t1 = st < 2 ? c10 : c11;
      a[st][0] = word(t0, 2 * (st % 2));
      a[st][1] = word(t1, 2 * (st % 2));
      a[st][2] = word(t0, 2 * (st % 2) + 1);
      a[st][3] = word(t1, 2 * (st % 2) + 1);
    }
    wgmma_wait<0>();
    fence_operands(s);
#pragma unroll
    for (int n8 = 0; n8 < kRows / 8; ++n8) {
      s[4 * n8 + 0] *= hi0;
      s[4 * n8 + 1] *= hi0;
      s[4 * n8 + 2] *= hi1;
      s[4 * n8 + 3] *= hi1;
    }
    fence_operands(s);
    wgmma_fence();
#pragma unroll
    for (int st = 0; st < 4; ++st) wgmma_rows<__nv_bfloat16, kRows>(s, a[st], desc.q_step(32 + st), true);
    wgmma_commit();
  }
  fence_operands(s);
}

// O^T += V^T P^T: per k-step of 16 tokens, four 16-B loads (the thread's 16 dims of its four
// tokens, pv_token), two byte permutes and four conversions per m-block (ds_mla: and four multiplies by
// the tokens' fp16 scale factors of the thread's tile, which is its warp's); the next k-step's bytes
// are loaded before the second half of this one issues. Rows past seqlen were zeroed by the
// producer (finish_page). Each thread releases the stage after its last read (the wgmmas read
// only registers and P^T).
// The four tokens of k-step kk a thread reads: its fragment positions {2c, 2c+1, 2c+8, 2c+9} in
// their natural order (a quarter-warp then reads four tokens 2 apart: distinct bank groups).
__device__ __forceinline__ int pv_token(int kk, int c, int e) { return 16 * kk + 2 * c + (e & 1) + 8 * (e >> 1); }

template <int kKind>
__device__ __forceinline__ void pv_load(uint32_t stage_base, const NarrowScaleTable& table, const Lane& ln, int kk,
                                        uint4 (&r)[4], uint2& lo) {
#pragma unroll
  for (int e = 0; e < 4; ++e) r[e] = lds128(pv_chunk_addr<kKind>(stage_base, pv_token(kk, ln.c, e), ln.warp, ln.g));
  if constexpr (kKind == kKvDsMla) {
    lo.x = *reinterpret_cast<const uint32_t*>(&table.lo[ln.warp][pv_token(kk, ln.c, 0)]);
    lo.y = *reinterpret_cast<const uint32_t*>(&table.lo[ln.warp][pv_token(kk, ln.c, 2)]);
  }
}

template <int kKind, int kRows>
__device__ __forceinline__ void issue_pv(uint32_t stage_base, const NarrowScaleTable& table,
                                         const Descriptors<kRows>& desc, int p_buf, const Lane& ln, uint64_t* empty,
                                         float (&o)[8][kRows / 2]) {
#pragma unroll
  for (int b = 0; b < 8; ++b) fence_operands(o[b]);
  uint4 r[4];
  uint2 lo;
  pv_load<kKind>(stage_base, table, ln, 0, r, lo);
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    const uint2 scale = lo;
    // Two groups of four m-blocks: only two groups' fragments (32 registers) are live at a time.
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      uint32_t a[4][4];
#pragma unroll
      for (int bb = 0; bb < 4; ++bb) {
        // m-block b: rows g / g + 8 of the warp are dims 2b / 2b + 1 of the thread's 16.
        const int b = half * 4 + bb;
        constexpr uint32_t kEven = 0x5140, kOdd = 0x7362;  // bytes (2i, 2i+1) of two words, interleaved
        const uint32_t w01 = (b % 2) ? prmt<kOdd>(word(r[0], b / 2), word(r[1], b / 2))
                                     : prmt<kEven>(word(r[0], b / 2), word(r[1], b / 2));
        const uint32_t w23 = (b % 2) ? prmt<kOdd>(word(r[2], b / 2), word(r[3], b / 2))
                                     : prmt<kEven>(word(r[2], b / 2), word(r[3], b / 2));
        a[bb][0] = e4m3x2_to_f16x2<false>(w01);
        a[bb][1] = e4m3x2_to_f16x2<true>(w01);
        a[bb][2] = e4m3x2_to_f16x2<false>(w23);
        a[bb][3] = e4m3x2_to_f16x2<true>(w23);
        if constexpr (kKind == kKvDsMla) {
          a[bb][0] = hmul2(a[bb][0], scale.x);
          a[bb][1] = hmul2(a[bb][1], scale.x);
          a[bb][2] = hmul2(a[bb][2], scale.y);
          a[bb][3] = hmul2(a[bb][3], scale.y);
        }
      }
      if (half == 1) {
        if (kk + 1 < 4) {
          pv_load<kKind>(stage_base, table, ln, kk + 1, r, lo);
        } else {
          mbarrier_arrive(empty);  // this thread's reads of the stage are done
        }
      }
      wgmma_fence();
#pragma unroll
      for (int bb = 0; bb < 4; ++bb) wgmma_rows<__half, kRows>(o[half * 4 + bb], a[bb], desc.p_step(p_buf, kk), true);
      wgmma_commit();
      wgmma_wait<1>();
    }
  }
  // The last group stays in flight; the caller retires it before touching o.
}

// ---- 16-bit pages -------------------------------------------------------------------------------

// Q rows of this m-tile into Q^T in natural dim order, the query as given (the cache's type); rows past
// s_q * h_q are zero. Thread t: chunk t % 8 of rows t / 8 (+ 16).
template <typename T, int kRows>
__device__ __forceinline__ void load_q_16bit(const DecodeParams& p, int req, int m_tile,
                                             NarrowSharedStorage<kKv16Bit, kRows>& sm, int t) {
  using Cfg = NarrowConfig<kRows, kKv16Bit>;
  constexpr int kRowsPerThread = kRows / 16;
  const char* q = static_cast<const char*>(p.q);
  const int chunk = t % 8;
  // Every load first, then the stores: one global round trip, not one per row.
  uint4 v[kRowsPerThread][Cfg::kQBoxes];
#pragma unroll
  for (int i = 0; i < kRowsPerThread; ++i) {
    const int row = m_tile * kRows + t / 8 + 16 * i;
    const uint4* src = nullptr;
    if (row < p.rows) {
      const auto [qi, head] = query_row(p, row);
      src = reinterpret_cast<const uint4*>(q + q_offset(p, req, qi, head) * 2) + chunk;
    }
#pragma unroll
    for (int box = 0; box < Cfg::kQBoxes; ++box) v[i][box] = src ? src[box * 8] : make_uint4(0, 0, 0, 0);
  }
#pragma unroll
  for (int i = 0; i < kRowsPerThread; ++i)
#pragma unroll
    for (int box = 0; box < Cfg::kQBoxes; ++box)
      st_shared_v4(smem_addr(sm.q) + box * Cfg::kQBoxBytes + sw128_offset(t / 8 + 16 * i, chunk), v[i][box]);
}

// S^T = K Q^T: 36 k-steps, K box ks / 4 (tokens x 64 dims, K-major) against the same box of Q^T; one
// group, left in flight. parts: the page's part barriers (NarrowPage<kKv16Bit>), each waited before its
// k-steps are issued when wait_parts (not when the caller knows that the whole page has landed).
template <typename T, int kRows>
__device__ __forceinline__ void issue_qk_16bit(uint32_t stage_base, const Descriptors<kRows>& desc,
                                               uint64_t* const (&parts)[NarrowPage<kKv16Bit>::kParts],
                                               uint32_t parity, bool wait_parts, float (&s)[kRows / 2]) {
  using Page = NarrowPage<kKv16Bit>;
  const uint64_t k_desc = sw128_desc(stage_base, 16, 1024);
  if (wait_parts) mbarrier_wait(parts[0], parity);
  fence_operands(s);
  wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < 4 * NarrowConfig<kRows>::kQBoxes; ++ks) {
    if (ks % (4 * Page::kPartBoxes) == 0 && ks > 0) {
      if (wait_parts) mbarrier_wait(parts[ks / (4 * Page::kPartBoxes)], parity);
      wgmma_fence();  // on both paths of the branch, or ptxas adds one where they join
    }
    wgmma_rows_ss<T, kRows, false>(s, desc_advance(k_desc, (ks / 4) * Page::kLatentBoxBytes + (ks % 4) * 32),
                                   desc.q_step(ks), ks > 0);
  }
  wgmma_commit();
  fence_operands(s);
}

// O^T += V^T P^T: m-block b = V box b as an MN-major A (its dims are M; 8-token groups 1 KB apart), k-step
// kk = tokens 16 kk ..+16 of the box and of P^T. One group, left in flight; the caller releases the stage
// once it has completed.
template <typename T, int kRows>
__device__ __forceinline__ void issue_pv_16bit(uint32_t stage_base, const Descriptors<kRows>& desc, int p_buf,
                                               float (&o)[8][kRows / 2]) {
#pragma unroll
  for (int b = 0; b < 8; ++b) fence_operands(o[b]);
  const uint64_t v_desc = sw128_desc(stage_base, NarrowPage<kKv16Bit>::kLatentBoxBytes, 1024);
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < 4; ++kk)
#pragma unroll
    for (int b = 0; b < 8; ++b)
      wgmma_rows_ss<T, kRows, true>(
          o[b], desc_advance(v_desc, b * NarrowPage<kKv16Bit>::kLatentBoxBytes + kk * 2048), desc.p_step(p_buf, kk),
          true);
  wgmma_commit();
#pragma unroll
  for (int b = 0; b < 8; ++b) fence_operands(o[b]);
}

// ---- softmax -----------------------------------------------------------------------------------

// The thread's query rows (columns of S^T / O^T): n8 * 8 + 2c + e, index i = 2 n8 + e, and the
// position of row i's token-0 score in S^T (token 1's is 2 further).
__device__ __forceinline__ int row_of(int i, int c) { return (i / 2) * 8 + 2 * c + (i % 2); }
__device__ __forceinline__ int score_of(int i) { return (i / 2) * 4 + (i % 2); }

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

// ---- the 16-bit form's epilogue -------------------------------------------------------------------

__device__ __forceinline__ void sts32(uint32_t addr, float v) { asm volatile("st.shared.f32 [%0], %1;" ::"r"(addr), "f"(v)); }

// O^T (times each row's `inv`) written as rows of out (the query's type) or of the fp32 partial (the 16-bit form's
// partial rows: kNarrowFp16Partials). The fragments hold dims 64 b + 16 warp + g (+ 8) of a thread's rows, so they
// go through sm.o_stage, 16 rows at a time, and come back as 16-B chunks that a warp stores as consecutive runs of a
// row.
template <typename T, int kRows>
__device__ __forceinline__ void write_rows_staged(const DecodeParams& p, const Segment& seg, int req, int m_tile,
                                                  NarrowSharedStorage<kKv16Bit, kRows>& sm, const Lane& ln, int t,
                                                  const float (&o)[8][kRows / 2],
                                                  const float (&inv)[kRows / 4]) {
  const uint32_t stage = smem_addr(sm.o_stage);
#pragma unroll
  for (int pass = 0; pass < kRows / kNarrowStageRows; ++pass) {
    named_barrier_sync(kBarWarpgroup0, 128);  // the previous pass's reads are done
#pragma unroll
    for (int i = 4 * pass; i < 4 * pass + 4; ++i) {  // the thread's rows of this pass (row_of)
      const int r = row_of(i, ln.c) - kNarrowStageRows * pass;
#pragma unroll
      for (int b = 0; b < 8; ++b) {
        const uint32_t at = stage + (r * kNarrowStageStride + 64 * b + 16 * ln.warp + ln.g) * 4;
        sts32(at, o[b][score_of(i)] * inv[i]);
        sts32(at + 32, o[b][score_of(i) + 2] * inv[i]);
      }
    }
    named_barrier_sync(kBarWarpgroup0, 128);
    static_assert(!kNarrowFp16Partials<kKv16Bit>, "the 16-bit form writes fp32 partial rows");
    const int chunk_floats = seg.write_final ? 8 : 4;  // one 16-B store: 8 dims of out, or 4 of the partial
    const int chunks = kHeadDimV / chunk_floats;  // per row
#pragma unroll 4
    for (int k = t; k < kNarrowStageRows * chunks; k += 128) {
      const int r = k / chunks, ch = k % chunks;
      const int row = m_tile * kRows + kNarrowStageRows * pass + r;
      if (row >= p.rows) continue;
      const uint32_t at = stage + (r * kNarrowStageStride + ch * chunk_floats) * 4;
      const uint4 a = lds128(at);
      if (seg.write_final) {
        const uint4 b = lds128(at + 16);
        const auto [qi, head] = query_row(p, row);
        *reinterpret_cast<uint4*>(static_cast<T*>(p.out) + out_offset(p, req, qi, head) + ch * 8) =
            make_uint4(pack2<T>(__uint_as_float(a.x), __uint_as_float(a.y)),
                       pack2<T>(__uint_as_float(a.z), __uint_as_float(a.w)),
                       pack2<T>(__uint_as_float(b.x), __uint_as_float(b.y)),
                       pack2<T>(__uint_as_float(b.z), __uint_as_float(b.w)));
      } else {
        *reinterpret_cast<uint4*>(static_cast<float*>(p.o_partial) +
                                  partial_row_index(seg.partial_slot, p.rows, row) * kHeadDimV + ch * 4) = a;
      }
    }
  }
}

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

}  // namespace narrow

template <typename T, int kKind, int kRows, int kProducerWarps>
__global__ void __launch_bounds__(NarrowConfig<kRows, kKind, kProducerWarps>::kThreads,
                                  NarrowConfig<kRows, kKind, kProducerWarps>::kCtasPerSm)
    narrow_decode_kernel(const DecodeParams p, const __grid_constant__ TensorMaps maps) {
  using namespace narrow;
  using Cfg = NarrowConfig<kRows, kKind, kProducerWarps>;
  constexpr int kN = Cfg::kRowsPerThread;
  static_assert(kKind == kKvE4M3 || kKind == kKv16Bit || (kKind == kKvDsMla && std::is_same_v<T, __nv_bfloat16>),
                "narrow kernel: per-tensor e4m3, 16-bit, or ds_mla with a bf16 query (its rope is bf16)");
  extern __shared__ uint8_t smem_raw[];
  // Aligned as in the wide kernel (kernel.cuh), on the shared array itself.
  NarrowSharedStorage<kKind, kRows>& sm = *reinterpret_cast<NarrowSharedStorage<kKind, kRows>*>(
      smem_raw + ((1024u - (smem_addr(smem_raw) & 1023u)) & 1023u));
  const int warp = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x / 32), 0);
  const int lane = threadIdx.x % 32;

  if (threadIdx.x == 0) {
    for (int s = 0; s < Cfg::kStages; ++s) {
      mbarrier_init(&sm.full[s], 1);
      if constexpr (kKind == kKv16Bit) {
        mbarrier_init(&sm.front[s][0], 1);
        mbarrier_init(&sm.front[s][1], 1);
      }
      mbarrier_init(&sm.ready[s], 32);   // the producer warp's lanes
      mbarrier_init(&sm.empty[s], 128);  // every thread of the consumer that owns the tile
    }
    fence_barrier_init();
  }
  __syncthreads();

  const int m_tile = blockIdx.x;
  const int part_idx = blockIdx.y;
  const SplitPart part = begin_part(p, part_idx);
  if (part.begin_req > part.end_req) return;

  if (warp >= Cfg::kConsumers * Cfg::kConsumerWarps) {
    // ---------------- producer ----------------
    if constexpr (Cfg::kProducerWarps == 2) {
      // Two warps, each on its own event: the copy warp's lane 0 copies each page as soon as its stage
      // is free; the finish warp takes the pages in order as they land, finishes them (finish_page)
      // and releases them (`ready`). It is never more than one phase behind on a stage: a stage is
      // copied again only after its consumer passed `ready`. One warp doing both (below) keeps the
      // consumers waiting for `ready` where finishing is the bottleneck: two consumers (32 rows) and
      // ds_mla's scale table at 16 rows and large batches; elsewhere the single warp is as fast or faster
      // (docs/hopper-kernel.md).
      if constexpr (Cfg::kRebalanceRegisters) warpgroup_reg_dealloc<Cfg::kProducerRegs>();
      const int role = warp - Cfg::kConsumers * Cfg::kConsumerWarps;  // 0: copies, 1: finishes, 2-3: idle
      TileCursor cur(p, part, part_idx);
      if (role == 0 && lane == 0) {
        prefetch_page_maps<kKind>(maps);
        const uint64_t policy = l2_evict_first_policy();
        for (uint32_t i = 0; cur.valid(); cur.next(), ++i) {
          const int stage = i % Cfg::kStages;
          mbarrier_wait(&sm.empty[stage], ((i / Cfg::kStages) & 1) ^ 1);
          load_page<kKind>(p, sm, maps, stage, cur.page_id(), policy);
        }
      } else if (role == 1) {
        for (uint32_t i = 0; cur.valid(); cur.next(), ++i) {
          const int stage = i % Cfg::kStages;
          const int valid = cur.tokens_in_tile();  // read before the wait
          mbarrier_wait(&sm.full[stage], (i / Cfg::kStages) & 1);
          finish_and_release<kKind>(sm, stage, valid, lane);
        }
      }
      return;
    }
    // One warp, event-driven: copy the next page as soon as its stage is free, otherwise
    // finish the oldest page in flight once it landed (finish_page), so that neither waits behind the
    // other. Lane 0 polls and issues the copies; the decisions are broadcast so that the warp stays
    // converged.
    if (lane == 0) prefetch_page_maps<kKind>(maps);
    const uint64_t policy = l2_evict_first_policy();
    TileCursor cur(p, part, part_idx);
    uint32_t issued = 0, finished = 0;
    int valid_of[Cfg::kStages];  // tokens inside seqlen of the page in each stage
    for (;;) {
      const bool more = cur.valid();
      if (!more && finished == issued) break;
      int action = 0;  // 1: copy the next page, 2: finish the oldest, 0: poll again
      if (lane == 0) {
        if (more && mbarrier_test_wait(&sm.empty[issued % Cfg::kStages], ((issued / Cfg::kStages) & 1) ^ 1))
          action = 1;
        else if (finished < issued &&
                 mbarrier_test_wait(&sm.full[finished % Cfg::kStages], (finished / Cfg::kStages) & 1))
          action = 2;
      }
      action = __shfl_sync(0xffffffffu, action, 0);
      if (action == 1) {
        const int stage = issued % Cfg::kStages;
        mbarrier_wait(&sm.empty[stage], ((issued / Cfg::kStages) & 1) ^ 1);  // every lane writes the stage later
        if (lane == 0) load_page<kKind>(p, sm, maps, stage, cur.page_id(), policy);
#pragma unroll
        for (int s = 0; s < Cfg::kStages; ++s)
          if (s == stage) valid_of[s] = cur.tokens_in_tile();
        cur.next();
        ++issued;
      } else if (action == 2) {
        const int stage = finished % Cfg::kStages;
        mbarrier_wait(&sm.full[stage], (finished / Cfg::kStages) & 1);
        if constexpr (kKind == kKv16Bit) {  // the page's other parts (finish_page zeroes rows across them)
          mbarrier_wait(&sm.front[stage][0], (finished / Cfg::kStages) & 1);
          mbarrier_wait(&sm.front[stage][1], (finished / Cfg::kStages) & 1);
        }
        int valid = valid_of[0];
#pragma unroll
        for (int s = 1; s < Cfg::kStages; ++s)
          if (s == stage) valid = valid_of[s];
        finish_and_release<kKind>(sm, stage, valid, lane);
        ++finished;
      } else {
        __nanosleep(100);  // nothing to do: leave the issue slots to the consumer warp on this scheduler
      }
    }
    return;
  }

  // ---------------- consumers ----------------
  // Consumer `me` (a warpgroup) computes the tiles with it % kConsumers == me (it: the CTA's tile
  // count, which the producer's stages follow too).
  if constexpr (Cfg::kRebalanceRegisters) warpgroup_reg_alloc<Cfg::kConsumerRegs>();
  const int t = threadIdx.x;  // 0 .. kConsumerThreads - 1
  const int me = warp / Cfg::kConsumerWarps;
  Lane ln;
  ln.warp = warp % Cfg::kConsumerWarps;
  ln.g = lane / 4;
  ln.c = lane % 4;
  ln.tok0 = ln.warp * 16 + ln.g;
  ln.tok1 = ln.tok0 + 8;
  const int dim0 = (ln.warp * 8 + ln.g) * Cfg::kDimsPerThread;  // the thread's 16 output dims
  const int tw = t % 128;                                       // thread inside the warpgroup
  Descriptors<kRows> desc;
  desc.q = sw128_desc(smem_addr(sm.q), 16, 1024);
  desc.p = sw128_desc(smem_addr(sm.p[me][0]), 16, 1024);
  uint32_t it = 0;

  for (int req = part.begin_req; req <= part.end_req; ++req) {
    const Segment seg = make_segment(p, part, part_idx, req);
    const int tiles = seg.block_end - seg.block_begin;

    // The previous segment's readers of Q (and of the merge data in its buffer) and red are done.
    named_barrier_sync(kBarNarrowConsumers, Cfg::kConsumerThreads);
    int q_shift = 0;
    if (tiles > 0) {
      if constexpr (kKind == kKv16Bit) {
        load_q_16bit<T>(p, req, m_tile, sm, t);
      } else {
        q_shift = load_q<T>(p, req, m_tile, sm, t);
      }
      fence_proxy_async();
    }
    named_barrier_sync(kBarNarrowConsumers, Cfg::kConsumerThreads);
    // Scores in the query's units: e4m3 folds 2^q_shift into the softmax scale, ds_mla into hi.
    const float q_unscale = exp2f(static_cast<float>(q_shift));
    const float score_unscale = kKind == kKvDsMla ? 1.f : q_unscale;
    const float scale_log2 = p.scale_log2 * score_unscale;

    const int min_limit = key_limit(p, seg.seqlen, m_tile * kRows);

    float o[8][kRows / 2];
#pragma unroll
    for (int b = 0; b < 8; ++b)
#pragma unroll
      for (int i = 0; i < kRows / 2; ++i) o[b][i] = 0.f;
    RowState<kRows> rs;
    if (kKind != kKvDsMla) rs.h = 1.f;
    bool bad_page = false;

    for (int j = 0; j < tiles; ++j, ++it) {
      if (static_cast<int>(it % Cfg::kConsumers) != me) continue;  // the other consumer's tile
      const int block = seg.block_begin + j;
      const int stage = it % Cfg::kStages;
      const uint32_t parity = (it / Cfg::kStages) & 1;
      const int page = p.block_table[req * p.block_table_stride + block];
      bad_page |= page < 0 || page >= p.num_pages;
      const int first_token = block * kTileTokens;
      if constexpr (kKind == kKv16Bit) {
        // The previous tile's PV read its stage through wgmma: release it once that has completed, before
        // waiting for this page, so that the producer refills it as early as possible.
        if (j > 0) {
          wgmma_wait<0>();
#pragma unroll
          for (int b = 0; b < 8; ++b) fence_operands(o[b]);
          mbarrier_arrive(&sm.empty[(it - 1) % Cfg::kStages]);
        }
      }
      // 16-bit: the page's parts are waited for as S^T reaches them, and `ready` after S^T is issued, unless
      // the producer zeroes rows of this tile (past seqlen), which S^T must not read while it writes them.
      const bool wait_ready_first = kKind != kKv16Bit || first_token + kTileTokens > seg.seqlen;
      if (wait_ready_first) {
        mbarrier_wait(&sm.full[stage], parity);
        mbarrier_wait(&sm.ready[stage], parity);
      }
      const NarrowScaleTable& table = sm.scales[kKind == kKvDsMla ? stage : 0];  // ds_mla only
      float hi0 = 0.f, hi1 = 0.f;  // ds_mla: the tokens' scale factors (0 past seqlen)
      if constexpr (kKind == kKvDsMla) {
        hi0 = table.hi[ln.tok0];
        hi1 = table.hi[ln.tok1];
      }
      // The previous tile's PV is retired before anything touches o (ptxas cannot follow a wait
      // that retires it inside the next QK). 16-bit: retired above, before the release.
      if constexpr (kKind != kKv16Bit) {
        wgmma_wait<0>();
#pragma unroll
        for (int b = 0; b < 8; ++b) fence_operands(o[b]);
      }
      const uint32_t stage_base = smem_addr(sm.kv[stage]);

      float s[kRows / 2];
      if constexpr (kKind == kKv16Bit) {
        uint64_t* const parts[] = {&sm.front[stage][0], &sm.front[stage][1], &sm.full[stage]};
        issue_qk_16bit<T>(stage_base, desc, parts, parity, !wait_ready_first, s);
        if (!wait_ready_first) mbarrier_wait(&sm.ready[stage], parity);  // nothing zeroed: finish is a no-op
      } else {
        issue_qk<kKind>(stage_base, table, desc, ln, hi0 * q_unscale, hi1 * q_unscale, s);
      }
      wgmma_wait<0>();
      fence_operands(s);
#pragma unroll
      for (int b = 0; b < 8; ++b) fence_operands(o[b]);  // the previous tile's PV is retired too
      float alpha[kN], alpha_o[kN];
      const int p_buf = (it / Cfg::kConsumers) % 2;  // this consumer's tiles alternate the P^T buffers
      softmax_step<kKind, NarrowPType<T, kKind>>(sm, me, p_buf, s, ln, p, seg.seqlen, m_tile, first_token, min_limit,
                                                 scale_log2, hi0, hi1, rs, alpha, alpha_o);
      rescale<kRows>(o, alpha_o);
      if constexpr (kKind == kKv16Bit) {
        issue_pv_16bit<T>(stage_base, desc, p_buf, o);
      } else {
        issue_pv<kKind>(stage_base, table, desc, p_buf, ln, &sm.empty[stage], o);
      }
    }
    wgmma_wait<0>();
#pragma unroll
    for (int b = 0; b < 8; ++b) fence_operands(o[b]);
    if (kKind == kKv16Bit && tiles > 0) mbarrier_arrive(&sm.empty[(it - 1) % Cfg::kStages]);  // the last tile's stage

    // ---- row sums over the warpgroup ----
    float l[kN];
#pragma unroll
    for (int i = 0; i < kN; ++i) {
      l[i] = rs.l[i];
#pragma unroll
      for (int off = 4; off < 32; off *= 2) l[i] += __shfl_xor_sync(0xffffffffu, l[i], off);
    }
    if (ln.g == 0) {
#pragma unroll
      for (int i = 0; i < kN; ++i) sm.red[me][ln.warp][row_of(i, ln.c)] = l[i];
    }
    named_barrier_sync(kBarWarpgroup0 + me, 128);
#pragma unroll
    for (int i = 0; i < kN; ++i) {
      const int n = row_of(i, ln.c);
      l[i] = sm.red[me][0][n] + sm.red[me][1][n] + sm.red[me][2][n] + sm.red[me][3][n];
    }
    // O in the query's units times 1 / l: factor per row (ds_mla: O is kept in units of 1 / h).
    float f[kN];
#pragma unroll
    for (int i = 0; i < kN; ++i) f[i] = rs.h;

    if constexpr (Cfg::kConsumers == 2) {
      // ---- merge consumer 1's (m, l, h, O) into consumer 0's, through Q^T's buffer ----
      if (me == 1) {
        if (ln.warp == 0 && ln.g == 0) {
#pragma unroll
          for (int i = 0; i < kN; ++i) {
            sm.merge[0][row_of(i, ln.c)] = rs.m[i];
            sm.merge[1][row_of(i, ln.c)] = l[i];
          }
          if (ln.c == 0) sm.merge[2][0] = rs.h;
        }
        if (tw == 0) sm.merge_bad = 0;
      }
      named_barrier_sync(kBarNarrowConsumers, Cfg::kConsumerThreads);
      if (me == 1 && bad_page) sm.merge_bad = 1;
      float f1[kN];
      if (me == 0) {
        const float h1 = sm.merge[2][0];
#pragma unroll
        for (int i = 0; i < kN; ++i) {
          const int n = row_of(i, ln.c);
          const float m1 = sm.merge[0][n], l1 = sm.merge[1][n];
          const float m = fmaxf(rs.m[i], m1);
          const float a0 = rs.m[i] == -INFINITY ? 0.f : exp2f((rs.m[i] - m) * scale_log2);
          const float a1 = m1 == -INFINITY ? 0.f : exp2f((m1 - m) * scale_log2);
          l[i] = l[i] * a0 + l1 * a1;
          rs.m[i] = m;
          f[i] = a0 * rs.h;
          f1[i] = a1 * h1;
        }
        scale_rows<kRows>(o, f);
#pragma unroll
        for (int i = 0; i < kN; ++i) f[i] = 1.f;
      }
      float* buffer = reinterpret_cast<float*>(sm.q);
#pragma unroll
      for (int round = 0; round < 2; ++round) {
        // Half of consumer 1's fragments (4 m-blocks), stored [register][thread]: each thread of
        // consumer 0 reads what the thread at its own fragment position wrote.
        if (me == 1) {
#pragma unroll
          for (int b = 0; b < 4; ++b)
#pragma unroll
            for (int i = 0; i < kRows / 2; ++i) buffer[(b * (kRows / 2) + i) * 128 + tw] = o[4 * round + b][i];
        }
        named_barrier_sync(kBarNarrowConsumers, Cfg::kConsumerThreads);
        if (me == 0) {
#pragma unroll
          for (int b = 0; b < 4; ++b)
#pragma unroll
            for (int i = 0; i < kN; ++i) {
              o[4 * round + b][score_of(i)] += f1[i] * buffer[(b * (kRows / 2) + score_of(i)) * 128 + tw];
              o[4 * round + b][score_of(i) + 2] += f1[i] * buffer[(b * (kRows / 2) + score_of(i) + 2) * 128 + tw];
            }
        }
        named_barrier_sync(kBarNarrowConsumers, Cfg::kConsumerThreads);
      }
      bad_page |= sm.merge_bad != 0;
      if (me == 1) continue;  // consumer 0 writes the result
    }

    // ---- epilogue: normalize, write out/lse or the partial ----
    const unsigned errors = seg.errors | (bad_page ? kDeviceErrorPageIdOutOfRange : 0u);
    if (seg.errors && t == 0 && m_tile == 0) atomicOr(p.error_word, seg.errors);
    const bool poison = errors != 0;
    // A row's factor on O: out_scale / l in the query's units (f), NaN for a poisoned segment, 0 for a row
    // that saw no key.
    auto row_factor = [&](int i) { return poison ? NAN : (l[i] > 0.f ? p.out_scale * f[i] / l[i] : 0.f); };
    if constexpr (kKind == kKv16Bit) {
      float inv[kN];
#pragma unroll
      for (int i = 0; i < kN; ++i) inv[i] = row_factor(i);
      write_rows_staged<T, kRows>(p, seg, req, m_tile, sm, ln, t, o, inv);
    }
    static_assert(kKind == kKv16Bit || kNarrowFp16Partials<kKind>, "FP8 caches: fp16 partial rows");
    if (kKind != kKv16Bit && !seg.write_final) {
      // Partial rows (partial_rows.h). The lanes of one c share a row; the four with g = 4j .. 4j + 3 hold a
      // 64-column block (its scale), and lanes g, g ^ 1 adjacent 32-byte sectors (exchange_halves). Every lane
      // takes part in every row's shuffles and only the stores test the row (shuffles among the lanes of a row
      // that passed the test spilled ~100 B in the 32-row kernels).
#pragma unroll
      for (int i = 0; i < kN; ++i) {
        const int row = m_tile * kRows + row_of(i, ln.c);
        const bool in_tile = row < p.rows;
        const float inv = row_factor(i);
        float amax = 0.f;
#pragma unroll
        for (int b = 0; b < 8; ++b)
          amax = fmaxf(amax, fmaxf(fabsf(o[b][score_of(i)]), fabsf(o[b][score_of(i) + 2])));
        amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 4));
        amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 8));
        const PartialBlockScale scale = partial_block_scale(amax * inv);
        const float e = scale.encode;  // (o * inv) * e: inv * e can overflow (ds_mla keeps O in units of 1 / h)
        uint32_t w[8];
#pragma unroll
        for (int b = 0; b < 8; ++b)
          w[b] = pack2<__half>(o[b][score_of(i)] * inv * e, o[b][score_of(i) + 2] * inv * e);
        const bool odd = ln.g & 1;
        const uint4 lo = make_uint4(w[0], w[1], w[2], w[3]), hi = make_uint4(w[4], w[5], w[6], w[7]);
        const uint4 got = exchange_halves(lo, hi, odd, 4, 0xffffffffu);
        if (in_tile) {
          const size_t prow = partial_row_index(seg.partial_slot, p.rows, row);
          uint16_t* mine = static_cast<uint16_t*>(p.o_partial) + prow * kHeadDimV + dim0;
          store_sector_pair_halves(reinterpret_cast<uint8_t*>(mine), lo, hi, got, odd);
          if (ln.g % 4 == 0) p.o_partial_scale[prow * kPartialBlocks + dim0 / kPartialBlockCols] = scale.decode;
        }
      }
    }
#pragma unroll
    for (int i = 0; i < kN; ++i) {
      const int row = m_tile * kRows + row_of(i, ln.c);
      if (row >= p.rows) continue;
      const auto [qi, head] = query_row(p, row);
      if constexpr (kKind != kKv16Bit) {
        if (seg.write_final) {
          const float inv = row_factor(i);
          float v[16];
#pragma unroll
          for (int b = 0; b < 8; ++b) {
            v[2 * b] = o[b][score_of(i)] * inv;
            v[2 * b + 1] = o[b][score_of(i) + 2] * inv;
          }
          T* out = static_cast<T*>(p.out) + out_offset(p, req, qi, head) + dim0;
          uint4* dst = reinterpret_cast<uint4*>(out);
          dst[0] = make_uint4(pack2<T>(v[0], v[1]), pack2<T>(v[2], v[3]), pack2<T>(v[4], v[5]), pack2<T>(v[6], v[7]));
          dst[1] = make_uint4(pack2<T>(v[8], v[9]), pack2<T>(v[10], v[11]), pack2<T>(v[12], v[13]),
                              pack2<T>(v[14], v[15]));
        }
      }
      if (ln.warp == 0 && ln.g == 0) {
        const float lse = poison ? NAN : row_lse(rs.m[i] * (p.softmax_scale * score_unscale), l[i]);
        if (seg.write_final) {
          p.lse[lse_offset(p, req, qi, head)] = lse;
        } else {
          p.lse_partial[partial_row_index(seg.partial_slot, p.rows, row)] = lse;
        }
      }
    }
  }
}

}  // namespace openmla::kernels::sm90
