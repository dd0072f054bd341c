// S = Q K^T and O += P V with K and V taken from quantized tokens as stored: each lane loads the
// bytes of its own mma.sync B fragments and converts them in registers (common/fp8_registers.cuh),
// so a quantized tile needs no dequantized copy in shared memory and no pass to make one.
//
// m16n8k16 B fragment: lane (g = lane / 4, c = lane % 4) holds k = 2c, 2c+1 (b0) and 2c+8, 2c+9
// (b1) of column n = g. Both products choose their order of k or n so that a lane's bytes are
// consecutive in a token row:
// - QK (k = dims): k-step 4G + kk takes, in k order, dims 64G + 16c + 4kk + {0, 1} (k = 2c, 2c+1)
//   and + {2, 3} (k = 2c+8, 2c+9), so one 16-byte load of a key row serves a lane's four k-steps of
//   a 64-dim group. Q is stored in this k order (qk_k_position).
// - PV (n = dims): column n of n8 tile jj of a 64-dim block is dim 8n + jj of the block, so a lane's
//   fragments for the block's 8 tiles are bytes 8g..8g+7 of each of its 4 token rows, and its
//   accumulators (columns 2c + e) are dims 16c + 8e + jj: 16 consecutive output dims.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "kernels/arch/sm80.cuh"
#include "kernels/arch/sync.cuh"
#include "kernels/common/convert.cuh"
#include "kernels/common/decode_params.h"
#include "kernels/common/fp16_query.cuh"
#include "kernels/common/fp8_registers.cuh"
#include "kernels/common/segment.cuh"
#include "kernels/portable/decode/config.h"
#include "kernels/portable/decode/layout.cuh"
#include "kernels/portable/decode/p_fragments.cuh"

namespace openmla::kernels::portable {

// The type the tensor cores multiply: fp16 for e4m3 caches (e4m3 -> f16 is exact and one
// instruction per pair; a bf16 query is converted once, common/fp16_query.cuh), else the query's.
template <typename T, int kKind>
using MathType = std::conditional_t<kKind == kKvE4M3, __half, T>;

// Q rows of this m-tile into shared memory (swizzled 72-chunk rows) in QK's k order and the math
// type; rows past the request's are zero (rq: as load_q's). A bf16 query for fp16 math is scaled by 2^-shift, the shift
// returned (from the CTA's largest |q|: every thread calls this, and then it synchronizes the CTA).
template <class Cfg, typename T, typename Math>
__device__ __forceinline__ int load_q_permuted(const DecodeParams& p, int req, const RequestQueries* rq, int m_tile,
                                               Math* sq, float* q_amax) {
  constexpr bool kToF16 = !std::is_same_v<T, Math>;
  constexpr int kChunks = Cfg::M * kRowChunks;
  const char* q = static_cast<const char*>(p.q);
  auto source = [&](int i) -> const uint4* {
    const int row = m_tile * Cfg::M + i / kRowChunks;
    if (rq ? !request_row(p, *rq, row) : row >= p.rows) return nullptr;
    const auto [qi, head] = query_row(p, row);
    return reinterpret_cast<const uint4*>(q + q_offset(p, rq ? rq->base : req, qi, head) * 2) +
           i % kRowChunks;
  };
  int shift = 0;
  float scale = 1.f;
  if constexpr (kToF16) {
    float amax = 0.f;
    for (int i = threadIdx.x; i < kChunks; i += Cfg::kThreads) {
      if (const uint4* src = source(i)) {
        const uint4 v = *src;
        amax = fmaxf(fmaxf(amax, fmaxf(bf16x2_abs_max(v.x), bf16x2_abs_max(v.y))),
                     fmaxf(bf16x2_abs_max(v.z), bf16x2_abs_max(v.w)));
      }
    }
#pragma unroll
    for (int o = 16; o > 0; o /= 2) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    if (threadIdx.x % 32 == 0) q_amax[threadIdx.x / 32] = amax;
    __syncthreads();
    amax = 0.f;
#pragma unroll
    for (int w = 0; w < Cfg::kNumWarps; ++w) amax = fmaxf(amax, q_amax[w]);
    shift = fp16_query_shift(amax);
    scale = exp2f(static_cast<float>(-shift));
  }
  char* dst = reinterpret_cast<char*>(sq);
  for (int i = threadIdx.x; i < kChunks; i += Cfg::kThreads) {
    const int r = i / kRowChunks, chunk = i % kRowChunks;
    const uint4* src = source(i);
    const uint4 v = src ? *src : make_uint4(0u, 0u, 0u, 0u);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      uint32_t w = word(v, j);
      if constexpr (kToF16) w = bf16x2_to_f16x2(w, scale);
      const int pos = qk_k_position(chunk * 8 + 2 * j);
      *reinterpret_cast<uint32_t*>(dst + swizzled_chunk_offset(r, pos / 8) + (pos % 8) * 2) = w;
    }
  }
  return shift;
}

// ds_mla: the float scale of 128-dim tile `tile` of token `row`.
__device__ __forceinline__ float ds_mla_scale(uint32_t raw_base, int row, int tile) {
  return __uint_as_float(lds32(raw_base + row * KvLayout<kKvDsMla>::kTokenBytes + kDsMlaScalesByte + tile * 4));
}

// Two e4m3 values (the low or high pair of w), times scales s0 and s1, as a pair of Math. e4m3 caches
// (unit scales, folded into the softmax scale and the output by the host) convert only.
template <typename Math, int kKind, bool kHigh>
__device__ __forceinline__ uint32_t dequantize_pair(uint32_t w, float s0, float s1) {
  const uint32_t h = e4m3x2_to_f16x2<kHigh>(w);
  if constexpr (kKind == kKvE4M3) {
    static_assert(std::is_same_v<Math, __half>, "e4m3 tiles are multiplied in fp16");
    return h;
  } else {
    const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&h));
    return pack2<Math>(f.x * s0, f.y * s1);
  }
}

// ds_mla rope: a bf16 pair as a pair of Math.
template <typename Math>
__device__ __forceinline__ uint32_t rope_pair(uint32_t w) {
  if constexpr (std::is_same_v<Math, __half>) {
    return bf16x2_to_f16x2(w, 1.f);
  } else {
    return w;
  }
}

// S[warp rows 16 x kQkKeys] = Q K^T over the 576 dims, K from a quantized stage.
// Split-k (kQkSplit > 1, the 16-row tiles; config.h): the kQkSplit warps of a group multiply the
// group's kQkSplit key tiles, warp `part` over its share of the dims: 64-dim groups
// [part kGroups, +kGroups) and k-steps [part kTailSteps, +kTailSteps) of the last 64 dims (e4m3
// group 8, or ds_mla's bf16 rope). Each warp then hands the partials of the others' tiles over
// through shared memory, waits for its group, and returns its own tile (keys 8 warp_n, as without
// the split), so Q is read once per group instead of once per warp.
// under_first_loads() runs right after the first group's K loads are issued (the kernel issues the
// next tile's copies there, so that the loads the first MMAs wait for are ahead of them in the queue).
template <class Cfg, typename Math, int kKind, class UnderFirstLoads>
__device__ __forceinline__ void qk_gemm_quantized(const Math* sq, const uint8_t* stage, float (*partials)[4],
                                                  int warp_m, int warp_n, int lane,
                                                  float (&s)[Cfg::kQkKeys / 8][4], UnderFirstLoads&& under_first_loads) {
  constexpr int kSplit = kQkSplit<Cfg, kKind>;
  static_assert(kSplit == 1 || (Cfg::kQkKeys == 8 && Cfg::kQkWarpsM == 1 && Cfg::kQkWarpsN % kSplit == 0),
                "split-k QK: one row tile, one key tile per warp, whole groups of warps");
  static_assert(kSplit == 1 || kSplit == 2 || kSplit == 4, "the 64-dim groups and the tail split evenly");
  constexpr int kTiles = kSplit * Cfg::kQkKeys / 8;  // key tiles this warp multiplies
  constexpr int kGroups = 8 / kSplit;                // of the 64-dim e4m3 groups 0-7
  constexpr int kTailSteps = 4 / kSplit;             // of the last 64 dims' 4 k-steps
  const int g = lane / 4, c = lane % 4;
  const int part = warp_n % kSplit;
  float acc[kTiles][4];
#pragma unroll
  for (int t = 0; t < kTiles; ++t) acc[t][0] = acc[t][1] = acc[t][2] = acc[t][3] = 0.f;
  // A: ldmatrix rows of Q, as in the 16-bit path (qk_addresses); k-step 4 grp + kk of group grp at
  // q_addr[kk] + 128 grp.
  const int a_row = warp_m * 16 + (lane % 8) + ((lane / 8) % 2) * 8;
  const uint32_t q_row = smem_addr(sq) + a_row * kRowChunks * kChunkBytes;
  uint32_t q_addr[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) q_addr[j] = q_row + (((2 * j + lane / 16) ^ (lane % 8)) * kChunkBytes);
  const uint32_t q_part = part * kGroups * 8 * kChunkBytes;
  const uint32_t base = smem_addr(stage);
  int key[kTiles];
#pragma unroll
  for (int t = 0; t < kTiles; ++t) key[t] = (warp_n - part) * Cfg::kQkKeys + t * 8 + g;

  auto mma_step = [&](uint32_t q_address, const uint32_t (&b0)[kTiles], const uint32_t (&b1)[kTiles]) {
    uint32_t a[4];
    ldmatrix_x4(a, q_address);
#pragma unroll
    for (int t = 0; t < kTiles; ++t) mma_16x8x16<Math>(acc[t], a, b0[t], b1[t]);
  };
  // Each group's K bytes are loaded one group ahead, so their latency hides behind the group
  // before (four k-steps of conversions and MMAs).
  // Group grp's chunk of a key row is group grp % 2's plus 128 (grp / 2) bytes (layout.cuh), so
  // two addresses per key serve groups 0-7 (kGroups is even).
  uint32_t k_addr[2][kTiles];
#pragma unroll
  for (int t = 0; t < kTiles; ++t) {
    k_addr[0][t] = base + raw_chunk_offset<kKind>(key[t], c) + part * (kGroups / 2) * 128;
    k_addr[1][t] = base + raw_chunk_offset<kKind>(key[t], 4 + c) + part * (kGroups / 2) * 128;
  }
  auto load_group = [&](int gl, uint4 (&k)[kTiles], float (&scale)[kTiles]) {
#pragma unroll
    for (int t = 0; t < kTiles; ++t) {
      k[t] = lds128(k_addr[gl % 2][t] + (gl / 2) * 128);
      scale[t] = kKind == kKvDsMla ? ds_mla_scale(base, key[t], (part * kGroups + gl) / 2) : 1.f;
    }
  };
  // The last 64 dims, k-steps 32 + kk for kk in [part kTailSteps, +kTailSteps): e4m3 group 8 (a
  // key row's chunk 32 + c, one word per k-step) or ds_mla's rope (a lane's dims 16c..16c+15, two
  // bf16 words per k-step). Loaded with the last group, as the groups are.
  constexpr int kTailWords = kKind == kKvDsMla ? 2 * kTailSteps : kTailSteps;
  uint32_t tail[kTiles][kTailWords];
  auto load_tail = [&]() {
#pragma unroll
    for (int t = 0; t < kTiles; ++t) {
      const uint32_t addr =
          (kKind == kKvDsMla ? base + key[t] * KvLayout<kKind>::kTokenBytes + kDsMlaRopeByte + c * 32
                             : base + raw_chunk_offset<kKind>(key[t], 32 + c)) +
          part * kTailWords * 4;
      if constexpr (kTailWords >= 4) {
#pragma unroll
        for (int v = 0; v < kTailWords / 4; ++v) {
          const uint4 w = lds128(addr + 16 * v);
          tail[t][4 * v] = w.x, tail[t][4 * v + 1] = w.y, tail[t][4 * v + 2] = w.z, tail[t][4 * v + 3] = w.w;
        }
      } else if constexpr (kTailWords == 2) {
        const uint2 w = lds64(addr);
        tail[t][0] = w.x, tail[t][1] = w.y;
      } else {
        tail[t][0] = lds32(addr);
      }
    }
  };
  uint4 k[2][kTiles];
  float scale[2][kTiles];
  load_group(0, k[0], scale[0]);
  under_first_loads();
#pragma unroll
  for (int gl = 0; gl < kGroups; ++gl) {
    if (gl + 1 < kGroups) {
      load_group(gl + 1, k[(gl + 1) % 2], scale[(gl + 1) % 2]);
    } else {
      load_tail();
    }
    const uint4(&kc)[kTiles] = k[gl % 2];
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      uint32_t b0[kTiles], b1[kTiles];
#pragma unroll
      for (int t = 0; t < kTiles; ++t) {
        b0[t] = dequantize_pair<Math, kKind, false>(word(kc[t], kk), scale[gl % 2][t], scale[gl % 2][t]);
        b1[t] = dequantize_pair<Math, kKind, true>(word(kc[t], kk), scale[gl % 2][t], scale[gl % 2][t]);
      }
      mma_step(q_addr[kk] + q_part + gl * 8 * kChunkBytes, b0, b1);
    }
  }
#pragma unroll
  for (int w = 0; w < kTailSteps; ++w) {
    uint32_t b0[kTiles], b1[kTiles];
#pragma unroll
    for (int t = 0; t < kTiles; ++t) {
      if constexpr (kKind == kKvDsMla) {
        b0[t] = rope_pair<Math>(tail[t][2 * w]);
        b1[t] = rope_pair<Math>(tail[t][2 * w + 1]);
      } else {
        b0[t] = dequantize_pair<Math, kKind, false>(tail[t][w], 1.f, 1.f);
        b1[t] = dequantize_pair<Math, kKind, true>(tail[t][w], 1.f, 1.f);
      }
    }
    // kk is known only at run time with the split: select among the four (no local-memory array).
    const int kk = part * kTailSteps + w;
    mma_step(word(make_uint4(q_addr[0], q_addr[1], q_addr[2], q_addr[3]), kk) + 8 * 8 * kChunkBytes, b0, b1);
  }
  if constexpr (kSplit == 1) {
#pragma unroll
    for (int t = 0; t < kTiles; ++t)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[t][e] = acc[t][e];
  } else {
    // Hand the other tiles' partials to their owners (warp group0 + t), keep our own.
    const int group0 = warp_n - part;
#pragma unroll
    for (int t = 0; t < kTiles; ++t) {
      if (t == part) {
#pragma unroll
        for (int e = 0; e < 4; ++e) s[0][e] = acc[t][e];
      } else {
        const int slot = part < t ? part : part - 1;
        *reinterpret_cast<float4*>(partials[((group0 + t) * (kSplit - 1) + slot) * 32 + lane]) =
            make_float4(acc[t][0], acc[t][1], acc[t][2], acc[t][3]);
      }
    }
    // Barrier 1 + group among the group's warps, one constant id per branch (a computed id would make
    // ptxas reserve all 16 barriers).
    constexpr int kGroupsOfWarps = Cfg::kQkWarpsN / kSplit;
    static_assert(kGroupsOfWarps <= 4, "barrier ids 1-4");
    const int group = warp_n / kSplit;
#pragma unroll
    for (int id = 0; id < kGroupsOfWarps; ++id)
      if (group == id) named_barrier_sync(1 + id, 32 * kSplit);
#pragma unroll
    for (int slot = 0; slot < kSplit - 1; ++slot) {
      const float4 v = *reinterpret_cast<const float4*>(partials[(warp_n * (kSplit - 1) + slot) * 32 + lane]);
      s[0][0] += v.x, s[0][1] += v.y, s[0][2] += v.z, s[0][3] += v.w;
    }
  }
}

// O[warp rows kPvRows x kPvCols] += P V, V = the first 512 dims of a quantized stage's tokens, in
// the column order at the top (the epilogue writes dims 16c + 8e + jj of each 64-dim block).
template <class Cfg, typename Math, int kKind>
__device__ __forceinline__ void pv_gemm_quantized(const Math* sp, const uint8_t* stage, int warp_m, int warp_n,
                                                  int lane, float (&o)[Cfg::kPvRows / 16][Cfg::kPvCols / 8][4]) {
  constexpr int kRowTiles = Cfg::kPvRows / 16;
  constexpr int kBlocks = Cfg::kPvCols / 64;
  static_assert(Cfg::kPvCols % 64 == 0, "a warp's V columns are whole 64-dim blocks");
  const int g = lane / 4, c = lane % 4;
  const uint32_t base = smem_addr(stage);
  // A lane's V bytes of one k-step: tokens 2c, 2c+1, 2c+8, 2c+9, dims 8g..8g+7 of each 64-dim
  // block. Loaded one k-step ahead (as are the scales).
  // Token rows 2c + 16 ks + {0, 1, 8, 9} share row 2c's swizzle (layout.cuh), so one address per
  // block plus constants serves every k-step.
  constexpr int kTokenOffset[4] = {0, 1, 8, 9};
  uint32_t v_addr[kBlocks];
#pragma unroll
  for (int blk = 0; blk < kBlocks; ++blk)
    v_addr[blk] = base + raw_chunk_offset<kKind>(2 * c, (warp_n * Cfg::kPvCols + blk * 64) / 16 + g / 2) + (g % 2) * 8;
  auto load_v = [&](int ks, uint2 (&v)[kBlocks][4], float (&sc)[kBlocks][4]) {
#pragma unroll
    for (int blk = 0; blk < kBlocks; ++blk) {
      const int dim0 = warp_n * Cfg::kPvCols + blk * 64;
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int tok = 16 * ks + 2 * c + kTokenOffset[e];
        v[blk][e] = lds64(v_addr[blk] + (16 * ks + kTokenOffset[e]) * KvLayout<kKind>::kTokenBytes);
        sc[blk][e] = kKind == kKvDsMla ? ds_mla_scale(base, tok, dim0 / 128) : 1.f;
      }
    }
  };
  uint2 v[2][kBlocks][4];
  float sc[2][kBlocks][4];
  load_v(0, v[0], sc[0]);
#pragma unroll
  for (int ks = 0; ks < Cfg::N / 16; ++ks) {
    if (ks + 1 < Cfg::N / 16) load_v(ks + 1, v[(ks + 1) % 2], sc[(ks + 1) % 2]);
    uint32_t a[kRowTiles][4];
    load_p_fragments<Cfg>(sp, warp_m, lane, ks, a);
#pragma unroll
    for (int blk = 0; blk < kBlocks; ++blk) {
      const uint2(&vb)[4] = v[ks % 2][blk];
      const float(&sb)[4] = sc[ks % 2][blk];
      uint32_t b0[8], b1[8];
#pragma unroll
      for (int w = 0; w < 2; ++w) {
        const uint32_t lo01 = prmt<0x5140>(w ? vb[0].y : vb[0].x, w ? vb[1].y : vb[1].x);
        const uint32_t hi01 = prmt<0x7362>(w ? vb[0].y : vb[0].x, w ? vb[1].y : vb[1].x);
        const uint32_t lo89 = prmt<0x5140>(w ? vb[2].y : vb[2].x, w ? vb[3].y : vb[3].x);
        const uint32_t hi89 = prmt<0x7362>(w ? vb[2].y : vb[2].x, w ? vb[3].y : vb[3].x);
        b0[4 * w + 0] = dequantize_pair<Math, kKind, false>(lo01, sb[0], sb[1]);
        b0[4 * w + 1] = dequantize_pair<Math, kKind, true>(lo01, sb[0], sb[1]);
        b0[4 * w + 2] = dequantize_pair<Math, kKind, false>(hi01, sb[0], sb[1]);
        b0[4 * w + 3] = dequantize_pair<Math, kKind, true>(hi01, sb[0], sb[1]);
        b1[4 * w + 0] = dequantize_pair<Math, kKind, false>(lo89, sb[2], sb[3]);
        b1[4 * w + 1] = dequantize_pair<Math, kKind, true>(lo89, sb[2], sb[3]);
        b1[4 * w + 2] = dequantize_pair<Math, kKind, false>(hi89, sb[2], sb[3]);
        b1[4 * w + 3] = dequantize_pair<Math, kKind, true>(hi89, sb[2], sb[3]);
      }
#pragma unroll
      for (int jj = 0; jj < 8; ++jj)
#pragma unroll
        for (int i = 0; i < kRowTiles; ++i) mma_16x8x16<Math>(o[i][blk * 8 + jj], a[i], b0[jj], b1[jj]);
    }
  }
}

}  // namespace openmla::kernels::portable
