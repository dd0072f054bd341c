#include "bench_config.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <sstream>

#include "core/check.h"

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
  return os.str();
}

const char* grid_names() { return "quick|deepseek|varlen|fp8|all"; }

std::vector<BenchConfig> grid_configs(const std::string& name) {
  if (name == "quick") return quick_configs();
  if (name == "deepseek") return deepseek_configs();
  if (name == "varlen") return varlen_configs();
  if (name == "fp8") return fp8_configs();
  if (name == "all") {
    std::vector<BenchConfig> out = deepseek_configs();
    for (const auto& extra : {quick_configs(), fp8_configs()})
      for (const BenchConfig& c : extra)
        if (std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
    return out;
  }
  detail::fail_arg("--grid", std::string("one of ") + grid_names(), "'" + name + "'");
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
  for (int len : seqlens) w.total_seqlen += len;
  const double qo_bytes = static_cast<double>(c.batch_size) * c.q_len * c.num_heads *
                          (kHeadDimQK + kHeadDimV) * 2.0;
  w.bytes = static_cast<double>(w.total_seqlen) * kv_bytes_per_token(format) + qo_bytes;
  w.flops = 2.0 * c.q_len * c.num_heads * static_cast<double>(w.total_seqlen) *
            (kHeadDimQK + kHeadDimV);
  return w;
}

}  // namespace openmla::bench
