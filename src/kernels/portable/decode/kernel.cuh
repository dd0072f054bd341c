// Portable split-KV MLA decode kernel (mma.sync + cp.async; sm_80 and newer).
//
// CTA (m_tile, part): query rows [m_tile * M, +M) of every request segment the part owns
// (schedule.h). Per segment: load Q, then for each KV tile of N tokens, pipelined (two stages for
// 16-bit caches; two raw tiles in flight and one dequantized stage for FP8 caches):
//   S = Q K^T            (warps: kQkWarpsM x kQkWarpsN, K from shared memory)
//   mask                 (length; causal positions for the last tiles)
//   online softmax step  (weights against the running max while no score passes it by 2^8; else
//                         row maxima exchanged through shared memory; P stored as T)
//   O = O * alpha + P V  (warps: kPvWarpsM x kPvWarpsN, V = first 512 columns of the K tile)
// and finally normalize and write out/lse (or a partial for the combine kernel).
// Guards: a bad seqlen or page id never addresses memory; the segment's rows become NaN and the
// error word records why. Tokens past seqlen are zero-filled in shared memory, never read.
// Variants (PortableQueries): uniform queries; general queries (ragged counts, tree masks, padded heads); sparse
// keys (sparse top-k decode: each request is one query token whose keys are gathered row by row from its index
// list, SparseRows).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>
#include <type_traits>

#include "kernels/arch/sm80.cuh"
#include "kernels/arch/sync.cuh"
#include "kernels/common/convert.cuh"
#include "kernels/common/decode_params.h"
#include "kernels/common/page_table.cuh"
#include "kernels/common/partial_rows.h"
#include "kernels/common/sector_stores.cuh"
#include "kernels/common/segment.cuh"
#include "kernels/common/softmax.cuh"
#include "kernels/portable/decode/config.h"
#include "kernels/portable/decode/fp8_fragments.cuh"
#include "kernels/portable/decode/layout.cuh"
#include "kernels/portable/decode/p_fragments.cuh"
#include "openmla/error.h"

namespace openmla::kernels::portable {

// Q rows of this m-tile of request `req` into shared memory (rows past the request's are zero). rq: the
// request's queries in the general-query variant, nullptr in the uniform one (s_q * h_q rows at index req).
template <class Cfg, typename T>
__device__ __forceinline__ void load_q(const DecodeParams& p, int req, const RequestQueries* rq, int m_tile, T* sq) {
  const char* q = static_cast<const char*>(p.q);
  for (int i = threadIdx.x; i < Cfg::M * kRowChunks; i += Cfg::kThreads) {
    const int r = i / kRowChunks, c = i % kRowChunks;
    const int row = m_tile * Cfg::M + r;
    const bool valid = rq ? request_row(p, *rq, row) : row < p.rows;
    const auto [qi, head] = query_row(p, valid ? row : 0);
    const char* src = q + q_offset(p, rq ? rq->base : req, qi, head) * 2 + c * kChunkBytes;
    cp_async_16(reinterpret_cast<char*>(sq) + swizzled_chunk_offset(r, c), valid ? src : q, valid);
  }
}

// The page id of a tile, read from the block table (tile_page_id) one tile before its copy is issued,
// so the copy does not wait for this read.
template <class Cfg>
__device__ __forceinline__ int tile_page_id(const DecodeParams& p, int req, int tile) {
  return page_id(p, req, tile * Cfg::N / kPageTokens);
}

// A tile's N token rows (row r at src + r * kRowBytes, kRowBytes / 16 chunks) into shared memory at
// dst + dst_offset(r, c); rows at or past valid_rows are zero-filled without a global read. Warp w
// copies its N / kNumWarps consecutive rows as one contiguous run of chunks, lane l taking chunks
// l, l + 32, ...: each warp instruction copies 512 contiguous bytes, the source address steps by
// constants, and a chunk's row is known to within one (rows of >= 32 chunks), so no division.
template <class Cfg, int kRowBytes, class DstOffset>
__device__ __forceinline__ void copy_tile_rows(const char* src, int valid_rows, char* dst, DstOffset dst_offset) {
  constexpr int kCols = kRowBytes / kChunkBytes;
  constexpr int kRowsPerWarp = Cfg::N / Cfg::kNumWarps;
  constexpr int kWarpChunks = kRowsPerWarp * kCols;
  static_assert(Cfg::N % Cfg::kNumWarps == 0 && kRowBytes % kChunkBytes == 0 && kCols >= 32,
                "whole rows per warp, whole chunks, rows of at least one warp's chunks");
  const int lane = threadIdx.x % 32, row0 = (threadIdx.x / 32) * kRowsPerWarp;
  // Source of chunk `lane` of the warp's run; a zero-filled row's address stays inside the page.
  const char* run = src + row0 * kRowBytes + lane * kChunkBytes;
#pragma unroll
  for (int j = 0; j < (kWarpChunks + 31) / 32; ++j) {
    const int q = lane + 32 * j;  // chunk index in the warp's run
    if (kWarpChunks % 32 == 0 || q < kWarpChunks) {
      const int r = (32 * j) / kCols + (q >= ((32 * j) / kCols + 1) * kCols ? 1 : 0);
      const int c = q - r * kCols;
      cp_async_16(dst + dst_offset(row0 + r, c), run + 32 * j * kChunkBytes, row0 + r < valid_rows);
    }
  }
}

// One KV tile (N tokens of page `page`) into a stage: 16-bit rows swizzled for ldmatrix, quantized
// tokens as stored (raw_chunk_offset). Returns false (and copies nothing) when the page id is out of
// range. Tokens at or past seqlen are zero-filled.
template <class Cfg, int kKind>
__device__ __forceinline__ bool load_kv_tile(const DecodeParams& p, int page, int tile, int seqlen, void* stage) {
  constexpr int kTokenBytes = KvLayout<kKind>::kTokenBytes;
  const int first_token = tile * Cfg::N;
  if (page < 0 || page >= p.num_pages) return false;
  const char* src = reinterpret_cast<const char*>(p.kv) + page * p.page_stride_bytes +
                    (first_token % kPageTokens) * kTokenBytes;
  copy_tile_rows<Cfg, kTokenBytes>(src, seqlen - first_token, static_cast<char*>(stage), [](int r, int c) {
    if constexpr (KvLayout<kKind>::kQuantized) {
      return raw_chunk_offset<kKind>(r, c);
    } else {
      return swizzled_chunk_offset(r, c);
    }
  });
  return true;
}

// Sparse keys: the source of each key row of a tile, resolved from the index lists one tile ahead of its copy
// (three slots: the tile being masked, the tile being copied, the tile being resolved). nullptr: the key is
// skipped (index -1, or past the request's keys), zero-filled and masked.
template <class Cfg>
struct SparseRows {
  const char* src[3][Cfg::N];
};
static_assert(sizeof(SparseRows<TileConfig<64, 64, 8>>) <= kSparseRowsMaxBytes, "the sparse plan's smem allowance");

template <class Cfg, bool kSparse>
__device__ __forceinline__ SparseRows<Cfg>* sparse_rows_storage() {
  if constexpr (kSparse) {
    __shared__ SparseRows<Cfg> rows;
    return &rows;
  } else {
    return nullptr;
  }
}

// A sparse request's index lists: its query token's rows of indices and extra_indices.
struct SparseLists {
  const int* main;
  const int* extra;
  int main_len;  // keys from the main list; the rest of the request's keys from the extra one
};
__device__ __forceinline__ SparseLists sparse_lists(const DecodeParams& p, int req) {
  const OutRow token = sparse_out_row(p, req);
  SparseLists l;
  l.main = p.sparse_indices + token.req * p.sparse_indices_stride_b + token.token * p.sparse_indices_stride_s;
  l.extra = p.sparse_extra_indices != nullptr ? p.sparse_extra_indices + token.req * p.sparse_extra_stride_b +
                                                    token.token * p.sparse_extra_stride_s
                                              : nullptr;
  l.main_len = p.sparse_main_len[req];
  return l;
}

// Resolves the sources of tile `tile`'s keys into rows.src[tile % 3]; returns whether an index was outside its
// cache (the key is then skipped too, never dereferenced). seqlen: the request's keys.
template <class Cfg, int kKind>
__device__ __forceinline__ bool resolve_sparse_rows(const DecodeParams& p, SparseRows<Cfg>& rows,
                                                    const SparseLists& lists, int tile, int seqlen) {
  constexpr int kTokenBytes = KvLayout<kKind>::kTokenBytes;
  const int main_len = lists.main_len;
  bool bad = false;
  for (int r = threadIdx.x; r < Cfg::N; r += Cfg::kThreads) {
    const int key = tile * Cfg::N + r;
    const char* src = nullptr;
    if (key < seqlen) {
      const bool main = key < main_len;
      const int64_t slot = main ? lists.main[key] : lists.extra[key - main_len];
      const int64_t slots = main ? p.sparse_slots : p.sparse_extra_slots;
      if (slot >= 0 && slot < slots) {
        const int block = main ? p.sparse_page_block : p.sparse_extra_page_block;
        const int64_t page_stride = main ? p.page_stride_bytes : p.sparse_extra_page_stride_bytes;
        const char* base = reinterpret_cast<const char*>(main ? p.kv : p.sparse_extra_kv);
        src = base + (slot / block) * page_stride + (slot % block) * kTokenBytes;
      } else {
        bad |= slot != -1;
      }
    }
    rows.src[tile % 3][r] = src;
  }
  return bad;
}

// A tile's key rows from their resolved sources, as copy_tile_rows copies a page's (same chunk order); a row
// without a source is zero-filled without a global read.
template <class Cfg, int kKind>
__device__ __forceinline__ void load_sparse_tile(const DecodeParams& p, const SparseRows<Cfg>& rows, int tile,
                                                 void* stage) {
  constexpr int kRowBytes = KvLayout<kKind>::kTokenBytes;
  constexpr int kCols = kRowBytes / kChunkBytes;
  constexpr int kRowsPerWarp = Cfg::N / Cfg::kNumWarps;
  constexpr int kWarpChunks = kRowsPerWarp * kCols;
  const int lane = threadIdx.x % 32, row0 = (threadIdx.x / 32) * kRowsPerWarp;
  const char* const* src = rows.src[tile % 3];
  char* dst = static_cast<char*>(stage);
#pragma unroll
  for (int j = 0; j < (kWarpChunks + 31) / 32; ++j) {
    const int q = lane + 32 * j;  // chunk index in the warp's run
    if (kWarpChunks % 32 == 0 || q < kWarpChunks) {
      const int r = q / kCols, c = q - r * kCols;
      const char* row = src[row0 + r];
      const int offset = KvLayout<kKind>::kQuantized ? raw_chunk_offset<kKind>(row0 + r, c)
                                                     : swizzled_chunk_offset(row0 + r, c);
      cp_async_16(dst + offset, row != nullptr ? row + c * kChunkBytes : reinterpret_cast<const char*>(p.kv),
                  row != nullptr);
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
#pragma unroll
  for (int ks = 0; ks < Cfg::N / 16; ++ks) {
    uint32_t a[kRowTiles][4];
    load_p_fragments<Cfg>(sp, warp_m, lane, ks, a);
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

// kN floats of one row of a [rows][kN] shared array, as 16- or 8-byte loads.
template <int kN>
__device__ __forceinline__ void load_row(const float* row, float (&v)[kN]) {
  static_assert(kN % 2 == 0, "whole float2s");
  if constexpr (kN % 4 == 0) {
#pragma unroll
    for (int i = 0; i < kN / 4; ++i) {
      const float4 x = reinterpret_cast<const float4*>(row)[i];
      v[4 * i] = x.x, v[4 * i + 1] = x.y, v[4 * i + 2] = x.z, v[4 * i + 3] = x.w;
    }
  } else {
#pragma unroll
    for (int i = 0; i < kN / 2; ++i) {
      const float2 x = reinterpret_cast<const float2*>(row)[i];
      v[2 * i] = x.x, v[2 * i + 1] = x.y;
    }
  }
}

// Running max of a row after an exact tile (raw score units): previous max and the key-warps' maxima.
template <class Cfg, typename Smem>
__device__ __forceinline__ float tile_row_max(const Smem& sm, int cur, int row) {
  float v[Cfg::kQkWarpsN];
  load_row<Cfg::kQkWarpsN>(sm.partial_max[row], v);
  float m = sm.row_max[cur][row];
#pragma unroll
  for (int w = 0; w < Cfg::kQkWarpsN; ++w) m = fmaxf(m, v[w]);
  return m;
}

// Softmax weights of a warp's scores, P = exp2(s * score_log2 - base) with each row's base in log2
// units, stored into the P tile; the quad's row sums go to partial_sum[row][qk_n] (rows row_lo and
// row_lo + 8). Returns whether any weight's exponent exceeds its row's limit.
template <class Cfg, typename Math>
__device__ __forceinline__ bool store_softmax_weights(const float (&s)[Cfg::kQkKeys / 8][4], float score_log2,
                                                      float base_lo, float base_hi, float limit_lo, float limit_hi,
                                                      int row_lo, int qk_n, int c, char* p_base,
                                                      float* partial_sum_lo, float* partial_sum_hi) {
  const int row_hi = row_lo + 8;
  float sum_lo = 0.f, sum_hi = 0.f, x_max_lo = -INFINITY, x_max_hi = -INFINITY;
#pragma unroll
  for (int t = 0; t < Cfg::kQkKeys / 8; ++t) {
    const float x0 = fmaf(s[t][0], score_log2, -base_lo), x1 = fmaf(s[t][1], score_log2, -base_lo);
    const float x2 = fmaf(s[t][2], score_log2, -base_hi), x3 = fmaf(s[t][3], score_log2, -base_hi);
    x_max_lo = fmaxf(x_max_lo, fmaxf(x0, x1));
    x_max_hi = fmaxf(x_max_hi, fmaxf(x2, x3));
    const float e0 = exp2_ftz(x0), e1 = exp2_ftz(x1), e2 = exp2_ftz(x2), e3 = exp2_ftz(x3);
    sum_lo += e0 + e1;
    sum_hi += e2 + e3;
    const int key = qk_n * Cfg::kQkKeys + t * 8 + 2 * c;  // within the tile
    const int byte_in_chunk = (key % 8) * 2;
    *reinterpret_cast<uint32_t*>(p_base + p_chunk_offset<Cfg>(row_lo, key / 8) + byte_in_chunk) = pack2<Math>(e0, e1);
    *reinterpret_cast<uint32_t*>(p_base + p_chunk_offset<Cfg>(row_hi, key / 8) + byte_in_chunk) = pack2<Math>(e2, e3);
  }
  sum_lo = quad_sum(sum_lo);
  sum_hi = quad_sum(sum_hi);
  if (c == 0) {
    partial_sum_lo[qk_n] = sum_lo;
    partial_sum_hi[qk_n] = sum_hi;
  }
  return x_max_lo > limit_lo || x_max_hi > limit_hi;
}

// kQueries (PortableQueries): the general-query variant (ragged queries, tree masks; segment.cuh RequestQueries /
// KeyWindow) and the sparse-key variant (one query token per request, keys gathered from index lists) share the
// general form; the uniform variant's code is the same with rows = p.rows and the causal limits of key_limit.
template <class Cfg, typename T, int kKind, int kQueries>
__global__ void __launch_bounds__(Cfg::kThreads, (kMinCtasPerSm<Cfg, kKind>)) portable_decode_kernel(const DecodeParams p) {
  constexpr bool kGeneral = kQueries != kUniformQueries;
  constexpr bool kSparse = kQueries == kSparseKeys;
  using Math = MathType<T, kKind>;
  using Smem = SharedStorage<Cfg, Math, kKind>;
  constexpr bool kQuantized = KvLayout<kKind>::kQuantized;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  Smem& sm = *reinterpret_cast<Smem*>(smem_raw);

  const int m_tile = blockIdx.x;
  const int part_idx = blockIdx.y;
  const SplitPart part = begin_part(p, part_idx);
  if (part.begin_req > part.end_req) return;
  const CallScales scales = call_scales<kKind>(p);

  // Sparse keys: the key rows' sources, in static shared memory of that variant only (nullptr in the others).
  SparseRows<Cfg>* const sparse_rows = sparse_rows_storage<Cfg, kSparse>();

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int qk_m = warp / Cfg::kQkWarpsN, qk_n = warp % Cfg::kQkWarpsN;
  const int pv_m = warp / Cfg::kPvWarpsN, pv_n = warp % Cfg::kPvWarpsN;
  const int g = lane / 4, c = lane % 4;  // accumulator row within 8, column pair
  constexpr int kTilesPerBlock = kPageTokens / Cfg::N;

  for (int req = part.begin_req; req <= part.end_req; ++req) {
    // Ragged queries read their offsets; uniform ones in the general variant (a tree mask, padded heads) and sparse
    // decode's one-token requests have none (q_indptr null).
    const RequestQueries rq = kQueries == kGeneralQueries && p.q_indptr != nullptr ? request_queries<true>(p, req)
                                                                                  : request_queries<false>(p, req);
    const Segment seg = make_segment(p, part, part_idx, req, kGeneral ? &rq : nullptr);
    if constexpr (kGeneral) {
      // An m-tile past the request's rows has nothing to compute or write (CTA-uniform).
      if (m_tile * Cfg::M >= rq.rows) {
        if (seg.errors && tid == 0 && m_tile == 0) atomicOr(p.error_word, seg.errors);
        continue;
      }
    }
    // The request's rows and its argument of the offset functions (uniform: s_q * h_q rows at index req).
    const RequestQueries* const general = kGeneral ? &rq : nullptr;
    const auto is_row = [&](int row) { return general ? request_row(p, *general, row) : row < p.rows; };
    const auto q_base = [&] { return general ? general->base : req; };
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
    // Pipeline: two stages, one tile in flight while one is computed (config.h).
    constexpr int kInFlight = kStages - 1;
    [[maybe_unused]] auto sparse_stage = [&](int t) -> void* {
      const int stage = (t - tile_begin) % kStages;
      if constexpr (kQuantized) {
        return sm.raw[stage];
      } else {
        return sm.kv[stage];
      }
    };
    auto load_tile = [&](int t, int page) -> bool {
      const int stage = (t - tile_begin) % kStages;
      void* dst;
      if constexpr (kQuantized) {
        dst = sm.raw[stage];
      } else {
        dst = sm.kv[stage];
      }
      return load_kv_tile<Cfg, kKind>(p, page, t, seqlen, dst);
    };
    bool bad_page = false;
    // Sparse keys: the request's index lists (sparse_main_len keys from the main one, then the extra one's).
    [[maybe_unused]] SparseLists lists{};
    if constexpr (kSparse) lists = sparse_lists(p, req);
    bool bad_index = false;
    // Scores come out in units of 2^-q_shift (a bf16 query multiplied in fp16, fp8_fragments.cuh).
    int q_shift = 0;
    if (tile_begin < tile_end) {
      if constexpr (kQuantized) {
        q_shift = load_q_permuted<Cfg, T, Math>(p, req, general, m_tile, sm.q, sm.q_amax);
      } else {
        load_q<Cfg, T>(p, req, general, m_tile, sm.q);
      }
    }
    const float score_scale = p.softmax_scale * scales.score * exp2f(static_cast<float>(q_shift));
    const float score_log2 = p.scale_log2 * scales.score * exp2f(static_cast<float>(q_shift));
    // One commit group per tile ahead (possibly empty) keeps cp.async.wait_group's count uniform.
    int next_page = 0;
    if constexpr (kSparse) {
      // The first tile's rows and the next tile's, resolved before any copy (and visible after the barrier).
      static_assert(kInFlight == 1, "sparse rows are resolved for one tile in flight");
      if (tile_begin < tile_end) bad_index |= resolve_sparse_rows<Cfg, kKind>(p, *sparse_rows, lists, tile_begin, seqlen);
      if (tile_begin + 1 < tile_end)
        bad_index |= resolve_sparse_rows<Cfg, kKind>(p, *sparse_rows, lists, tile_begin + 1, seqlen);
      __syncthreads();
      if (tile_begin < tile_end) load_sparse_tile<Cfg, kKind>(p, *sparse_rows, tile_begin, sparse_stage(tile_begin));
      cp_async_commit();
    } else {
#pragma unroll
      for (int ahead = 0; ahead < kInFlight; ++ahead) {
        const int t = tile_begin + ahead;
        if (t < tile_end) bad_page |= !load_tile(t, tile_page_id<Cfg>(p, req, t));
        cp_async_commit();
      }
      next_page = tile_begin + kInFlight < tile_end ? tile_page_id<Cfg>(p, req, tile_begin + kInFlight) : 0;
    }

    float o[Cfg::kPvRows / 16][Cfg::kPvCols / 8][4];
#pragma unroll
    for (int i = 0; i < Cfg::kPvRows / 16; ++i)
#pragma unroll
      for (int j = 0; j < Cfg::kPvCols / 8; ++j) o[i][j][0] = o[i][j][1] = o[i][j][2] = o[i][j][3] = 0.f;

    int cur = 0;
    for (int tile = tile_begin; tile < tile_end; ++tile) {
      const int stage = (tile - tile_begin) % kStages;
      cp_async_wait<kInFlight - 1>();  // this tile's group has landed (later ones may not have)
      __syncthreads();  // ... for all threads; all warps are done with the stage reused next
      auto issue_next_tile = [&] {
        if constexpr (kSparse) {
          // The next tile's rows were resolved before this tile's barrier; the one after goes into the third slot.
          if (tile + 1 < tile_end) load_sparse_tile<Cfg, kKind>(p, *sparse_rows, tile + 1, sparse_stage(tile + 1));
          cp_async_commit();
          if (tile + 2 < tile_end)
            bad_index |= resolve_sparse_rows<Cfg, kKind>(p, *sparse_rows, lists, tile + 2, seqlen);
        } else {
          if (tile + kInFlight < tile_end) bad_page |= !load_tile(tile + kInFlight, next_page);
          cp_async_commit();
          if (tile + kInFlight + 1 < tile_end) next_page = tile_page_id<Cfg>(p, req, tile + kInFlight + 1);
        }
      };

      // ---- S = Q K^T and masking ----
      float s[Cfg::kQkKeys / 8][4];
      if constexpr (kQuantized) {
        // The next tile's copies are issued once this tile's first K bytes are requested, so the
        // loads the first MMAs wait for are ahead of them in the queue.
        qk_gemm_quantized<Cfg, Math, kKind>(sm.q, sm.raw[stage], sm.qk_partials, qk_m, qk_n, lane, s, issue_next_tile);
      } else {
        issue_next_tile();
        qk_gemm<Cfg, T>(sm.q, sm.kv[stage], qk_m, qk_n, lane, s);
      }
      const int key0 = tile * Cfg::N + qk_n * Cfg::kQkKeys;
      const int row_lo = qk_m * 16 + g, row_hi = row_lo + 8;
      if constexpr (kSparse) {
        // Keys without a source (index -1 or outside its cache) weigh nothing; both rows see the same keys.
        const char* const* src = sparse_rows->src[tile % 3];
#pragma unroll
        for (int t = 0; t < Cfg::kQkKeys / 8; ++t) {
          const int k = qk_n * Cfg::kQkKeys + t * 8 + 2 * c;  // within the tile
          if (src[k] == nullptr) s[t][0] = s[t][2] = -INFINITY;
          if (src[k + 1] == nullptr) s[t][1] = s[t][3] = -INFINITY;
        }
      }
      if constexpr (kGeneral) {
        // Keys a row may see: its KeyWindow (prefix, then its causal limit or tree-mask bits).
        if (window_needs_mask(p, rq, seqlen, (tile + 1) * Cfg::N)) {
          const KeyWindow w_lo = key_window(p, rq, req, seqlen, m_tile * Cfg::M + row_lo);
          const KeyWindow w_hi = key_window(p, rq, req, seqlen, m_tile * Cfg::M + row_hi);
#pragma unroll
          for (int t = 0; t < Cfg::kQkKeys / 8; ++t) {
            const int k = key0 + t * 8 + 2 * c;
            if (!w_lo.sees(k)) s[t][0] = -INFINITY;
            if (!w_lo.sees(k + 1)) s[t][1] = -INFINITY;
            if (!w_hi.sees(k)) s[t][2] = -INFINITY;
            if (!w_hi.sees(k + 1)) s[t][3] = -INFINITY;
          }
        }
      }
      // Keys a row may see: all < seqlen; causal rows (token qi) only <= seqlen - s_q + qi.
      const bool needs_mask = !kGeneral && (tile + 1) * Cfg::N > seqlen - (p.causal ? p.q_len : 0);
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

      // ---- online softmax ----
      // Lazy rescaling: after a segment's first tile the weights are taken against the running max
      // as it stands, without exchanging this tile's maxima, unless a score exceeds it by more than
      // kLazyRescaleLog2 (then the CTA redoes the tile exactly, below). P stays below 2^8, the row
      // sums and O need no rescale, and the tile has one CTA barrier fewer.
      const float ref_lo = sm.row_max[cur][row_lo], ref_hi = sm.row_max[cur][row_hi];
      char* p_base = reinterpret_cast<char*>(sm.p);
      bool exact = tile == tile_begin;
      float max_lo = ref_lo, max_hi = ref_hi;
      if (!exact) {
        const bool over = store_softmax_weights<Cfg, Math>(
            s, score_log2, softmax_base(ref_lo) * score_log2, softmax_base(ref_hi) * score_log2,
            lazy_rescale_limit(ref_lo), lazy_rescale_limit(ref_hi), row_lo, qk_n, c, p_base, sm.partial_sum[row_lo],
            sm.partial_sum[row_hi]);
        exact = __syncthreads_or(over);
      }
      if (exact) {
        // Row maxima across key-warps, then the weights against them.
        float mx_lo = -INFINITY, mx_hi = -INFINITY;
#pragma unroll
        for (int t = 0; t < Cfg::kQkKeys / 8; ++t) {
          mx_lo = fmaxf(mx_lo, fmaxf(s[t][0], s[t][1]));
          mx_hi = fmaxf(mx_hi, fmaxf(s[t][2], s[t][3]));
        }
        mx_lo = quad_max(mx_lo);
        mx_hi = quad_max(mx_hi);
        if (c == 0) {
          sm.partial_max[row_lo][qk_n] = mx_lo;
          sm.partial_max[row_hi][qk_n] = mx_hi;
        }
        __syncthreads();
        max_lo = tile_row_max<Cfg>(sm, cur, row_lo);
        max_hi = tile_row_max<Cfg>(sm, cur, row_hi);
        store_softmax_weights<Cfg, Math>(s, score_log2, softmax_base(max_lo) * score_log2,
                                         softmax_base(max_hi) * score_log2, INFINITY, INFINITY, row_lo, qk_n, c, p_base,
                                         sm.partial_sum[row_lo], sm.partial_sum[row_hi]);
        __syncthreads();
      }

      // ---- O = O * alpha + P V ----
      // A tile taken against the running max leaves every alpha at 1. Once the running maxima settle
      // most exact tiles do too; skipping the rescale then saves kPvRows * kPvCols / 32 multiplies per
      // thread and their dependency in front of the MMAs. The test is warp-uniform.
      float alpha[Cfg::kPvRows / 16][2];
      bool rescale = false;
      if (exact) {
#pragma unroll
        for (int i = 0; i < Cfg::kPvRows / 16; ++i) {
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int row = pv_m * Cfg::kPvRows + i * 16 + g + h * 8;
            const float m_old = sm.row_max[cur][row];
            // One m-tile of 16 rows: the PV rows are the QK rows, their maxima already read.
            const float m_new = Cfg::M == 16 ? (h ? max_hi : max_lo) : tile_row_max<Cfg>(sm, cur, row);
            alpha[i][h] = (m_new == -INFINITY || m_new == m_old) ? 1.f : exp2f((m_old - m_new) * score_log2);
            rescale |= alpha[i][h] != 1.f;
          }
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
      if constexpr (kQuantized) {
        pv_gemm_quantized<Cfg, Math, kKind>(sm.p, sm.raw[stage], pv_m, pv_n, lane, o);
      } else {
        pv_gemm<Cfg, T>(sm.p, sm.kv[stage], pv_m, pv_n, lane, o);
      }

      // Running state for the next tile (readers of [cur] above are unaffected).
      if (tid < Cfg::M) {
        const float m_old = sm.row_max[cur][tid];
        const float m_new = exact ? tile_row_max<Cfg>(sm, cur, tid) : m_old;
        const float alpha = m_new == -INFINITY || m_new == m_old ? 1.f : exp2f((m_old - m_new) * score_log2);
        float sums[Cfg::kQkWarpsN];
        load_row<Cfg::kQkWarpsN>(sm.partial_sum[tid], sums);
        float l = sm.row_sum[cur][tid] * alpha;
#pragma unroll
        for (int w = 0; w < Cfg::kQkWarpsN; ++w) l += sums[w];
        sm.row_max[cur ^ 1][tid] = m_new;
        sm.row_sum[cur ^ 1][tid] = l;
      }
      cur ^= 1;
    }
    cp_async_wait<0>();
    // Final state visible (and, for sparse keys, whether any thread met an index outside its cache).
    if constexpr (kSparse) {
      bad_index = __syncthreads_or(bad_index);
    } else {
      __syncthreads();
    }

    // ---- epilogue: normalize, write out/lse or the partial ----
    const unsigned errors = bad_request | (bad_page ? kDeviceErrorPageIdOutOfRange : 0u) |
                            (bad_index ? kDeviceErrorSparseIndex : 0u);
    if (errors && tid == 0 && m_tile == 0) atomicOr(p.error_word, errors);
    const bool poison = errors != 0;
    // A row's factor on O (output scale / l): NaN for a poisoned segment, 0 for a row that saw no key.
    const auto row_factor = [&](int local_row) {
      const float l = sm.row_sum[cur][local_row];
      return poison ? NAN : (l > 0.f ? p.out_scale * scales.out / l : 0.f);
    };
    // The output's request and token (sparse keys: the request is a query token of the call's batch).
    const auto out_at = [&](int qi) -> OutRow {
      if constexpr (kSparse) {
        return sparse_out_row(p, req);
      } else {
        return {q_base(), qi};
      }
    };
    // A final row's factor with the attention sink (sparse decode), from the row's lse.
    const auto final_factor = [&](int local_row, int head) {
      const float f = row_factor(local_row);
      if constexpr (kSparse) {
        if (p.attn_sink != nullptr)
          return f * sink_factor(p, head, row_lse(sm.row_max[cur][local_row] * score_scale, sm.row_sum[cur][local_row]));
      }
      return f;
    };
    const bool odd = c & 1;
    if (!write_final) {
      // Partial rows (partial_rows.h): fp16, one scale per 64-column block, whose columns the quad holds (8 j of 8
      // columns; in the quantized order, 16 consecutive dims a lane). Every store instruction writes whole 32-byte
      // sectors (sector_stores.cuh): lanes c and c ^ 1 swap halves (exchange_halves) or words (store_swapped_words).
      // Every lane takes part in the shuffles; only the stores test the row.
      static_assert(kPortableFp16Partials && Cfg::kPvCols % kPartialBlockCols == 0,
                    "fp16 partial rows; a warp's columns are whole scale blocks");
#pragma unroll
      for (int i = 0; i < Cfg::kPvRows / 16; ++i) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int local_row = pv_m * Cfg::kPvRows + i * 16 + g + h * 8;
          const int row = m_tile * Cfg::M + local_row;
          const bool in_tile = is_row(row);
          const float inv = row_factor(local_row);
          const size_t prow = partial_row_index(partial_slot, p.rows, row);
          uint16_t* out = static_cast<uint16_t*>(p.o_partial) + prow * kHeadDimV;
#pragma unroll
          for (int blk = 0; blk < Cfg::kPvCols / kPartialBlockCols; ++blk) {
            float amax = 0.f;
#pragma unroll
            for (int j = 8 * blk; j < 8 * blk + 8; ++j)
              amax = fmaxf(amax, fmaxf(fabsf(o[i][j][2 * h]), fabsf(o[i][j][2 * h + 1])));
            amax = quad_max(amax);
            const PartialBlockScale scale = partial_block_scale(amax * inv);
            const float e = scale.encode;  // (o * inv) * e: inv * e overflows for a zero or tiny block
            if constexpr (kQuantized) {
              uint32_t w[8];
#pragma unroll
              for (int k = 0; k < 2; ++k)
#pragma unroll
                for (int jj = 0; jj < 8; jj += 2)
                  w[4 * k + jj / 2] = pack2<__half>(o[i][blk * 8 + jj][2 * h + k] * inv * e,
                                                    o[i][blk * 8 + jj + 1][2 * h + k] * inv * e);
              const uint4 lo = make_uint4(w[0], w[1], w[2], w[3]), hi = make_uint4(w[4], w[5], w[6], w[7]);
              store_lane_pair_32<true>(
                  reinterpret_cast<uint8_t*>(out + quantized_output_dim<Cfg>(pv_n, c, blk * 8, 0)), lo, hi, odd,
                  in_tile);
            } else {
              uint16_t* lane_out = out + pv_n * Cfg::kPvCols + odd * 8 + 2 * (c & 2);
#pragma unroll
              for (int j = 8 * blk; j < 8 * blk + 8; j += 2) {
                const uint32_t w0 = pack2<__half>(o[i][j][2 * h] * inv * e, o[i][j][2 * h + 1] * inv * e);
                const uint32_t w1 = pack2<__half>(o[i][j + 1][2 * h] * inv * e, o[i][j + 1][2 * h + 1] * inv * e);
                store_swapped_words(lane_out + j * 8, w0, w1, odd, in_tile);
              }
            }
            if (in_tile && c == 0)
              p.o_partial_scale[prow * kPartialBlocks + pv_n * (Cfg::kPvCols / kPartialBlockCols) + blk] =
                  scale.decode;
          }
        }
      }
    } else {  // the request's output, in the query type (kPortableWholeSectorOutput)
#pragma unroll
      for (int i = 0; i < Cfg::kPvRows / 16; ++i) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int local_row = pv_m * Cfg::kPvRows + i * 16 + g + h * 8;
          const int row = m_tile * Cfg::M + local_row;
          const bool in_tile = is_row(row);
          if constexpr (!kPortableWholeSectorOutput<Cfg>) {
            if (!in_tile) continue;  // no shuffles below
          }
          // Whole sectors: every lane shuffles, only the stores test the row.
          const auto [qi, head] = query_row(p, in_tile ? row : 0);
          const float inv = final_factor(local_row, head);
          const OutRow at = out_at(qi);
          T* out = static_cast<T*>(p.out) + out_offset(p, at.req, at.token, head);
          if constexpr (kQuantized) {
            // A lane's 16 consecutive dims of each 64-dim block (quantized_output_dim), lanes c and c ^ 1 adjacent.
#pragma unroll
            for (int blk = 0; blk < Cfg::kPvCols / 64; ++blk) {
              uint32_t w[8];
#pragma unroll
              for (int e = 0; e < 2; ++e)
#pragma unroll
                for (int jj = 0; jj < 8; jj += 2)
                  w[4 * e + jj / 2] =
                      pack2<T>(o[i][blk * 8 + jj][2 * h + e] * inv, o[i][blk * 8 + jj + 1][2 * h + e] * inv);
              const uint4 lo = make_uint4(w[0], w[1], w[2], w[3]), hi = make_uint4(w[4], w[5], w[6], w[7]);
              store_lane_pair_32<kPortableWholeSectorOutput<Cfg>>(
                  reinterpret_cast<uint8_t*>(out + quantized_output_dim<Cfg>(pv_n, c, blk * 8, 0)), lo, hi, odd,
                  in_tile);
            }
          } else if constexpr (kPortableWholeSectorOutput<Cfg>) {
            T* lane_out = out + pv_n * Cfg::kPvCols + odd * 8 + 2 * (c & 2);
#pragma unroll
            for (int j = 0; j < Cfg::kPvCols / 8; j += 2) {
              const uint32_t w0 = pack2<T>(o[i][j][2 * h] * inv, o[i][j][2 * h + 1] * inv);
              const uint32_t w1 = pack2<T>(o[i][j + 1][2 * h] * inv, o[i][j + 1][2 * h + 1] * inv);
              store_swapped_words(lane_out + j * 8, w0, w1, odd, in_tile);
            }
          } else if (in_tile) {  // 4-byte stores (half sectors per instruction)
#pragma unroll
            for (int j = 0; j < Cfg::kPvCols / 8; ++j)
              *reinterpret_cast<uint32_t*>(out + pv_n * Cfg::kPvCols + j * 8 + 2 * c) =
                  pack2<T>(o[i][j][2 * h] * inv, o[i][j][2 * h + 1] * inv);
          }
        }
      }
    }
    if (tid < Cfg::M) {
      const int row = m_tile * Cfg::M + tid;
      if (is_row(row)) {
        const float l = sm.row_sum[cur][tid];
        const float lse = poison ? NAN : row_lse(sm.row_max[cur][tid] * score_scale, l);
        if (write_final) {
          const auto [qi, head] = query_row(p, row);
          const OutRow at = out_at(qi);
          p.lse[lse_offset(p, at.req, at.token, head)] = lse;
        } else {
          p.lse_partial[partial_row_index(partial_slot, p.rows, row)] = lse;
        }
      }
    }
  }
}

}  // namespace openmla::kernels::portable
