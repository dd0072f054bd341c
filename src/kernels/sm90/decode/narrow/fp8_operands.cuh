// The narrow kernel's FP8 data path (per-tensor e4m3, ds_mla): Q^T stored in QK's k order, and the two
// products with the page's e4m3 values converted into the A fragments in registers (S^T = K Q^T, O^T += V^T P^T).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "kernels/arch/sync.cuh"
#include "kernels/common/decode_params.h"
#include "kernels/common/fp16_query.cuh"
#include "kernels/common/fp8_registers.cuh"
#include "kernels/common/segment.cuh"
#include "kernels/sm90/decode/narrow/common.cuh"

namespace openmla::kernels::sm90::narrow {

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

}  // namespace openmla::kernels::sm90::narrow
