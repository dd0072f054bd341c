// The decode configurations openmla-bench measures (named grids, filters, varlen lengths) and how
// bytes and FLOPs are counted for them. Pure host code.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "openmla/kv_format.h"

namespace openmla::bench {

struct BenchConfig {
  int batch_size = 1;
  int q_len = 1;      // s_q
  int num_heads = 16; // h_q
  int seqlen = 0;     // s_k of every request, or the mean length when varlen
  bool varlen = false;  // lengths ~ N(seqlen, seqlen / 2), clipped to >= s_q

  bool causal() const { return q_len > 1; }  // the method: causal whenever s_q > 1
  // "b=64 s_q=2 h_q=64 s_k=4096" or "b=128 s_q=1 h_q=16 s_k~N(4096,2048)".
  std::string label() const;
  bool operator==(const BenchConfig& o) const {
    return batch_size == o.batch_size && q_len == o.q_len && num_heads == o.num_heads &&
           seqlen == o.seqlen && varlen == o.varlen;
  }
};

// Grid names: "quick" (a handful of the floor shapes, well under a minute on a GPU),
// "deepseek" (b x s_q x h_q x s_k plus the varlen batches), "varlen" (only those), "all".
// Throws openmla::Error(kInvalidArgument) for an unknown name.
std::vector<BenchConfig> grid_configs(const std::string& name);
const char* grid_names();  // "quick|deepseek|varlen|all"

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

// Per-request KV lengths: seqlen for every request, or the varlen draw (deterministic in the
// config and seed: the same batch for every format, backend and run).
std::vector<int> config_seqlens(const BenchConfig& c, uint64_t seed);

// The method's counting (docs/benchmarking.md):
//   bytes = sum(s_k) * bytes_per_token(format) + b * s_q * h_q * (576 + 512) * 2   (KV + q + out)
//   flops = 2 * s_q * h_q * sum(s_k) * (576 + 512)
struct WorkCount {
  int64_t total_seqlen = 0;
  double bytes = 0.0;
  double flops = 0.0;
};
WorkCount count_work(const BenchConfig& c, const std::vector<int>& seqlens, KVFormat format);

}  // namespace openmla::bench
