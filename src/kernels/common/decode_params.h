// Plain-old-data parameters of one decode call, filled by DecodePlan::run from validated views.
#pragma once

#include <cstdint>

#include "kernels/common/schedule.h"

namespace openmla::kernels {

struct DecodeParams {
  // Shape.
  int batch;
  int q_len;      // s_q
  int num_heads;  // h_q
  int rows;       // s_q * h_q query rows per request, row = token * h_q + head
  bool causal;    // applied only when q_len > 1
  float softmax_scale;
  float scale_log2;  // softmax_scale * log2(e): scores go through exp2
  // Per-tensor FP8: scores and outputs are computed on the raw e4m3 values; the cache scale is
  // folded into softmax_scale / scale_log2 above and into out_scale (1 for other formats).
  float out_scale;

  // q [b, s_q, h_q, 576], strides in elements.
  const void* q;
  int64_t q_stride_b, q_stride_s, q_stride_h;

  // Paged cache, in the plan's format (DecodeShape::kv_format: the kernel's instantiation, kv_kind.h).
  const uint8_t* kv;
  int64_t page_stride_bytes;
  int num_pages;

  const int* block_table;  // [b, max_pages]
  int64_t block_table_stride;
  int max_pages;
  const int* seqlens;  // [b]

  // Outputs, strides in elements.
  void* out;
  int64_t o_stride_b, o_stride_s, o_stride_h;
  float* lse;
  int64_t lse_stride_b, lse_stride_s, lse_stride_h;

  // Schedule and split buffers (workspace).
  const SplitPart* parts;
  const RequestSplit* splits;
  int num_parts;
  // Partial rows (kernels/common/partial_rows.h): fp16 scaled per 64 columns, or fp32 (fp16_partials: the
  // backend's fp16_partials() of the plan's launch configuration for this call, set by run() before either
  // launch); the decode kernel writes and the combine reads that format.
  void* o_partial;         // [slots, rows, 512]
  float* o_partial_scale;  // [slots, rows, 8]: each block's decode scale, a power of two (fp16 rows only)
  float* lse_partial;      // [slots, rows]
  bool fp16_partials;
  unsigned* error_word;

  // Ragged queries (QueryLayout::kRagged; nullptr = uniform): request r's tokens are the packed rows
  // q_indptr[r] .. q_indptr[r+1] - 1 of [total_q, ...] tensors. q_len is then the most tokens a request may have,
  // rows = q_len * h_q the most rows, and each b-stride above equals its s-stride, so the offset functions
  // (segment.cuh) take a request's first packed token where they take the request index of uniform queries.
  const int* q_indptr;
  int total_q;
  // Tree mask rows (TreeMask; mask_kind 0 = none): one 64-bit word per query token, bit j = sees draft token j.
  const uint64_t* mask;
  int mask_kind;
  // The query's head count h_q. num_heads above is the row layout's, a power of two >= 8: the general-query
  // variant pads any h_q in 1..128 up to it (rows of padding heads are neither read nor written); elsewhere equal.
  int heads;
  // Per-tensor FP8 with device-held scales (DecodeShape::device_scales): the cache's scale and an e4m3 query's (or
  // nullptr), read on the device (call_scales, segment.cuh); the scores take both, the outputs the cache's. nullptr
  // otherwise. Only the e4m3 instantiations read them.
  const float* kv_descale;
  const float* q_descale;

  // Sparse top-k decode (SparseDecodePlan; the portable kernel's sparse-key variant). Its requests are the call's
  // query tokens, request r = b * sparse_q_len + i (q_len 1; out and lse are addressed as token i of request b).
  // Request r's keys are its sparse_main_len[r] slots of sparse_indices, then the rest of its seqlens[r] from
  // sparse_extra_indices; a slot is page * page_block + offset of its cache. sparse_q_len 0: not sparse.
  int sparse_q_len;
  const int* sparse_indices;        // [b, s_q, topk] int32 (-1: skip), strides below (elements)
  int64_t sparse_indices_stride_b, sparse_indices_stride_s;
  const int* sparse_main_len;       // [requests]
  int sparse_page_block;            // the main cache's tokens per page (p.kv, p.page_stride_bytes)
  int64_t sparse_slots;             // num_pages * sparse_page_block
  const int* sparse_extra_indices;  // extra cache (nullptr: none): [b, s_q, extra_topk]
  int64_t sparse_extra_stride_b, sparse_extra_stride_s;
  const uint8_t* sparse_extra_kv;
  int64_t sparse_extra_page_stride_bytes;
  int sparse_extra_page_block;
  int64_t sparse_extra_slots;
  const float* attn_sink;           // [h_q] or nullptr: out *= 1 / (1 + exp(sink[h] - lse)) on the final rows
};

}  // namespace openmla::kernels
