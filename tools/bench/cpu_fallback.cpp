#include "cpu_fallback.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "openmla/error.h"
#include "openmla/fp8.h"
#include "openmla/reference.h"
#include "openmla/sparse_decode.h"

namespace openmla::bench {
namespace {

constexpr int kBatch = 2, kQueryLen = 2, kHeads = 16, kSeqlen = 300;

// A grid configuration's queries on the small case: h_q 16, s_k 300, two requests (or one per count of a
// ragged pattern, when it has more).
BenchConfig small_case(const BenchConfig& c) {
  BenchConfig s = c;
  s.batch_size = std::max<int>(kBatch, static_cast<int>(c.q_counts.size()));
  s.num_heads = kHeads;
  s.seqlen = std::max(kSeqlen, c.q_len);
  s.varlen = false;
  return s;
}

struct FormatRun {
  double ms = 0.0;
  double checksum = 0.0;  // sum of out plus the sum of lse
  unsigned device_errors = 0;
};

// The reference on config c's queries (uniform or ragged, causal or tree-masked), every request c.seqlen long.
FormatRun run_format(KVFormat format, uint64_t seed, const BenchConfig& c) {
  const int b = c.batch_size, s_q = c.q_len, h_q = c.num_heads, seqlen = c.seqlen;
  const QueryInputs queries = query_inputs(c);
  const int64_t total_q = queries.total_q;
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const DType q_dtype = format == KVFormat::kFP16 ? DType::kFloat16 : DType::kBFloat16;
  const DType cache_dtype = format == KVFormat::kBF16 ? DType::kBFloat16
                            : format == KVFormat::kFP16 ? DType::kFloat16
                                                        : DType::kUInt8;
  const int row = format == KVFormat::kFP8DsMla ? kDsMlaBytesPerToken : kHeadDimQK;
  const int blocks = (seqlen + kPageSize - 1) / kPageSize;
  const int num_pages = b * blocks;

  // Block table: a random permutation of the pages.
  std::vector<int32_t> table(num_pages);
  std::iota(table.begin(), table.end(), 0);
  std::shuffle(table.begin(), table.end(), rng);
  std::vector<int32_t> seqlens(b, seqlen);

  // KV from N(0, 1), written into the paged cache by the reference writer (every format).
  const int tokens = b * seqlen;
  std::vector<float> latent(static_cast<size_t>(tokens) * kHeadDimV), rope(static_cast<size_t>(tokens) * kRopeDim);
  for (float& x : latent) x = normal(rng);
  for (float& x : rope) x = normal(rng);
  std::vector<int32_t> slots(tokens);
  for (int r = 0; r < b; ++r) {
    for (int t = 0; t < seqlen; ++t)
      slots[r * seqlen + t] = table[r * blocks + t / kPageSize] * kPageSize + t % kPageSize;
  }
  std::vector<uint8_t> cache(static_cast<size_t>(num_pages) * kPageSize * row * dtype_size(cache_dtype));
  KVCache kv;
  kv.format = format;
  kv.data = make_tensor(cache.data(), cache_dtype, {num_pages, kPageSize, row});
  WriteKVArgs w;
  w.kv_latent = make_tensor(latent.data(), DType::kFloat32, {tokens, kHeadDimV});
  w.k_rope = make_tensor(rope.data(), DType::kFloat32, {tokens, kRopeDim});
  w.slots = make_tensor(slots.data(), DType::kInt32, {tokens});
  w.cache = kv;
  reference::write_kv(w);

  std::vector<uint16_t> q(static_cast<size_t>(total_q) * h_q * kHeadDimQK);
  for (uint16_t& bits : q) {
    const float x = normal(rng);
    bits = q_dtype == DType::kFloat16 ? fp8::float_to_fp16(x) : fp8::float_to_bf16(x);
  }
  std::vector<float> out(static_cast<size_t>(total_q) * h_q * kHeadDimV);
  std::vector<float> lse(static_cast<size_t>(total_q) * h_q);
  std::vector<int32_t> q_indptr = queries.q_indptr;
  std::vector<int64_t> mask = queries.mask;

  DecodeShape shape;
  shape.batch_size = b;
  shape.q_len = s_q;
  shape.num_heads = h_q;
  shape.q_dtype = q_dtype;
  shape.kv_format = format;
  shape.causal = c.causal();
  shape.query_layout = c.layout;
  shape.tree_mask = c.tree_mask;
  DecodeArgs args;
  if (c.ragged()) {
    args.q = make_tensor(q.data(), q_dtype, {total_q, h_q, kHeadDimQK});
    args.out = make_tensor(out.data(), DType::kFloat32, {total_q, h_q, kHeadDimV});
    args.lse = make_tensor(lse.data(), DType::kFloat32, {total_q, h_q});
    args.q_indptr = make_tensor(q_indptr.data(), DType::kInt32, {b + 1});
  } else {
    args.q = make_tensor(q.data(), q_dtype, {b, s_q, h_q, kHeadDimQK});
    args.out = make_tensor(out.data(), DType::kFloat32, {b, s_q, h_q, kHeadDimV});
    args.lse = make_tensor(lse.data(), DType::kFloat32, {b, s_q, h_q});
  }
  if (c.tree_mask == TreeMask::kPerRequest) {
    args.mask = make_tensor(mask.data(), DType::kInt64, {b, s_q});
  } else if (c.tree_mask != TreeMask::kNone) {  // shared [s_q] or packed [total_q]
    args.mask = make_tensor(mask.data(), DType::kInt64, {static_cast<int64_t>(mask.size())});
  }
  args.kv = kv;
  args.block_table = make_tensor(table.data(), DType::kInt32, {b, blocks});
  args.cache_seqlens = make_tensor(seqlens.data(), DType::kInt32, {b});
  args.softmax_scale = 1.0f / std::sqrt(static_cast<float>(kHeadDimQK));

  FormatRun result;
  const auto start = std::chrono::steady_clock::now();
  result.device_errors = reference::decode(args, shape);
  result.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  for (float x : out) result.checksum += x;
  for (float x : lse) result.checksum += x;
  return result;
}

constexpr int kSparseTopkSmall = 128;  // of the small case's 300 tokens per request

// reference::sparse_decode on the small case: every query token attends to kSparseTopkSmall distinct random slots of
// its request's tokens (pages in a shuffled order), the sparse grid's inputs at a size the CPU takes.
FormatRun run_sparse_format(KVFormat format, uint64_t seed) {
  const int b = kBatch, s_q = kQueryLen, h_q = kHeads, seqlen = kSeqlen, topk = kSparseTopkSmall;
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const DType q_dtype = format == KVFormat::kFP16 ? DType::kFloat16 : DType::kBFloat16;
  const DType cache_dtype = format == KVFormat::kBF16 ? DType::kBFloat16
                            : format == KVFormat::kFP16 ? DType::kFloat16
                                                        : DType::kUInt8;
  const int row = format == KVFormat::kFP8DsMla ? kDsMlaBytesPerToken : kHeadDimQK;
  const int blocks = (seqlen + kPageSize - 1) / kPageSize;
  const int num_pages = b * blocks;
  std::vector<int32_t> table(num_pages);
  std::iota(table.begin(), table.end(), 0);
  std::shuffle(table.begin(), table.end(), rng);
  auto slot_of = [&](int r, int t) { return table[r * blocks + t / kPageSize] * kPageSize + t % kPageSize; };

  const int tokens = b * seqlen;
  std::vector<float> latent(static_cast<size_t>(tokens) * kHeadDimV), rope(static_cast<size_t>(tokens) * kRopeDim);
  for (float& x : latent) x = normal(rng);
  for (float& x : rope) x = normal(rng);
  std::vector<int32_t> slots(tokens);
  for (int r = 0; r < b; ++r)
    for (int t = 0; t < seqlen; ++t) slots[r * seqlen + t] = slot_of(r, t);
  std::vector<uint8_t> cache(static_cast<size_t>(num_pages) * kPageSize * row * dtype_size(cache_dtype));
  KVCache kv;
  kv.format = format;
  kv.data = make_tensor(cache.data(), cache_dtype, {num_pages, kPageSize, row});
  WriteKVArgs w;
  w.kv_latent = make_tensor(latent.data(), DType::kFloat32, {tokens, kHeadDimV});
  w.k_rope = make_tensor(rope.data(), DType::kFloat32, {tokens, kRopeDim});
  w.slots = make_tensor(slots.data(), DType::kInt32, {tokens});
  w.cache = kv;
  reference::write_kv(w);

  std::vector<int32_t> indices(static_cast<size_t>(b) * s_q * topk), positions(seqlen);
  for (int r = 0; r < b; ++r) {
    for (int i = 0; i < s_q; ++i) {
      std::iota(positions.begin(), positions.end(), 0);
      std::shuffle(positions.begin(), positions.end(), rng);
      for (int k = 0; k < topk; ++k) indices[(static_cast<size_t>(r) * s_q + i) * topk + k] = slot_of(r, positions[k]);
    }
  }
  std::vector<uint16_t> q(static_cast<size_t>(b) * s_q * h_q * kHeadDimQK);
  for (uint16_t& bits : q) {
    const float x = normal(rng);
    bits = q_dtype == DType::kFloat16 ? fp8::float_to_fp16(x) : fp8::float_to_bf16(x);
  }
  std::vector<float> out(static_cast<size_t>(b) * s_q * h_q * kHeadDimV), lse(static_cast<size_t>(b) * s_q * h_q);

  SparseDecodeShape shape;
  shape.batch_size = b;
  shape.q_len = s_q;
  shape.num_heads = h_q;
  shape.q_dtype = q_dtype;
  shape.kv_format = format;
  shape.topk = topk;
  SparseDecodeArgs args;
  args.q = make_tensor(q.data(), q_dtype, {b, s_q, h_q, kHeadDimQK});
  args.kv = kv;
  args.indices = make_tensor(indices.data(), DType::kInt32, {b, s_q, topk});
  args.softmax_scale = 1.0f / std::sqrt(static_cast<float>(kHeadDimQK));
  args.out = make_tensor(out.data(), DType::kFloat32, {b, s_q, h_q, kHeadDimV});
  args.lse = make_tensor(lse.data(), DType::kFloat32, {b, s_q, h_q});

  FormatRun result;
  const auto start = std::chrono::steady_clock::now();
  result.device_errors = reference::sparse_decode(args, shape, TensorView(), TensorView());
  result.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  for (float x : out) result.checksum += x;
  for (float x : lse) result.checksum += x;
  return result;
}

}  // namespace

int run_cpu_reference_demo(std::FILE* out, uint64_t seed, const std::vector<BenchConfig>& configs) {
  std::fprintf(out, "CPU reference decode (float64 accumulation): b=%d s_q=%d h_q=%d s_k=%d, causal, pages of %d "
               "in a shuffled block table, q and KV from N(0,1)\n",
               kBatch, kQueryLen, kHeads, kSeqlen, kPageSize);
  std::fprintf(out, "  %-11s %10s %22s\n", "format", "time ms", "checksum (out + lse)");
  int status = 0;
  for (KVFormat f : {KVFormat::kBF16, KVFormat::kFP16, KVFormat::kFP8E4M3, KVFormat::kFP8DsMla}) {
    try {
      const FormatRun r = run_format(f, seed, BenchConfig{kBatch, kQueryLen, kHeads, kSeqlen, false});
      std::fprintf(out, "  %-11s %10.1f %22.9e%s\n", kv_format_name(f), r.ms, r.checksum,
                   r.device_errors ? "  (device errors raised)" : "");
      if (r.device_errors || !std::isfinite(r.checksum)) status = 1;
    } catch (const Error& e) {
      std::fprintf(out, "  %-11s failed: %s\n", kv_format_name(f), e.what());
      status = 1;
    }
  }

  // Sparse top-k decode when the selection has it (the sparse grid), every format on the small case.
  bool sparse = false;
  for (const BenchConfig& c : configs) sparse = sparse || c.sparse();
  if (sparse) {
    std::fprintf(out, "\nCPU reference sparse decode: b=%d s_q=%d h_q=%d, topk %d distinct random slots of each "
                 "request's %d tokens:\n", kBatch, kQueryLen, kHeads, kSparseTopkSmall, kSeqlen);
    std::fprintf(out, "  %-11s %10s %22s\n", "format", "time ms", "checksum (out + lse)");
    for (KVFormat f : {KVFormat::kBF16, KVFormat::kFP16, KVFormat::kFP8E4M3, KVFormat::kFP8DsMla}) {
      try {
        const FormatRun r = run_sparse_format(f, seed);
        std::fprintf(out, "  %-11s %10.1f %22.9e%s\n", kv_format_name(f), r.ms, r.checksum,
                     r.device_errors ? "  (device errors raised)" : "");
        if (r.device_errors || !std::isfinite(r.checksum)) status = 1;
      } catch (const Error& e) {
        std::fprintf(out, "  %-11s failed: %s\n", kv_format_name(f), e.what());
        status = 1;
      }
    }
  }

  // The speculative forms of the selection (ragged queries, tree masks), each once on the small case.
  bool speculative = false;
  for (const BenchConfig& c : configs) speculative = speculative || c.speculative_form();
  if (!speculative) return status;
  std::vector<BenchConfig> cases;
  for (const BenchConfig& c : configs) {
    const BenchConfig small = small_case(c);
    if (std::find(cases.begin(), cases.end(), small) == cases.end()) cases.push_back(small);
  }
  std::fprintf(out, "\nThe selection's query forms on the same small case (bf16; s_k=%d, h_q=%d; ragged patterns over "
               "at least %d requests):\n", kSeqlen, kHeads, kBatch);
  std::fprintf(out, "  %-48s %10s %22s\n", "configuration", "time ms", "checksum (out + lse)");
  for (const BenchConfig& c : cases) {
    try {
      const FormatRun r = run_format(KVFormat::kBF16, seed, c);
      std::fprintf(out, "  %-48s %10.1f %22.9e%s\n", c.label().c_str(), r.ms, r.checksum,
                   r.device_errors ? "  (device errors raised)" : "");
      if (r.device_errors || !std::isfinite(r.checksum)) status = 1;
    } catch (const Error& e) {
      std::fprintf(out, "  %-48s failed: %s\n", c.label().c_str(), e.what());
      status = 1;
    }
  }
  return status;
}

}  // namespace openmla::bench
