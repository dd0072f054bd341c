// The decode configurations openmla-bench measures (named grids, filters, varlen lengths) and how
// bytes and FLOPs are counted for them. Pure host code.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "openmla/decode.h"
#include "openmla/kv_format.h"

namespace openmla::bench {

struct BenchConfig {
  int batch_size = 1;
  int q_len = 1;      // s_q: every request's query tokens (uniform), or the most of a request (ragged)
  int num_heads = 16; // h_q
  int seqlen = 0;     // s_k of every request, or the mean length when varlen
  bool varlen = false;  // lengths ~ N(seqlen, seqlen / 2), clipped to >= s_q

  // Speculative-decoding forms (the spec grid). The defaults are the uniform batches of the other grids.
  QueryLayout layout = QueryLayout::kUniform;
  // Ragged: query tokens per request, the pattern repeated over the batch ({1, 8}: 1, 8, 1, 8, ...); its
  // largest count is q_len. Empty with uniform queries.
  std::vector<int> q_counts{};
  TreeMask tree_mask = TreeMask::kNone;
  // With a tree mask: the parent of each of the q_len draft tokens (-1: the prefix), parents before
  // children (openmla::tree_mask_from_parents); a ragged request of n tokens uses the first n.
  std::vector<int> tree_parents{};
  // FLOPs over the keys each query token sees (causal, tree) rather than 2 * s_q * h_q * sum(s_k) * 1088
  // (count_work); the spec grid counts this way, so that its TFLOP/s ratios compare like with like.
  bool visible_key_flops = false;
  // Sparse top-k decode (the sparse grid): every query token attends to topk distinct slots drawn at random from its
  // request's seqlen cached tokens (SparseDecodePlan). 0: dense decode over the whole prefix.
  int topk = 0;

  bool sparse() const { return topk > 0; }
  // The method: causal whenever s_q > 1, unless a tree mask decides what each token sees (sparse tokens see the
  // slots they list).
  bool causal() const { return q_len > 1 && tree_mask == TreeMask::kNone && !sparse(); }
  bool ragged() const { return layout == QueryLayout::kRagged; }
  // Ragged or tree-masked: what the other grids' tools (anchors, the FlashMLA peer) do not take.
  bool speculative_form() const { return ragged() || tree_mask != TreeMask::kNone; }
  // "b=64 s_q=2 h_q=64 s_k=4096", "b=128 s_q=1 h_q=16 s_k~N(4096,2048)", "b=64 s_q=16 h_q=16 s_k=4096
  // tree=shared", "b=64 s_q=8 h_q=16 s_k=4096 ragged q=1/8" or "b=32 s_q=1 h_q=64 s_k=32768 topk=2048".
  std::string label() const;
  // The table's short form of the queries: "1", "chain", "tree/shared", "ragged 1/8", ...
  std::string query_form() const;
  // The JSON's description of the query counts: "16 per request", "1/8 interleaved: 32 x 1, 32 x 8", ...
  std::string q_counts_description() const;
  bool operator==(const BenchConfig& o) const {
    return batch_size == o.batch_size && q_len == o.q_len && num_heads == o.num_heads &&
           seqlen == o.seqlen && varlen == o.varlen && layout == o.layout && q_counts == o.q_counts &&
           tree_mask == o.tree_mask && tree_parents == o.tree_parents && visible_key_flops == o.visible_key_flops &&
           topk == o.topk;
  }
};

// The host side of a configuration's queries, as decode takes them.
struct QueryInputs {
  std::vector<int> counts;         // query tokens of each request [b]
  int64_t total_q = 0;             // their sum (uniform: b * s_q)
  std::vector<int32_t> q_indptr;   // ragged: [b + 1] row offsets (DecodeArgs::q_indptr); empty when uniform
  std::vector<int64_t> mask;       // with a tree mask: DecodeArgs::mask's rows (shared [s_q], per-request
                                   // [b, s_q], packed [total_q]); empty without
};
// Throws Error(kInvalidArgument) for an inconsistent configuration (counts against q_len, parents).
QueryInputs query_inputs(const BenchConfig& c);

// Grid names: "quick" (a handful of representative shapes, well under a minute on a GPU),
// "deepseek" (b x s_q x h_q x s_k plus the varlen batches), "varlen" (only those), "fp8", "spec"
// (speculative decoding: tree verify, mixed batches, 64-token verify), "sparse" (top-k decode, topk 2048),
// "all" (all but spec and sparse).
// Throws openmla::Error(kInvalidArgument) for an unknown name.
std::vector<BenchConfig> grid_configs(const std::string& name);
const char* grid_names();  // "quick|deepseek|varlen|fp8|spec|sparse|all"

// A ratio the run reports from its rows (the spec grid's "ratios"), per format.
enum class RatioKind : uint8_t {
  kTime = 0,            // sum of the numerator rows' median times / sum of the denominator rows'
  kTflopsOverBest = 1,  // the numerator row's TFLOP/s / the best TFLOP/s among the denominator rows
  kPeerTime = 2,        // sum of the peer's median times over the numerator rows / sum of OpenMLA's (> 1: faster)
  kPeerTimeWorst = 3,   // the smallest peer time / OpenMLA time among the numerator rows
  kGbpsOverCopy = 4,    // the numerator row's GB/s / the device copy bandwidth measured in the same run
};
struct RatioDef {
  std::string name;     // "tree/chain h_q=16 s_k=4096"
  RatioKind kind = RatioKind::kTime;
  std::vector<BenchConfig> numerator, denominator;
  double target_max = -1.0;  // the value should be <= this; negative: no target
  std::string meaning;  // one line: what the ratio compares
};
// The ratios of a grid (empty for all but spec and sparse), each kept only when every row it reads is among `selected`
// (a --filter may drop some).
std::vector<RatioDef> grid_ratios(const std::string& name, const std::vector<BenchConfig>& selected);

// "--filter b=64/128,s_q=1,h_q=16,s_k=4096,varlen=0": each key keeps configs whose value is one
// of the '/'-separated values; keys not given match everything.
struct ConfigFilter {
  std::vector<int> batch_size, q_len, num_heads, seqlen;
  int varlen = -1;  // -1: either
  bool matches(const BenchConfig& c) const;
};
ConfigFilter parse_filter(const std::string& spec);  // throws Error(kInvalidArgument)

// "--shape 128,1,128,2048" or "128,1,16,4096,varlen": one configuration outside the named grids
// (b >= 1, s_q 1..16, h_q 8..128, s_k >= s_q). Throws Error(kInvalidArgument) naming what is wrong.
BenchConfig parse_shape(const std::string& spec);

// The sparse grid's rows and ratios as named here: memory-bound (h_q 64, s_q 1), compute-bound (h_q 128 or s_q 2),
// TP8 (h_q 16, FlashMLA on the same requests padded to 64 heads).
inline constexpr int kSparseTopk = 2048;

// Per-request KV lengths: seqlen for every request, or the varlen draw (deterministic in the
// config and seed: the same batch for every format, backend and run).
std::vector<int> config_seqlens(const BenchConfig& c, uint64_t seed);

// The method's counting (docs/benchmarking.md), with n_r query tokens of request r (s_q when uniform):
//   bytes = sum(s_k) * bytes_per_token(format) + sum(n_r) * h_q * (576 + 512) * 2   (KV + q + out)
//   flops = 2 * h_q * sum(n_r * s_k_r) * (576 + 512), or with visible_key_flops
//   flops = 2 * h_q * sum over query tokens of the keys it sees * (576 + 512)
// Sparse (topk > 0), over the b * s_q query tokens, each reading its topk selected tokens and their indices:
//   bytes = b * s_q * (topk * (bytes_per_token(format) + 4) + h_q * (576 + 512) * 2)
//   flops = 2 * h_q * b * s_q * topk * (576 + 512)
struct WorkCount {
  int64_t total_seqlen = 0;
  double bytes = 0.0;
  double flops = 0.0;
};
WorkCount count_work(const BenchConfig& c, const std::vector<int>& seqlens, KVFormat format);

}  // namespace openmla::bench
