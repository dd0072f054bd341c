// The narrow kernel's 16-bit data path (bf16 / fp16 caches, read in the query's type): both operands of
// every wgmma from shared memory (K as a K-major A, V^T as an MN-major A), and the epilogue that stages O in
// shared memory to write whole rows.
#pragma once

#include <cstdint>

#include "kernels/arch/sync.cuh"
#include "kernels/common/convert.cuh"
#include "kernels/common/decode_params.h"
#include "kernels/common/fp8_registers.cuh"
#include "kernels/common/partial_rows.h"
#include "kernels/common/segment.cuh"
#include "kernels/sm90/decode/narrow/common.cuh"

namespace openmla::kernels::sm90::narrow {

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

}  // namespace openmla::kernels::sm90::narrow
