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
//
// Parts: common.cuh (barriers, wgmma shapes, descriptors, fragment positions), fp8_operands.cuh and
// operands_16bit.cuh (the two data paths), softmax.cuh (the softmax step), producer.cuh (the page copies and
// finishing); the kernel below holds the two producer forms, the consumers' tile loop and the epilogue.
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "kernels/arch/sm90/ptx.cuh"
#include "kernels/arch/sync.cuh"
#include "kernels/common/convert.cuh"
#include "kernels/common/decode_params.h"
#include "kernels/common/page_table.cuh"
#include "kernels/common/partial_rows.h"
#include "kernels/common/sector_stores.cuh"
#include "kernels/common/segment.cuh"
#include "kernels/sm90/decode/common.h"
#include "kernels/sm90/decode/narrow/common.cuh"
#include "kernels/sm90/decode/narrow/config.h"
#include "kernels/sm90/decode/narrow/fp8_operands.cuh"
#include "kernels/sm90/decode/narrow/operands_16bit.cuh"
#include "kernels/sm90/decode/narrow/producer.cuh"
#include "kernels/sm90/decode/narrow/softmax.cuh"
#include "openmla/error.h"

namespace openmla::kernels::sm90 {

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
  // Aligned as in the wide kernel (wide/kernel.cuh), on the shared array itself.
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
  const CallScales scales = call_scales<kKind>(p);

  if (warp >= Cfg::kConsumers * Cfg::kConsumerWarps) {
    // ---------------- producer (producer.cuh) ----------------
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
    const float scale_log2 = p.scale_log2 * scales.score * score_unscale;

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
      const int page = page_id(p, req, block);
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
    const float out_scale = p.out_scale * scales.out;
    auto row_factor = [&](int i) { return poison ? NAN : (l[i] > 0.f ? out_scale * f[i] / l[i] : 0.f); };
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
        const float lse = poison ? NAN : row_lse(rs.m[i] * (p.softmax_scale * scales.score * score_unscale), l[i]);
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

