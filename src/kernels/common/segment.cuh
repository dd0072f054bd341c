// A CTA's view of one request inside its split part: which 64-token blocks it covers, whether the
// request is valid for this call, and where its result goes. Shared by every decode kernel so the
// guards and the split bookkeeping have one definition.
#pragma once

#include <cstdint>

#include "kernels/arch/sync.cuh"
#include "kernels/common/decode_params.h"
#include "kernels/common/kv_kind.h"
#include "kernels/common/page_table.cuh"
#include "openmla/error.h"

namespace openmla::kernels {

inline constexpr int kSegmentPageTokens = 64;

// Element offsets of packed query row (query token qi, head) of request req in q, out and lse.
__device__ __forceinline__ int64_t q_offset(const DecodeParams& p, int req, int qi, int head) {
  return req * p.q_stride_b + qi * p.q_stride_s + head * p.q_stride_h;
}
__device__ __forceinline__ int64_t out_offset(const DecodeParams& p, int req, int qi, int head) {
  return req * p.o_stride_b + qi * p.o_stride_s + head * p.o_stride_h;
}
__device__ __forceinline__ int64_t lse_offset(const DecodeParams& p, int req, int qi, int head) {
  return req * p.lse_stride_b + qi * p.lse_stride_s + head * p.lse_stride_h;
}

// Per-tensor FP8 with device-held scales (DecodeParams::kv_descale): the factors a call's scores and outputs take on
// top of the host-known softmax and output scales. Read once per CTA after the grid-dependency wait (a preceding
// kernel may write them); 1 for every other call and for the instantiations of other kinds, which never read the
// pointers. A scale that is not finite and > 0 makes both NaN, so every row that sees a key comes out NaN, and
// thread 0 of each CTA that runs flags it.
struct CallScales {
  float score = 1.f;
  float out = 1.f;
};
template <int kKind>
__device__ __forceinline__ CallScales call_scales(const DecodeParams& p) {
  if constexpr (kKind == kKvE4M3) {
    if (p.kv_descale != nullptr) {
      const float kv = *p.kv_descale;
      const float q = p.q_descale != nullptr ? *p.q_descale : 1.f;
      if (isfinite(kv) && kv > 0.f && isfinite(q) && q > 0.f) return {q * kv, kv};
      if (threadIdx.x == 0) atomicOr(p.error_word, kDeviceErrorScale);
      return {NAN, NAN};
    }
  }
  return {};
}

// Sparse decode (DecodeParams::sparse_q_len > 0): its requests are the call's query tokens, so request r writes
// out and lse as token r % s_q of request r / s_q.
struct OutRow {
  int req, token;
};
__device__ __forceinline__ OutRow sparse_out_row(const DecodeParams& p, int req) {
  return {req / p.sparse_q_len, req % p.sparse_q_len};
}

// The attention sink's factor on a final output row: 1 / (1 + exp(sink[head] - lse)), 0 for a sink of +inf or a
// row that saw nothing (lse -inf); 1 without a sink.
__device__ __forceinline__ float sink_factor(const DecodeParams& p, int head, float lse) {
  return p.attn_sink != nullptr ? 1.f / (1.f + expf(p.attn_sink[head] - lse)) : 1.f;
}

// A row's LSE (natural log) from its scaled running max and its sum of weights l: -inf when no key
// weighed (l = 0), NaN when a non-finite input reached the sum (l is NaN; "l > 0 ? : -inf" alone made
// that -inf, and the combine then dropped the part as empty: a finite answer for a NaN input).
__device__ __forceinline__ float row_lse(float max_term, float l) {
  return l > 0.f ? max_term + logf(l) : (l == 0.f ? -INFINITY : NAN);
}

// A request's query tokens. base: what the offset functions above take for the request (uniform: its index;
// ragged: its first packed token, the b-strides being the token strides); count tokens, rows = count * h_q.
// A malformed ragged offset pair leaves the request without rows (nothing of it is written) and flags it.
struct RequestQueries {
  int base;
  int count;
  int rows;
  bool malformed;
};

template <bool kRagged>
__device__ __forceinline__ RequestQueries request_queries(const DecodeParams& p, int req) {
  if constexpr (!kRagged) {
    return {req, p.q_len, p.rows, false};
  } else {
    const int begin = p.q_indptr[req], end = p.q_indptr[req + 1];
    if (begin < 0 || end < begin || end > p.total_q || end - begin > p.q_len) return {0, 0, 0, true};
    return {begin, end - begin, (end - begin) * p.num_heads, false};
  }
}

// Whether packed row `row` of a request is one of its query rows in the general-query variant: below its rows and of
// a head below the real count (padding heads are neither read nor written). The uniform variant's test is row < p.rows.
__device__ __forceinline__ bool request_row(const DecodeParams& p, const RequestQueries& rq, int row) {
  return row < rq.rows && (row & (p.num_heads - 1)) < p.heads;
}

// The keys a query row sees: [0, prefix), and prefix + j < limit for each set bit j of draft (a tree mask's row;
// 0 otherwise, with limit = prefix). For the kernels' general-query variant (ragged queries, tree masks).
struct KeyWindow {
  int prefix;
  int limit;
  uint64_t draft;

  __device__ __forceinline__ bool sees(int key) const {
    const unsigned j = static_cast<unsigned>(key - prefix);
    return key < prefix || (key < limit && j < 64u && ((draft >> (j & 63u)) & 1u));
  }
};

// Row `row` (token * h_q + head) of a request with `rq` queries and `seqlen` keys. A row past the request's
// rows sees nothing (and reads no mask word).
__device__ __forceinline__ KeyWindow key_window(const DecodeParams& p, const RequestQueries& rq, int req, int seqlen,
                                                int row) {
  if (row >= rq.rows) return {0, 0, 0};
  const int token = row >> (__ffs(p.num_heads) - 1);
  if (p.mask_kind != 0) {
    const int64_t word = p.mask_kind == 1 ? token : p.mask_kind == 2 ? static_cast<int64_t>(req) * p.q_len + token
                                                                      : static_cast<int64_t>(rq.base) + token;
    const uint64_t bits = rq.count >= 64 ? ~uint64_t{0} : (uint64_t{1} << rq.count) - 1;
    return {seqlen - rq.count, seqlen, p.mask[word] & bits};
  }
  const int limit = p.causal && rq.count > 1 ? seqlen - rq.count + 1 + token : seqlen;
  return {limit, limit, 0};
}

// Whether a tile of keys from first_key on can hold a key some row does not see (below the draft region every
// row sees every key).
__device__ __forceinline__ bool window_needs_mask(const DecodeParams& p, const RequestQueries& rq, int seqlen,
                                                  int end_key) {
  const bool masked = p.mask_kind != 0 || (p.causal && rq.count > 1);
  return end_key > seqlen - (masked ? rq.count : 0);
}

// Validity of a request for this call; returns DeviceErrorBits (0 = fine).
__device__ __forceinline__ unsigned check_request(const DecodeParams& p, int seqlen, int planned) {
  if (seqlen < 0) return kDeviceErrorNegativeSeqlen;
  if (static_cast<int64_t>(seqlen) > static_cast<int64_t>(p.max_pages) * kSegmentPageTokens)
    return kDeviceErrorSeqlenBeyondTable;
  // Length 0 is an empty request (batch padding): out 0, lse -inf, never an error.
  if (p.causal && p.q_len > 1 && seqlen > 0 && seqlen < p.q_len) return kDeviceErrorSeqlenBelowQueryLen;
  if (planned != (seqlen + kSegmentPageTokens - 1) / kSegmentPageTokens) return kDeviceErrorPlanMismatch;
  return 0;
}

// Packed query row `row` = token * h_q + head of a request. h_q is one of 8..128, a power of two
// (core/validate.cpp), so a shift and a mask: a division by the runtime h_q compiles to ~20 instructions per row,
// on which the sm90 epilogue stalls.
struct QueryRow {
  int token, head;
};
__device__ __forceinline__ QueryRow query_row(const DecodeParams& p, int row) {
  return {row >> (__ffs(p.num_heads) - 1), row & (p.num_heads - 1)};
}

// Keys [0, limit) that query row `row` of a request may see: its whole length, or under the causal mask up to
// its own token: seqlen - s_q + 1 + token.
__device__ __forceinline__ int key_limit(const DecodeParams& p, int seqlen, int row) {
  if (!p.causal) return seqlen;
  const int token = query_row(p, row).token;
  return seqlen - p.q_len + 1 + (token < p.q_len - 1 ? token : p.q_len - 1);
}

// The general-query form (ragged queries, tree masks): the query-length check uses the request's own count, a
// tree mask places the tokens like a causal chain, and a malformed offset pair covers no block.
__device__ __forceinline__ unsigned check_request_queries(const DecodeParams& p, const RequestQueries& rq,
                                                          int seqlen, int planned) {
  if (rq.malformed) return kDeviceErrorQueryOffsets;
  if (seqlen < 0) return kDeviceErrorNegativeSeqlen;
  if (static_cast<int64_t>(seqlen) > static_cast<int64_t>(p.max_pages) * kSegmentPageTokens)
    return kDeviceErrorSeqlenBeyondTable;
  const bool masked = p.mask_kind != 0 || p.causal;
  if (masked && rq.count > 1 && seqlen > 0 && seqlen < rq.count) return kDeviceErrorSeqlenBelowQueryLen;
  if (planned != (seqlen + kSegmentPageTokens - 1) / kSegmentPageTokens) return kDeviceErrorPlanMismatch;
  return 0;
}

struct Segment {
  int req;
  int seqlen;
  int block_begin;   // first 64-token block of this part (a bad request covers none)
  int block_end;     // exclusive, clamped to the request's blocks
  unsigned errors;   // check_request's bits
  bool write_final;  // the request is not split: write out/lse directly
  int partial_slot;  // otherwise: this part's partial slot
};

// rq: the request's queries for the general-query form (check_request_queries); nullptr: uniform (check_request).
__device__ __forceinline__ Segment make_segment(const DecodeParams& p, const SplitPart& part, int part_idx, int req,
                                                const RequestQueries* rq = nullptr) {
  const RequestSplit split = p.splits[req];
  Segment s;
  s.req = req;
  s.seqlen = p.seqlens[req];
  s.errors = rq ? check_request_queries(p, *rq, s.seqlen, split.blocks) : check_request(p, s.seqlen, split.blocks);
  const int block_begin = req == part.begin_req ? part.begin_block : 0;
  const int block_end = req == part.end_req ? part.end_block : (split.blocks > 0 ? split.blocks : 1);
  const int seq_blocks = s.seqlen > 0 ? (s.seqlen + kSegmentPageTokens - 1) / kSegmentPageTokens : 0;
  s.block_begin = block_begin;
  s.block_end = s.errors ? block_begin : (block_end < seq_blocks ? block_end : seq_blocks);
  s.write_final = split.num_splits <= 1;
  s.partial_slot = split.partial_base + (part_idx - split.first_part);
  return s;
}

// Whether any page id of the segment's blocks is out of range, read by `threads` threads together (thread `tid`
// takes every threads-th id): a segment's guard in one round of loads, where a check per tile would put a global
// load's wait into every tile of the sm90 wide kernels' loops. Each thread gets only its own share: the caller ORs
// the flags.
__device__ __forceinline__ bool segment_page_out_of_range(const DecodeParams& p, const Segment& seg, int tid,
                                                          int threads) {
  const int* ids = page_ids(p, seg.req);
  bool bad = false;
  for (int block = seg.block_begin + tid; block < seg.block_end; block += threads) {
    const int page = ids[block];
    bad |= page < 0 || page >= p.num_pages;
  }
  return bad;
}

// Every decode kernel's start: wait for the preceding grids (the planner wrote the schedule, and
// the previous call's combine may still read the partial buffers), let the dependent combine launch
// now (it waits for this grid's completion before reading anything), and read the CTA's part.
__device__ __forceinline__ SplitPart begin_part(const DecodeParams& p, int part_idx) {
  wait_for_preceding_grids();
  allow_dependent_grids();
  return p.parts[part_idx];
}

// The tiles of a CTA's part in order, (request, block), skipping requests that cover none: for a
// role that walks the tiles ahead of the others (the sm90 FP8 copy issuer) on the same sequence.
struct TileCursor {
  const DecodeParams& p;
  const SplitPart& part;
  int part_idx;
  int req, block = 0, block_end = 0;

  __device__ TileCursor(const DecodeParams& params, const SplitPart& sp, int idx)
      : p(params), part(sp), part_idx(idx), req(sp.begin_req - 1) {
    next_request();
  }
  __device__ bool valid() const { return req <= part.end_req; }
  // The tile's page id as the caller's block table holds it: unchecked, so the copy that uses it must
  // range-check it (a bad id is never a coordinate).
  __device__ int page_id() const { return kernels::page_id(p, req, block); }
  // The tile's tokens inside its request's length: > 0, and kSegmentPageTokens except in the last tile.
  __device__ int tokens_in_tile() const { return p.seqlens[req] - block * kSegmentPageTokens; }
  __device__ void next() {
    if (++block >= block_end) next_request();
  }
  __device__ void next_request() {
    while (++req <= part.end_req) {
      const Segment seg = make_segment(p, part, part_idx, req);
      block = seg.block_begin;
      block_end = seg.block_end;
      if (block < block_end) return;
    }
  }
};

}  // namespace openmla::kernels
