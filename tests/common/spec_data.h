// Test data for speculative query shapes: ragged per-request query counts (QueryLayout::kRagged) and tree
// masks (TreeMask), built on DecodeData's cache, block tables and lengths, and compared with the oracle.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/decode_data.h"
#include "openmla/decode.h"

namespace openmla::testing {

enum class MaskRows {
  kTree,        // rows from parent arrays (each row: itself and its ancestors)
  kRandomBits,  // arbitrary words (rows seeing no draft token, rows seeing later tokens, bits past the count)
};

struct SpecCase {
  DecodeCase base;              // base.q_len: the most query tokens of a request (uniform: every request's)
  bool ragged = false;
  std::vector<int> q_counts;    // ragged: one per request, each in [0, base.q_len]
  int total_q_padding = 3;      // ragged: rows of q past the last request's (never read, never written)
  TreeMask tree = TreeMask::kNone;
  MaskRows mask_rows = MaskRows::kTree;
  // kTree: parent arrays (-1 = a root on the prefix), one per request (kShared: the first only), each of
  // base.q_len entries (a ragged request uses the first count). Empty: random trees from the seed.
  std::vector<std::vector<int>> parents;
  std::string describe() const;
};

struct SpecData {
  SpecCase c;
  DecodeData data;             // uniform data with s_q = base.q_len: cache, tables, lengths, its q
  DecodeShape shape;           // with query_layout and tree_mask
  int64_t total_q = 0;         // token rows of q/out/lse: ragged q's first dimension, or b * s_q
  std::vector<uint16_t> q;     // [total_q, h_q, 576] (uniform: data.q)
  std::vector<int32_t> q_indptr;  // [b + 1] (ragged)
  std::vector<int64_t> mask;   // tree rows: [s_q], [b, s_q] or [total_q]
  int count(int r) const;      // request r's query tokens
  int64_t first_token(int r) const;  // its first row of q (ragged: q_indptr[r]; uniform: r * s_q)
  // Views of the host buffers: q (ragged [total_q, h_q, 576]), q_indptr, mask, cache, tables, lengths;
  // out and lse undefined.
  DecodeArgs host_args() const;
};

SpecData make_spec_data(const SpecCase& c);

// A DecodeCase for spec data: b = seqlens.size() requests of up to q_len tokens, h_q heads, the cache format (per-tensor
// e4m3 with a scale far from 1), the query type.
DecodeCase spec_base_case(int q_len, int h_q, std::vector<int> seqlens, KVFormat format, uint64_t seed,
                          DType q_dtype = DType::kBFloat16);
// A random tree of n tokens: each token's parent drawn from the earlier ones or the prefix (-1).
std::vector<int> random_parents(int n, uint64_t seed);

// The oracle on the spec data: out [total_q, h_q, 512], lse [total_q, h_q], rows no request owns NaN.
ReferenceResult run_spec_reference(const SpecData& d);

// Kernel results (out bits [total_q, h_q, 512], lse [total_q, h_q]) against the oracle: NaN/inf positions
// exactly (a row no request owns must stay as poisoned, NaN); per request, out within out_tol relative to its
// largest |ref| and lse within lse_tol relative to max(1, |ref|).
CompareResult compare_spec(const SpecData& d, const ReferenceResult& ref, const std::vector<uint16_t>& out_bits,
                           const std::vector<float>& lse, double out_tol = 1e-2, double lse_tol = 1e-4);

}  // namespace openmla::testing
