// Portable split-KV MLA decode kernel (mma.sync + cp.async; sm_80 and newer).
//
// CTA (m_tile, part): query rows [m_tile * M, +M) of every request segment the part owns
// (schedule.h). Per segment: load Q, then for each KV tile of N tokens, pipelined (two stages for
// 16-bit caches; two raw tiles in flight and one dequantized stage for FP8 caches):
//   S = Q K^T            (warps: kQkWarpsM x kQkWarpsN, K from shared memory)
//   mask                 (length; causal positions for the last tiles)
//   online softmax step  (row maxima exchanged through shared memory, P stored as T)
//   O = O * alpha + P V  (warps: kPvWarpsM x kPvWarpsN, V = first 512 columns of the K tile)
// and finally normalize and write out/lse (or a partial for the combine kernel).
// Guards: a bad seqlen or page id never addresses memory; the segment's rows become NaN and the
// error word records why. Tokens past seqlen are zero-filled in shared memory, never read.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>
#include <type_traits>

#include "kernels/common/decode_params.h"
#include "kernels/common/mma_sm80.cuh"
#include "kernels/common/segment.cuh"
#include "kernels/sm80/decode/config.h"
#include "openmla/error.h"

namespace openmla::kernels::portable {

// Byte offset of (row, chunk) in a swizzled 72-chunk row.
__device__ __forceinline__ int swizzled_chunk_offset(int row, int chunk) {
  return (row * kRowChunks + (chunk ^ (row & 7))) * kChunkBytes;
}

template <class Cfg>
__device__ __forceinline__ int p_chunk_offset(int row, int chunk) {
  const int phys = Cfg::kPSwizzled ? (chunk ^ (row & 7)) : chunk;
  return (row * Cfg::kPRowChunks + phys) * kChunkBytes;
}

// Q rows of this m-tile into shared memory (rows past s_q*h_q are zero).
template <class Cfg, typename T>
__device__ __forceinline__ void load_q(const DecodeParams& p, int req, int m_tile, T* sq) {
  const char* q = static_cast<const char*>(p.q);
  for (int i = threadIdx.x; i < Cfg::M * kRowChunks; i += Cfg::kThreads) {
    const int r = i / kRowChunks, c = i % kRowChunks;
    const int row = m_tile * Cfg::M + r;
    const bool valid = row < p.rows;
    const int qi = valid ? row / p.num_heads : 0, head = valid ? row % p.num_heads : 0;
    const char* src = q + (req * p.q_stride_b + qi * p.q_stride_s + head * p.q_stride_h) * 2 + c * kChunkBytes;
    cp_async_16(reinterpret_cast<char*>(sq) + swizzled_chunk_offset(r, c), valid ? src : q, valid);
  }
}

// One KV tile (N tokens of one page) into a stage. Returns false (and copies nothing) when the
// page id is out of range. Tokens at or past seqlen are zero-filled.
template <class Cfg, typename T>
__device__ __forceinline__ bool load_kv_tile(const DecodeParams& p, int req, int tile, int seqlen, T* skv) {
  const int first_token = tile * Cfg::N;
  const int page_idx = first_token / kPageTokens;
  const int page = p.block_table[req * p.block_table_stride + page_idx];
  if (page < 0 || page >= p.num_pages) return false;
  const char* page_base = reinterpret_cast<const char*>(p.kv) + page * p.page_stride_bytes +
                          (first_token % kPageTokens) * (kHeadDimQK * 2);
  for (int i = threadIdx.x; i < Cfg::N * kRowChunks; i += Cfg::kThreads) {
    const int r = i / kRowChunks, c = i % kRowChunks;
    const bool valid = first_token + r < seqlen;
    const char* src = page_base + r * (kHeadDimQK * 2) + c * kChunkBytes;
    cp_async_16(reinterpret_cast<char*>(skv) + swizzled_chunk_offset(r, c), valid ? src : page_base, valid);
  }
  return true;
}

// One quantized KV tile, as stored, into the staging buffer (same guards as load_kv_tile).
template <class Cfg, int kKind>
__device__ __forceinline__ bool load_kv_tile_raw(const DecodeParams& p, int req, int tile, int seqlen, uint8_t* raw) {
  using Layout = KvLayout<kKind>;
  const int first_token = tile * Cfg::N;
  const int page = p.block_table[req * p.block_table_stride + first_token / kPageTokens];
  if (page < 0 || page >= p.num_pages) return false;
  const char* tile_base = reinterpret_cast<const char*>(p.kv) + page * p.page_stride_bytes +
                          (first_token % kPageTokens) * Layout::kTokenBytes;
  for (int i = threadIdx.x; i < Cfg::N * Layout::kTokenChunks; i += Cfg::kThreads) {
    const bool valid = first_token + i / Layout::kTokenChunks < seqlen;
    cp_async_16(raw + i * kChunkBytes, valid ? tile_base + i * kChunkBytes : tile_base, valid);
  }
  return true;
}

// 16 e4m3 values (one 16-byte chunk) -> two 8-value chunks of T, each value times `scale`.
// e4m3 -> f16 is exact (hardware cvt from sm_89, bit operations before); the product with a
// power-of-two ds_mla scale (or 1) is exact in bf16.
template <typename T>
__device__ __forceinline__ void dequantize_chunk(uint4 packed, float scale, uint4& lo, uint4& hi) {
  const uint32_t words[4] = {packed.x, packed.y, packed.z, packed.w};
  uint32_t out[8];
#pragma unroll
  for (int w = 0; w < 4; ++w) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const __nv_fp8x2_storage_t pair = static_cast<__nv_fp8x2_storage_t>(words[w] >> (16 * h));
      const __half2_raw raw = __nv_cvt_fp8x2_to_halfraw2(pair, __NV_E4M3);
      if constexpr (std::is_same_v<T, __half>) {
        if (scale == 1.f) {
          out[2 * w + h] = static_cast<uint32_t>(raw.x) | (static_cast<uint32_t>(raw.y) << 16);
          continue;
        }
      }
      const float2 f = __half22float2(__half2(raw));
      out[2 * w + h] = pack2<T>(f.x * scale, f.y * scale);
    }
  }
  lo = make_uint4(out[0], out[1], out[2], out[3]);
  hi = make_uint4(out[4], out[5], out[6], out[7]);
}

// Staging buffer (raw tokens) -> swizzled stage of T rows, for the quantized kinds. The
// per-tensor e4m3 scale is not applied here: the host folds it into the softmax scale and the
// output, so the stage holds exact e4m3 values.
template <class Cfg, typename T, int kKind>
__device__ __forceinline__ void dequantize_kv_tile(const uint8_t* raw, T* skv) {
  char* dst = reinterpret_cast<char*>(skv);
  if constexpr (kKind == kKvE4M3) {
    constexpr int kChunks = kHeadDimQK / 16;  // 36 raw chunks per token
    for (int i = threadIdx.x; i < Cfg::N * kChunks; i += Cfg::kThreads) {
      const int r = i / kChunks, c = i % kChunks;
      uint4 lo, hi;
      dequantize_chunk<T>(*reinterpret_cast<const uint4*>(raw + i * kChunkBytes), 1.f, lo, hi);
      *reinterpret_cast<uint4*>(dst + swizzled_chunk_offset(r, 2 * c)) = lo;
      *reinterpret_cast<uint4*>(dst + swizzled_chunk_offset(r, 2 * c + 1)) = hi;
    }
  } else {
    static_assert(kKind == kKvDsMla, "quantized kinds: e4m3, ds_mla");
    constexpr int kLatentChunks = kHeadDimV / 16;      // 32 raw chunks of e4m3
    constexpr int kRopeChunks = kRopeDimBytes / 16;    // 8 raw chunks of bf16
    constexpr int kChunks = kLatentChunks + kRopeChunks;
    constexpr int kTokenBytes = KvLayout<kKvDsMla>::kTokenBytes;
    for (int i = threadIdx.x; i < Cfg::N * kChunks; i += Cfg::kThreads) {
      const int r = i / kChunks, c = i % kChunks;
      const uint8_t* token = raw + r * kTokenBytes;
      if (c < kLatentChunks) {
        const float scale = reinterpret_cast<const float*>(token + kDsMlaScalesByte)[c / 8];
        uint4 lo, hi;
        dequantize_chunk<T>(*reinterpret_cast<const uint4*>(token + c * kChunkBytes), scale, lo, hi);
        *reinterpret_cast<uint4*>(dst + swizzled_chunk_offset(r, 2 * c)) = lo;
        *reinterpret_cast<uint4*>(dst + swizzled_chunk_offset(r, 2 * c + 1)) = hi;
      } else {
        const int k = c - kLatentChunks;
        uint4 rope = *reinterpret_cast<const uint4*>(token + kDsMlaRopeByte + k * kChunkBytes);
        if constexpr (std::is_same_v<T, __half>) {  // bf16 rope for an fp16 query: round once
          uint32_t* w = reinterpret_cast<uint32_t*>(&rope);
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            const float2 f = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&w[j]));
            w[j] = pack2<__half>(f.x, f.y);
          }
        }
        *reinterpret_cast<uint4*>(dst + swizzled_chunk_offset(r, kLatentChunks * 2 + k)) = rope;
      }
    }
  }
}

// Fragments of one k-step (16 dims) of S = Q K^T for a warp: A (16 rows of Q), B (kQkKeys keys).
template <class Cfg>
struct QkFragments {
  static constexpr int kTiles = Cfg::kQkKeys / 8;
  uint32_t a[4];
  uint32_t b[kTiles == 1 ? 1 : kTiles / 2][4];
};

// Shared addresses of a lane's ldmatrix rows for S = Q K^T. In a swizzled 72-chunk row, k-step ks
// reads chunk 2 ks + h (h = 0/1 per lane), stored at 8 (ks / 4) + ((2 (ks % 4) + h) ^ (row & 7)):
// four per-lane addresses (one per ks % 4) plus a constant per k-step cover the whole reduction.
struct QkAddresses {
  uint32_t q[4];
  uint32_t k[4];
};

template <class Cfg>
__device__ __forceinline__ QkAddresses qk_addresses(const void* sq, const void* sk, int warp_m, int warp_n, int lane) {
  constexpr int kTiles = Cfg::kQkKeys / 8;
  const int a_row = warp_m * 16 + (lane % 8) + ((lane / 8) % 2) * 8;
  const int key_row = kTiles == 1 ? warp_n * 8 + (lane % 8) : warp_n * Cfg::kQkKeys + (lane % 8) + (lane / 16) * 8;
  const int a_half = lane / 16, b_half = (lane / 8) % 2, r7 = lane % 8;  // a_row & 7 == key_row & 7 == r7
  const uint32_t q_row = smem_addr(sq) + a_row * kRowChunks * kChunkBytes;
  const uint32_t k_row = smem_addr(sk) + key_row * kRowChunks * kChunkBytes;
  QkAddresses ad;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    ad.q[j] = q_row + (((2 * j + a_half) ^ r7) * kChunkBytes);
    ad.k[j] = k_row + (((2 * j + b_half) ^ r7) * kChunkBytes);
  }
  return ad;
}

template <class Cfg>
__device__ __forceinline__ void load_qk_fragments(QkFragments<Cfg>& f, const QkAddresses& ad, int ks) {
  const uint32_t step = (ks / 4) * 8 * kChunkBytes;
  ldmatrix_x4(f.a, ad.q[ks % 4] + step);
  if constexpr (QkFragments<Cfg>::kTiles == 1) {
    uint32_t b[2];
    ldmatrix_x2(b, ad.k[ks % 4] + step);
    f.b[0][0] = b[0];
    f.b[0][1] = b[1];
  } else {
#pragma unroll
    for (int pair = 0; pair < QkFragments<Cfg>::kTiles / 2; ++pair)
      ldmatrix_x4(f.b[pair], ad.k[ks % 4] + step + pair * 16 * kRowChunks * kChunkBytes);
  }
}

template <class Cfg, typename T>
__device__ __forceinline__ void mma_qk_fragments(const QkFragments<Cfg>& f, float (&s)[Cfg::kQkKeys / 8][4]) {
  if constexpr (QkFragments<Cfg>::kTiles == 1) {
    mma_16x8x16<T>(s[0], f.a, f.b[0][0], f.b[0][1]);
  } else {
#pragma unroll
    for (int pair = 0; pair < QkFragments<Cfg>::kTiles / 2; ++pair) {
      mma_16x8x16<T>(s[2 * pair], f.a, f.b[pair][0], f.b[pair][1]);
      mma_16x8x16<T>(s[2 * pair + 1], f.a, f.b[pair][2], f.b[pair][3]);
    }
  }
}

// S[warp rows 16 x kQkKeys] = Q K^T over the 576-dim row, fully unrolled with the next k-step's
// fragments loaded before this one's MMAs: the ldmatrix latency hides behind tensor work (with
// two warps per scheduler there is little else to hide it).
template <class Cfg, typename T>
__device__ __forceinline__ void qk_gemm(const T* sq, const T* sk, int warp_m, int warp_n, int lane,
                                        float (&s)[Cfg::kQkKeys / 8][4]) {
  constexpr int kTiles = Cfg::kQkKeys / 8;
  constexpr int kSteps = kRowChunks / 2;
#pragma unroll
  for (int t = 0; t < kTiles; ++t) s[t][0] = s[t][1] = s[t][2] = s[t][3] = 0.f;
  const QkAddresses ad = qk_addresses<Cfg>(sq, sk, warp_m, warp_n, lane);
  QkFragments<Cfg> frag[2];
  load_qk_fragments<Cfg>(frag[0], ad, 0);
#pragma unroll
  for (int ks = 0; ks < kSteps; ++ks) {
    if (ks + 1 < kSteps) load_qk_fragments<Cfg>(frag[(ks + 1) % 2], ad, ks + 1);
    mma_qk_fragments<Cfg, T>(frag[ks % 2], s);
  }
}

// O[warp rows kPvRows x kPvCols] += P V, V = first 512 columns of the K tile. Fully unrolled
// over the tile's k-steps of 16 keys so the next step's fragments load under this step's MMAs.
// V rows: chunk c of key row r sits at c ^ (r & 7) and a warp's columns start at a multiple of 8
// chunks, so four per-lane offsets (one per pair % 4) plus constants address every fragment.
template <class Cfg, typename T>
__device__ __forceinline__ void pv_gemm(const T* sp, const T* sv, int warp_m, int warp_n, int lane,
                                        float (&o)[Cfg::kPvRows / 16][Cfg::kPvCols / 8][4]) {
  constexpr int kRowTiles = Cfg::kPvRows / 16;
  constexpr int kPairs = Cfg::kPvCols / 16;
  static_assert((Cfg::kPvCols / 8) % 8 == 0, "a warp's V columns start at a multiple of 8 chunks");
  const int hi = lane / 16, r7 = lane % 8;
  const int v_key = (lane % 8) + ((lane / 8) % 2) * 8;
  const uint32_t v_row = smem_addr(sv) + (v_key * kRowChunks + warp_n * (Cfg::kPvCols / 8)) * kChunkBytes;
  uint32_t v_off[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) v_off[j] = v_row + ((2 * j + hi) ^ r7) * kChunkBytes;
  const char* p_base = reinterpret_cast<const char*>(sp);
  const int p_row = warp_m * Cfg::kPvRows + (lane % 8) + ((lane / 8) % 2) * 8;
#pragma unroll
  for (int ks = 0; ks < Cfg::N / 16; ++ks) {
    uint32_t a[kRowTiles][4];
#pragma unroll
    for (int i = 0; i < kRowTiles; ++i)
      ldmatrix_x4(a[i], p_base + p_chunk_offset<Cfg>(p_row + i * 16, 2 * ks + hi));
#pragma unroll
    for (int pair = 0; pair < kPairs; ++pair) {
      uint32_t b[4];
      ldmatrix_x4_trans(b, v_off[pair % 4] + (pair / 4) * 8 * kChunkBytes + ks * 16 * kRowChunks * kChunkBytes);
#pragma unroll
      for (int i = 0; i < kRowTiles; ++i) {
        mma_16x8x16<T>(o[i][2 * pair], a[i], b[0], b[1]);
        mma_16x8x16<T>(o[i][2 * pair + 1], a[i], b[2], b[3]);
      }
    }
  }
}

// Running max of a row after this tile (raw score units): previous max and the key-warps' maxima.
template <class Cfg, typename Smem>
__device__ __forceinline__ float tile_row_max(const Smem& sm, int cur, int row) {
  float m = sm.row_max[cur][row];
#pragma unroll
  for (int w = 0; w < Cfg::kQkWarpsN; ++w) m = fmaxf(m, sm.partial_max[w][row]);
  return m;
}


template <class Cfg, typename T, int kKind>
__global__ void __launch_bounds__(Cfg::kThreads, 1) portable_decode_kernel(const DecodeParams p) {
  using Smem = SharedStorage<Cfg, T, kKind>;
  constexpr bool kQuantized = KvLayout<kKind>::kQuantized;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  Smem& sm = *reinterpret_cast<Smem*>(smem_raw);

  const int m_tile = blockIdx.x;
  const int part_idx = blockIdx.y;
  const SplitPart part = begin_part(p, part_idx);
  if (part.begin_req > part.end_req) return;

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int qk_m = warp / Cfg::kQkWarpsN, qk_n = warp % Cfg::kQkWarpsN;
  const int pv_m = warp / Cfg::kPvWarpsN, pv_n = warp % Cfg::kPvWarpsN;
  const int g = lane / 4, c = lane % 4;  // accumulator row within 8, column pair
  constexpr int kTilesPerBlock = kPageTokens / Cfg::N;

  for (int req = part.begin_req; req <= part.end_req; ++req) {
    const Segment seg = make_segment(p, part, part_idx, req);
    const int seqlen = seg.seqlen;
    const unsigned bad_request = seg.errors;
    const int seq_tiles = seqlen > 0 ? (seqlen + Cfg::N - 1) / Cfg::N : 0;
    const int tile_begin = seg.block_begin * kTilesPerBlock;
    const int tile_end = min(seg.block_end * kTilesPerBlock, seq_tiles);  // <= tile_begin for a bad request
    const bool write_final = seg.write_final;
    const int partial_slot = seg.partial_slot;

    // Previous segment's epilogue has finished reading shared state.
    __syncthreads();
    if (tid < Cfg::M) {
      sm.row_max[0][tid] = -INFINITY;
      sm.row_sum[0][tid] = 0.f;
    }
    // Pipeline: 16-bit tiles are copied straight into two swizzled stages (one tile in flight
    // while one is computed). Quantized tiles are half the bytes, so two raw tiles are kept in
    // flight in the staging buffers and each is dequantized into the single swizzled stage just
    // before use: the bytes in flight per SM stay as high as the 16-bit path's.
    constexpr int kInFlight = kQuantized ? KvLayout<kKind>::kRawStages : 1;
    auto load_tile = [&](int t) -> bool {
      const int stage = (t - tile_begin) % (kQuantized ? KvLayout<kKind>::kRawStages : KvLayout<kKind>::kStages);
      if constexpr (kQuantized) {
        return load_kv_tile_raw<Cfg, kKind>(p, req, t, seqlen, sm.raw[stage]);
      } else {
        return load_kv_tile<Cfg, T>(p, req, t, seqlen, sm.kv[stage]);
      }
    };
    bool bad_page = false;
    if (tile_begin < tile_end) load_q<Cfg, T>(p, req, m_tile, sm.q);
    // One commit group per tile ahead (possibly empty) keeps cp.async.wait_group's count uniform.
#pragma unroll
    for (int ahead = 0; ahead < kInFlight; ++ahead) {
      if (tile_begin + ahead < tile_end) bad_page |= !load_tile(tile_begin + ahead);
      cp_async_commit();
    }

    float o[Cfg::kPvRows / 16][Cfg::kPvCols / 8][4];
#pragma unroll
    for (int i = 0; i < Cfg::kPvRows / 16; ++i)
#pragma unroll
      for (int j = 0; j < Cfg::kPvCols / 8; ++j) o[i][j][0] = o[i][j][1] = o[i][j][2] = o[i][j][3] = 0.f;

    int cur = 0;
    for (int tile = tile_begin; tile < tile_end; ++tile) {
      const int stage = (tile - tile_begin) % KvLayout<kKind>::kStages;
      cp_async_wait<kInFlight - 1>();  // this tile's group has landed (later ones may not have)
      __syncthreads();  // ... for all threads; all warps are done with the stage reused next
      if constexpr (kQuantized) {
        const int raw_stage = (tile - tile_begin) % KvLayout<kKind>::kRawStages;
        dequantize_kv_tile<Cfg, T, kKind>(sm.raw[raw_stage], sm.kv[0]);
        __syncthreads();  // stage written; this staging buffer is free for tile + kInFlight
      }
      if (tile + kInFlight < tile_end) bad_page |= !load_tile(tile + kInFlight);
      cp_async_commit();
      const T* skv = sm.kv[stage];

      // ---- S = Q K^T and masking ----
      float s[Cfg::kQkKeys / 8][4];
      qk_gemm<Cfg, T>(sm.q, skv, qk_m, qk_n, lane, s);
      const int key0 = tile * Cfg::N + qk_n * Cfg::kQkKeys;
      const int row_lo = qk_m * 16 + g, row_hi = row_lo + 8;
      // Keys a row may see: all < seqlen; causal rows (token qi) only <= seqlen - s_q + qi.
      const bool needs_mask = (tile + 1) * Cfg::N > seqlen - (p.causal ? p.q_len : 0);
      if (needs_mask) {
        const int limit_lo = key_limit(p, seqlen, m_tile * Cfg::M + row_lo);
        const int limit_hi = key_limit(p, seqlen, m_tile * Cfg::M + row_hi);
#pragma unroll
        for (int t = 0; t < Cfg::kQkKeys / 8; ++t) {
          const int k = key0 + t * 8 + 2 * c;
          if (k >= limit_lo) s[t][0] = -INFINITY;
          if (k + 1 >= limit_lo) s[t][1] = -INFINITY;
          if (k >= limit_hi) s[t][2] = -INFINITY;
          if (k + 1 >= limit_hi) s[t][3] = -INFINITY;
        }
      }

      // ---- online softmax: row maxima across key-warps ----
      float mx_lo = -INFINITY, mx_hi = -INFINITY;
#pragma unroll
      for (int t = 0; t < Cfg::kQkKeys / 8; ++t) {
        mx_lo = fmaxf(mx_lo, fmaxf(s[t][0], s[t][1]));
        mx_hi = fmaxf(mx_hi, fmaxf(s[t][2], s[t][3]));
      }
      mx_lo = quad_max(mx_lo);
      mx_hi = quad_max(mx_hi);
      if (c == 0) {
        sm.partial_max[qk_n][row_lo] = mx_lo;
        sm.partial_max[qk_n][row_hi] = mx_hi;
      }
      __syncthreads();

      const float base_lo = softmax_base(tile_row_max<Cfg>(sm, cur, row_lo)) * p.scale_log2;
      const float base_hi = softmax_base(tile_row_max<Cfg>(sm, cur, row_hi)) * p.scale_log2;
      float sum_lo = 0.f, sum_hi = 0.f;
      char* p_base = reinterpret_cast<char*>(sm.p);
#pragma unroll
      for (int t = 0; t < Cfg::kQkKeys / 8; ++t) {
        const float e0 = exp2f(fmaf(s[t][0], p.scale_log2, -base_lo));
        const float e1 = exp2f(fmaf(s[t][1], p.scale_log2, -base_lo));
        const float e2 = exp2f(fmaf(s[t][2], p.scale_log2, -base_hi));
        const float e3 = exp2f(fmaf(s[t][3], p.scale_log2, -base_hi));
        sum_lo += e0 + e1;
        sum_hi += e2 + e3;
        const int key = qk_n * Cfg::kQkKeys + t * 8 + 2 * c;  // within the tile
        const int byte_in_chunk = (key % 8) * 2;
        *reinterpret_cast<uint32_t*>(p_base + p_chunk_offset<Cfg>(row_lo, key / 8) + byte_in_chunk) = pack2<T>(e0, e1);
        *reinterpret_cast<uint32_t*>(p_base + p_chunk_offset<Cfg>(row_hi, key / 8) + byte_in_chunk) = pack2<T>(e2, e3);
      }
      sum_lo = quad_sum(sum_lo);
      sum_hi = quad_sum(sum_hi);
      if (c == 0) {
        sm.partial_sum[qk_n][row_lo] = sum_lo;
        sm.partial_sum[qk_n][row_hi] = sum_hi;
      }
      __syncthreads();

      // ---- O = O * alpha + P V ----
      // Once the running maxima settle most tiles leave every row's max unchanged (alpha = 1):
      // skipping the rescale then saves kPvRows * kPvCols / 32 multiplies per thread and their
      // dependency in front of the MMAs. The test is warp-uniform.
      float alpha[Cfg::kPvRows / 16][2];
      bool rescale = false;
#pragma unroll
      for (int i = 0; i < Cfg::kPvRows / 16; ++i) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int row = pv_m * Cfg::kPvRows + i * 16 + g + h * 8;
          const float m_old = sm.row_max[cur][row];
          const float m_new = tile_row_max<Cfg>(sm, cur, row);
          alpha[i][h] = (m_new == -INFINITY || m_new == m_old) ? 1.f : exp2f((m_old - m_new) * p.scale_log2);
          rescale |= alpha[i][h] != 1.f;
        }
      }
      if (__any_sync(0xffffffffu, rescale)) {
#pragma unroll
        for (int i = 0; i < Cfg::kPvRows / 16; ++i)
#pragma unroll
          for (int j = 0; j < Cfg::kPvCols / 8; ++j) {
            o[i][j][0] *= alpha[i][0];
            o[i][j][1] *= alpha[i][0];
            o[i][j][2] *= alpha[i][1];
            o[i][j][3] *= alpha[i][1];
          }
      }
      pv_gemm<Cfg, T>(sm.p, skv, pv_m, pv_n, lane, o);

      // Running state for the next tile (readers of [cur] above are unaffected).
      if (tid < Cfg::M) {
        const float m_old = sm.row_max[cur][tid];
        const float m_new = tile_row_max<Cfg>(sm, cur, tid);
        const float alpha = m_new == -INFINITY ? 1.f : exp2f((m_old - m_new) * p.scale_log2);
        float l = sm.row_sum[cur][tid] * alpha;
#pragma unroll
        for (int w = 0; w < Cfg::kQkWarpsN; ++w) l += sm.partial_sum[w][tid];
        sm.row_max[cur ^ 1][tid] = m_new;
        sm.row_sum[cur ^ 1][tid] = l;
      }
      cur ^= 1;
    }
    cp_async_wait<0>();
    __syncthreads();  // final state visible

    // ---- epilogue: normalize, write out/lse or the partial ----
    const unsigned errors = bad_request | (bad_page ? kDeviceErrorPageIdOutOfRange : 0u);
    if (errors && tid == 0 && m_tile == 0) atomicOr(p.error_word, errors);
    const bool poison = errors != 0;
#pragma unroll
    for (int i = 0; i < Cfg::kPvRows / 16; ++i) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int local_row = pv_m * Cfg::kPvRows + i * 16 + g + h * 8;
        const int row = m_tile * Cfg::M + local_row;
        if (row >= p.rows) continue;
        const float l = sm.row_sum[cur][local_row];
        const float inv = poison ? NAN : (l > 0.f ? p.out_scale / l : 0.f);
        const int qi = row / p.num_heads, head = row % p.num_heads;
        if (write_final) {
          T* out = static_cast<T*>(p.out) + req * p.o_stride_b + qi * p.o_stride_s + head * p.o_stride_h;
#pragma unroll
          for (int j = 0; j < Cfg::kPvCols / 8; ++j) {
            const int col = pv_n * Cfg::kPvCols + j * 8 + 2 * c;
            *reinterpret_cast<uint32_t*>(out + col) = pack2<T>(o[i][j][2 * h] * inv, o[i][j][2 * h + 1] * inv);
          }
        } else {
          float* out = p.o_partial + (static_cast<size_t>(partial_slot) * p.rows + row) * kHeadDimV;
#pragma unroll
          for (int j = 0; j < Cfg::kPvCols / 8; ++j) {
            const int col = pv_n * Cfg::kPvCols + j * 8 + 2 * c;
            *reinterpret_cast<float2*>(out + col) = make_float2(o[i][j][2 * h] * inv, o[i][j][2 * h + 1] * inv);
          }
        }
      }
    }
    if (tid < Cfg::M) {
      const int row = m_tile * Cfg::M + tid;
      if (row < p.rows) {
        const float l = sm.row_sum[cur][tid];
        const float lse = poison ? NAN : (l > 0.f ? sm.row_max[cur][tid] * p.softmax_scale + logf(l) : -INFINITY);
        if (write_final) {
          const int qi = row / p.num_heads, head = row % p.num_heads;
          p.lse[req * p.lse_stride_b + qi * p.lse_stride_s + head * p.lse_stride_h] = lse;
        } else {
          p.lse_partial[static_cast<size_t>(partial_slot) * p.rows + row] = lse;
        }
      }
    }
  }
}

}  // namespace openmla::kernels::portable
