#include "bench_config.h"

#include <algorithm>
#include <bitset>
#include <cmath>
#include <random>
#include <sstream>

#include "core/check.h"
#include "openmla/tree_mask.h"

namespace openmla::bench {
namespace {

constexpr int kDeepseekBatch[] = {1, 16, 64, 128};
constexpr int kDeepseekQueryLen[] = {1, 2, 4};
constexpr int kDeepseekHeads[] = {16, 64, 128};
constexpr int kDeepseekSeqlen[] = {1024, 4096, 16384, 32768};
// Varlen batches: b = 128 around two means; the same s_q x h_q as the fixed grid.
constexpr int kVarlenBatch = 128;
constexpr int kVarlenMeans[] = {4096, 16384};

std::vector<BenchConfig> varlen_configs() {
  std::vector<BenchConfig> out;
  for (int mean : kVarlenMeans)
    for (int s_q : kDeepseekQueryLen)
      for (int h_q : kDeepseekHeads) out.push_back({kVarlenBatch, s_q, h_q, mean, true});
  return out;
}

std::vector<BenchConfig> deepseek_configs() {
  std::vector<BenchConfig> out;
  for (int b : kDeepseekBatch)
    for (int s_q : kDeepseekQueryLen)
      for (int h_q : kDeepseekHeads)
        for (int s_k : kDeepseekSeqlen) out.push_back({b, s_q, h_q, s_k, false});
  for (const BenchConfig& c : varlen_configs()) out.push_back(c);
  return out;
}

// Floor shapes of the Hopper issue that cover small, memory-bound, compute-bound and varlen.
std::vector<BenchConfig> quick_configs() {
  return {
      {1, 1, 16, 4096, false},     {16, 1, 16, 4096, false},   {64, 2, 64, 4096, false},
      {128, 1, 16, 16384, false},  {128, 2, 128, 16384, false}, {128, 1, 128, 4096, true},
  };
}

// Shapes of the FP8 issue: memory-bound (h_q 16 and 64 at 16K), compute-bound MTP at 8K and 16K
// (FlashMLA's sparse FP8 kernel was timed at the 16K ones). Run with --format bf16,fp8_e4m3,...
std::vector<BenchConfig> fp8_configs() {
  return {
      {128, 1, 16, 16384, false},
      {128, 1, 64, 16384, false},
      {128, 2, 128, 8192, false},
      {128, 2, 128, 16384, false},
  };
}

// Speculative decoding (the spec grid). Every configuration counts FLOPs over the keys its query tokens see.
constexpr int kSpecHeads[] = {16, 128};
// Tree verify against the causal chain of as many tokens.
constexpr int kTreeBatch = 64;
constexpr int kTreeSeqlens[] = {4096, 16384};
// EAGLE with topk 4 and depth 4: four roots, then four tokens per level (16 draft tokens), parents before
// children as EAGLE orders them.
constexpr int kEagleTreeParents[] = {-1, -1, -1, -1, 0, 0, 1, 2, 4, 4, 6, 7, 8, 9, 10, 11};
constexpr int kTreeTokens = static_cast<int>(sizeof(kEagleTreeParents) / sizeof(kEagleTreeParents[0]));
// A mixed batch: half the requests decode one token, half verify eight drafts, interleaved.
constexpr int kMixedBatch = 64;
constexpr int kMixedSeqlen = 4096;
constexpr int kMixedShort = 1, kMixedLong = 8;
// Long verify: 64 draft tokens per request, uniform and ragged, against the compute-bound uniform shapes.
constexpr int kVerifyBatch = 32, kVerifyTokens = 64, kVerifyHeads = 16, kVerifySeqlen = 8192;
constexpr int kComputeBoundSeqlens[] = {8192, 16384};  // b = 128, s_q = 2, h_q = 128 (the fp8 grid's MTP shapes)

BenchConfig spec_uniform(int b, int s_q, int h_q, int s_k) {
  BenchConfig c{b, s_q, h_q, s_k, false};
  c.visible_key_flops = true;
  return c;
}

BenchConfig spec_tree(int b, int h_q, int s_k) {
  BenchConfig c = spec_uniform(b, kTreeTokens, h_q, s_k);
  c.tree_mask = TreeMask::kShared;
  c.tree_parents.assign(std::begin(kEagleTreeParents), std::end(kEagleTreeParents));
  return c;
}

BenchConfig spec_ragged(int b, std::vector<int> counts, int h_q, int s_k) {
  BenchConfig c = spec_uniform(b, *std::max_element(counts.begin(), counts.end()), h_q, s_k);
  c.layout = QueryLayout::kRagged;
  c.q_counts = std::move(counts);
  return c;
}

struct TreePair {
  BenchConfig chain, tree;
};
std::vector<TreePair> tree_pairs() {
  std::vector<TreePair> out;
  for (int h_q : kSpecHeads)
    for (int s_k : kTreeSeqlens)
      out.push_back({spec_uniform(kTreeBatch, kTreeTokens, h_q, s_k), spec_tree(kTreeBatch, h_q, s_k)});
  return out;
}

struct MixedSet {
  BenchConfig mixed;                  // one ragged launch
  BenchConfig half_short, half_long;  // the two uniform halves, each its own launch
  BenchConfig padded;                 // every request padded to the long count
};
std::vector<MixedSet> mixed_sets() {
  std::vector<MixedSet> out;
  for (int h_q : kSpecHeads) {
    out.push_back({spec_ragged(kMixedBatch, {kMixedShort, kMixedLong}, h_q, kMixedSeqlen),
                   spec_uniform(kMixedBatch / 2, kMixedShort, h_q, kMixedSeqlen),
                   spec_uniform(kMixedBatch / 2, kMixedLong, h_q, kMixedSeqlen),
                   spec_uniform(kMixedBatch, kMixedLong, h_q, kMixedSeqlen)});
  }
  return out;
}

struct VerifySet {
  BenchConfig uniform, ragged;
  std::vector<BenchConfig> compute_bound;  // uniform shapes whose best TFLOP/s is the reference
};
VerifySet verify_set() {
  VerifySet v{spec_uniform(kVerifyBatch, kVerifyTokens, kVerifyHeads, kVerifySeqlen),
              spec_ragged(kVerifyBatch, {kVerifyTokens}, kVerifyHeads, kVerifySeqlen),
              {}};
  for (int s_k : kComputeBoundSeqlens) v.compute_bound.push_back(spec_uniform(128, 2, 128, s_k));
  return v;
}

// Related rows next to each other (a pair's rows back to back), so that the ratios compare rows taken in the
// same state of the GPU.
std::vector<BenchConfig> spec_configs() {
  std::vector<BenchConfig> out;
  for (const TreePair& p : tree_pairs()) {
    out.push_back(p.chain);
    out.push_back(p.tree);
  }
  for (const MixedSet& m : mixed_sets()) {
    out.push_back(m.mixed);
    out.push_back(m.half_short);
    out.push_back(m.half_long);
    out.push_back(m.padded);
  }
  const VerifySet v = verify_set();
  out.push_back(v.uniform);
  out.push_back(v.ragged);
  for (const BenchConfig& c : v.compute_bound) out.push_back(c);
  return out;
}

std::vector<RatioDef> spec_ratios() {
  std::vector<RatioDef> out;
  for (const TreePair& p : tree_pairs()) {
    out.push_back({"tree/chain h_q=" + std::to_string(p.chain.num_heads) + " s_k=" + std::to_string(p.chain.seqlen),
                   RatioKind::kTime, {p.tree}, {p.chain}, 1.10,
                   "16-token tree verify (EAGLE topk 4 depth 4, shared mask) / the causal chain of 16 tokens"});
  }
  for (const MixedSet& m : mixed_sets()) {
    const std::string heads = " h_q=" + std::to_string(m.mixed.num_heads);
    out.push_back({"mixed/halves" + heads, RatioKind::kTime, {m.mixed}, {m.half_short, m.half_long}, 1.05,
                   "one ragged launch of 1- and 8-token requests / the uniform halves launched separately (sum)"});
    out.push_back({"mixed/padded" + heads, RatioKind::kTime, {m.mixed}, {m.padded}, 0.75,
                   "one ragged launch of 1- and 8-token requests / every request padded to 8 tokens"});
  }
  const VerifySet v = verify_set();
  out.push_back({"verify64 uniform/compute-bound TFLOP/s", RatioKind::kTflopsOverBest, {v.uniform},
                 v.compute_bound, -1.0,
                 "64-token causal verify, uniform: its TFLOP/s / the best of the compute-bound uniform shapes"});
  out.push_back({"verify64 ragged/compute-bound TFLOP/s", RatioKind::kTflopsOverBest, {v.ragged}, v.compute_bound,
                 -1.0, "64-token causal verify, ragged: its TFLOP/s / the best of the compute-bound uniform shapes"});
  out.push_back({"verify64 ragged/uniform", RatioKind::kTime, {v.ragged}, {v.uniform}, -1.0,
                 "the ragged form of the 64-token verify / the uniform one (the same tokens)"});
  return out;
}

// Sparse top-k decode (DeepSeek-V3.2): topk 2048 slots per query token out of each request's s_k cached tokens.
constexpr int kSparseBatch[] = {1, 8, 32, 64, 128};
constexpr int kSparseSeqlen[] = {32768, 131072};
struct SparseGroup {
  int num_heads, q_len;
  const char* bound;  // what binds, for the ratios' meaning
};
// Memory-bound (one token, 64 heads: TP2), compute-bound (128 heads, or two tokens: MTP), TP8's 16 heads.
constexpr SparseGroup kSparseGroups[] = {
    {64, 1, "memory-bound"}, {128, 1, "compute-bound"}, {64, 2, "compute-bound"}, {16, 1, "TP8, memory-bound"}};

BenchConfig sparse_config(int b, int s_q, int h_q, int s_k) {
  BenchConfig c{b, s_q, h_q, s_k, false};
  c.topk = kSparseTopk;
  return c;
}

// Rows of one s_k next to each other, a group's batch sizes back to back.
std::vector<BenchConfig> sparse_configs() {
  std::vector<BenchConfig> out;
  for (int s_k : kSparseSeqlen)
    for (const SparseGroup& g : kSparseGroups)
      for (int b : kSparseBatch) out.push_back(sparse_config(b, g.q_len, g.num_heads, s_k));
  return out;
}

std::vector<RatioDef> sparse_ratios() {
  std::vector<RatioDef> out;
  for (int s_k : kSparseSeqlen) {
    for (const SparseGroup& g : kSparseGroups) {
      std::vector<BenchConfig> rows;
      for (int b : kSparseBatch) rows.push_back(sparse_config(b, g.q_len, g.num_heads, s_k));
      const std::string shape =
          "h_q=" + std::to_string(g.num_heads) + " s_q=" + std::to_string(g.q_len) + " s_k=" + std::to_string(s_k);
      const std::string peer = g.num_heads < 64 ? "FlashMLA on the same requests padded to 64 heads" : "FlashMLA";
      out.push_back({"flashmla/openmla " + shape, RatioKind::kPeerTime, rows, {}, -1.0,
                     std::string(g.bound) + ": sum over b of " + peer + "'s time / sum of OpenMLA's (> 1: faster)"});
      out.push_back({"flashmla/openmla worst b " + shape, RatioKind::kPeerTimeWorst, rows, {}, -1.0,
                     std::string(g.bound) + ": the smallest per-row " + peer + " time / OpenMLA time over b"});
      if (g.q_len != 1 || g.num_heads > 64) continue;
      for (const BenchConfig& c : rows) {
        out.push_back({"GB/s / copy b=" + std::to_string(c.batch_size) + " " + shape, RatioKind::kGbpsOverCopy, {c},
                       {}, -1.0,
                       std::string(g.bound) + ": OpenMLA's GB/s (selected KV + indices + q + out) / the device's "
                       "copy bandwidth (read + write) measured in this run"});
      }
    }
  }
  return out;
}

std::string join_counts(const std::vector<int>& counts) {
  std::string s;
  for (size_t i = 0; i < counts.size(); ++i) s += (i ? "/" : "") + std::to_string(counts[i]);
  return s;
}

// Query tokens of each request.
std::vector<int> request_counts(const BenchConfig& c) {
  std::vector<int> counts(static_cast<size_t>(c.batch_size), c.q_len);
  if (c.ragged()) {
    for (int r = 0; r < c.batch_size; ++r) counts[r] = c.q_counts[r % c.q_counts.size()];
  }
  return counts;
}

// "4/16/64" -> {4, 16, 64}; `name` is the argument the error message names.
std::vector<int> parse_int_list(const std::string& name, const std::string& values) {
  std::vector<int> out;
  std::stringstream ss(values);
  std::string item;
  while (std::getline(ss, item, '/')) {
    size_t used = 0;
    int v = 0;
    try {
      v = std::stoi(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (item.empty() || used != item.size()) {
      detail::fail_arg(name.c_str(), "integers separated by '/'", "'" + values + "'");
    }
    out.push_back(v);
  }
  return out;
}

bool contains_or_empty(const std::vector<int>& values, int v) {
  return values.empty() || std::find(values.begin(), values.end(), v) != values.end();
}

}  // namespace

std::string BenchConfig::label() const {
  std::ostringstream os;
  os << "b=" << batch_size << " s_q=" << q_len << " h_q=" << num_heads;
  if (varlen) {
    os << " s_k~N(" << seqlen << "," << seqlen / 2 << ")";
  } else {
    os << " s_k=" << seqlen;
  }
  if (tree_mask != TreeMask::kNone) os << " tree=" << tree_mask_name(tree_mask);
  if (ragged()) os << " ragged q=" << join_counts(q_counts);
  if (sparse()) os << " topk=" << topk;
  return os.str();
}

std::string BenchConfig::query_form() const {
  std::string s = ragged() ? "ragged " + join_counts(q_counts) : q_len == 1 ? "1" : causal() ? "chain" : "";
  if (tree_mask != TreeMask::kNone) s += std::string(s.empty() ? "" : " ") + "tree/" + tree_mask_name(tree_mask);
  return s;
}

std::string BenchConfig::q_counts_description() const {
  if (!ragged()) return std::to_string(q_len) + " per request";
  if (q_counts.size() == 1) return std::to_string(q_counts[0]) + " per request (ragged)";
  // How many requests take each count of the pattern.
  const std::vector<int> counts = request_counts(*this);
  std::string s = join_counts(q_counts) + " interleaved:";
  for (size_t k = 0; k < q_counts.size(); ++k) {
    if (std::find(q_counts.begin(), q_counts.begin() + k, q_counts[k]) != q_counts.begin() + k) continue;
    s += std::string(k ? "," : "") + " " + std::to_string(std::count(counts.begin(), counts.end(), q_counts[k])) +
         " x " + std::to_string(q_counts[k]);
  }
  return s;
}

QueryInputs query_inputs(const BenchConfig& c) {
  if (c.ragged()) {
    if (c.q_counts.empty()) detail::fail_arg("config q_counts", "at least one count with ragged queries", "none");
    for (int n : c.q_counts)
      if (n < 1 || n > c.q_len)
        detail::fail_arg("config q_counts", "counts in [1, q_len = " + std::to_string(c.q_len) + "]", n);
    if (*std::max_element(c.q_counts.begin(), c.q_counts.end()) != c.q_len)
      detail::fail_arg("config q_len", "the largest of q_counts " + join_counts(c.q_counts), c.q_len);
  } else if (!c.q_counts.empty()) {
    detail::fail_arg("config q_counts", "none with uniform queries", join_counts(c.q_counts));
  }
  QueryInputs in;
  in.counts = request_counts(c);
  if (c.ragged()) {
    in.q_indptr.assign(1, 0);
    for (int n : in.counts) in.q_indptr.push_back(in.q_indptr.back() + n);
  }
  for (int n : in.counts) in.total_q += n;
  if (c.tree_mask == TreeMask::kNone) {
    if (!c.tree_parents.empty())
      detail::fail_arg("config tree_parents", "none without a tree mask", join_counts(c.tree_parents));
    return in;
  }
  if (static_cast<int>(c.tree_parents.size()) != c.q_len)
    detail::fail_arg("config tree_parents", "one parent per query token (q_len = " + std::to_string(c.q_len) + ")",
                     c.tree_parents.size());
  if ((c.tree_mask == TreeMask::kPerRequest && c.ragged()) || (c.tree_mask == TreeMask::kPacked && !c.ragged()))
    detail::fail_arg("config tree_mask",
                     c.ragged() ? "shared or packed with ragged queries" : "shared or per_request with uniform queries",
                     tree_mask_name(c.tree_mask));
  const std::vector<int32_t> parents(c.tree_parents.begin(), c.tree_parents.end());
  std::vector<int64_t> rows(parents.size());
  tree_mask_from_parents(parents.data(), c.q_len, rows.data());
  switch (c.tree_mask) {
    case TreeMask::kShared: in.mask = rows; break;
    case TreeMask::kPerRequest:
      for (int r = 0; r < c.batch_size; ++r) in.mask.insert(in.mask.end(), rows.begin(), rows.end());
      break;
    case TreeMask::kPacked:
      for (int n : in.counts) in.mask.insert(in.mask.end(), rows.begin(), rows.begin() + n);
      break;
    case TreeMask::kNone: break;
  }
  return in;
}

const char* grid_names() { return "quick|deepseek|varlen|fp8|spec|sparse|all"; }

std::vector<BenchConfig> grid_configs(const std::string& name) {
  if (name == "quick") return quick_configs();
  if (name == "deepseek") return deepseek_configs();
  if (name == "varlen") return varlen_configs();
  if (name == "fp8") return fp8_configs();
  if (name == "spec") return spec_configs();
  if (name == "sparse") return sparse_configs();
  if (name == "all") {
    std::vector<BenchConfig> out = deepseek_configs();
    for (const auto& extra : {quick_configs(), fp8_configs()})
      for (const BenchConfig& c : extra)
        if (std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
    return out;
  }
  detail::fail_arg("--grid", std::string("one of ") + grid_names(), "'" + name + "'");
}

std::vector<RatioDef> grid_ratios(const std::string& name, const std::vector<BenchConfig>& selected) {
  std::vector<RatioDef> out;
  if (name != "spec" && name != "sparse") return out;
  auto present = [&](const std::vector<BenchConfig>& configs) {
    for (const BenchConfig& c : configs)
      if (std::find(selected.begin(), selected.end(), c) == selected.end()) return false;
    return true;
  };
  for (RatioDef& d : name == "spec" ? spec_ratios() : sparse_ratios())
    if (present(d.numerator) && present(d.denominator)) out.push_back(std::move(d));
  return out;
}

bool ConfigFilter::matches(const BenchConfig& c) const {
  return contains_or_empty(batch_size, c.batch_size) && contains_or_empty(q_len, c.q_len) &&
         contains_or_empty(num_heads, c.num_heads) && contains_or_empty(seqlen, c.seqlen) &&
         (varlen < 0 || varlen == (c.varlen ? 1 : 0));
}

ConfigFilter parse_filter(const std::string& spec) {
  ConfigFilter f;
  std::stringstream ss(spec);
  std::string term;
  while (std::getline(ss, term, ',')) {
    if (term.empty()) continue;
    const size_t eq = term.find('=');
    if (eq == std::string::npos) {
      detail::fail_arg("--filter", "KEY=VALUES terms (b, s_q, h_q, s_k, varlen)", "'" + term + "'");
    }
    const std::string key = term.substr(0, eq), values = term.substr(eq + 1), name = "--filter " + key;
    if (key == "b") {
      f.batch_size = parse_int_list(name, values);
    } else if (key == "s_q") {
      f.q_len = parse_int_list(name, values);
    } else if (key == "h_q") {
      f.num_heads = parse_int_list(name, values);
    } else if (key == "s_k") {
      f.seqlen = parse_int_list(name, values);
    } else if (key == "varlen") {
      const std::vector<int> v = parse_int_list(name, values);
      if (v.size() != 1 || (v[0] != 0 && v[0] != 1)) {
        detail::fail_arg(name.c_str(), "0 or 1", "'" + values + "'");
      }
      f.varlen = v[0];
    } else {
      detail::fail_arg("--filter", "a key among b, s_q, h_q, s_k, varlen", "'" + key + "'");
    }
  }
  return f;
}

BenchConfig parse_shape(const std::string& spec) {
  std::vector<std::string> items;
  std::stringstream ss(spec);
  std::string item;
  while (std::getline(ss, item, ',')) items.push_back(item);
  const bool varlen = items.size() == 5 && items[4] == "varlen";
  if (items.size() != 4 && !varlen) {
    detail::fail_arg("--shape", "b,s_q,h_q,s_k or b,s_q,h_q,s_k,varlen", "'" + spec + "'");
  }
  int v[4];
  for (int i = 0; i < 4; ++i) {
    const std::vector<int> one = parse_int_list("--shape", items[i]);
    if (one.size() != 1) detail::fail_arg("--shape", "one integer per field", "'" + spec + "'");
    v[i] = one[0];
  }
  BenchConfig c{v[0], v[1], v[2], v[3], varlen};
  if (c.batch_size < 1) detail::fail_arg("--shape b", ">= 1", c.batch_size);
  if (c.q_len < 1 || c.q_len > 16) detail::fail_arg("--shape s_q", "1..16", c.q_len);
  if (c.num_heads < 8 || c.num_heads > 128) detail::fail_arg("--shape h_q", "8..128", c.num_heads);
  if (c.seqlen < c.q_len) detail::fail_arg("--shape s_k", ">= s_q", c.seqlen);
  return c;
}

std::vector<int> config_seqlens(const BenchConfig& c, uint64_t seed) {
  std::vector<int> lens(static_cast<size_t>(c.batch_size), c.seqlen);
  if (!c.varlen) return lens;
  // One stream per config so that adding configs to a grid leaves the others' batches unchanged.
  std::mt19937_64 rng(seed ^ (static_cast<uint64_t>(c.batch_size) << 48) ^
                      (static_cast<uint64_t>(c.q_len) << 40) ^
                      (static_cast<uint64_t>(c.num_heads) << 32) ^ static_cast<uint64_t>(c.seqlen));
  std::normal_distribution<double> normal(c.seqlen, c.seqlen / 2.0);
  for (int& len : lens) len = std::max(c.q_len, static_cast<int>(std::lround(normal(rng))));
  return lens;
}

WorkCount count_work(const BenchConfig& c, const std::vector<int>& seqlens, KVFormat format) {
  WorkCount w;
  const QueryInputs q = query_inputs(c);
  if (c.sparse()) {
    // What the step must move: each query token's selected tokens and their int32 indices, its q and its out.
    for (int len : seqlens) w.total_seqlen += len;
    const double tokens = static_cast<double>(q.total_q);
    w.bytes = tokens * (static_cast<double>(c.topk) * (kv_bytes_per_token(format) + sizeof(int32_t)) +
                        static_cast<double>(c.num_heads) * (kHeadDimQK + kHeadDimV) * 2.0);
    w.flops = 2.0 * c.num_heads * tokens * c.topk * (kHeadDimQK + kHeadDimV);
    return w;
  }
  // Keys the query tokens of a request see, summed over its tokens: n * s_k, unless counted as they see them.
  // Tree rows are the same for every request here (query_inputs repeats one tree).
  std::vector<int64_t> tree_rows;
  if (c.tree_mask != TreeMask::kNone) tree_rows.assign(q.mask.begin(), q.mask.begin() + c.q_len);
  double token_keys = 0.0;
  for (int r = 0; r < c.batch_size; ++r) {
    const int64_t len = seqlens[r], n = q.counts[r];
    w.total_seqlen += len;
    if (!c.visible_key_flops) {
      token_keys += static_cast<double>(n * len);
    } else if (!tree_rows.empty()) {
      // The prefix, and the draft tokens of the request (bits below n) the row names.
      const uint64_t drafts = n >= 64 ? ~uint64_t{0} : (uint64_t{1} << n) - 1;
      for (int64_t i = 0; i < n; ++i) {
        const size_t seen = std::bitset<64>(static_cast<uint64_t>(tree_rows[i]) & drafts).count();
        token_keys += static_cast<double>(len - n + static_cast<int64_t>(seen));
      }
    } else if (c.causal()) {
      token_keys += static_cast<double>(n * len - n * (n - 1) / 2);  // token i sees len - n + i + 1
    } else {
      token_keys += static_cast<double>(n * len);
    }
  }
  const double qo_bytes = static_cast<double>(q.total_q) * c.num_heads * (kHeadDimQK + kHeadDimV) * 2.0;
  w.bytes = static_cast<double>(w.total_seqlen) * kv_bytes_per_token(format) + qo_bytes;
  w.flops = 2.0 * c.num_heads * token_keys * (kHeadDimQK + kHeadDimV);
  return w;
}

}  // namespace openmla::bench
