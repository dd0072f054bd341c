// openmla-bench results: one record per (config, format), the terminal table and the JSON file.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "bench_config.h"
#include "openmla/kv_format.h"

namespace openmla::bench {

struct BenchResult {
  BenchConfig config;
  KVFormat format = KVFormat::kBF16;
  std::string backend;  // resolved backend ("portable", "sm90"), or the requested one on failure
  std::string status = "ok";  // "ok", "unsupported: ...", "error: ..."

  // Batch actually run.
  int64_t total_seqlen = 0;
  double mean_seqlen = 0.0;
  int max_seqlen = 0;

  // Method.
  int input_sets = 0;       // R
  double set_bytes = 0.0;   // device bytes of one input set (KV + q + out + lse + block table)
  double kv_bytes_per_pass = 0.0;  // KV bytes the R calls touch (>= the method's minimum)
  int replays = 0;

  // Per decode call (graph replay time / R): median and the spread of the replays.
  double time_us = 0.0, time_us_min = 0.0, time_us_max = 0.0;
  std::vector<double> replay_us;  // every replay's per-call time, in order (the spread's shape)
  double gbps = 0.0, tflops = 0.0;

  // Accuracy on the sampled subset (negative: not checked).
  double max_rel_err = -1.0;  // max |out - ref| / max |ref| per request, worst request
  double max_lse_err = -1.0;  // max |lse - ref| / max(1, |ref|)
  int checked_requests = 0, checked_heads = 0;
  unsigned device_errors = 0;

  // The peer (--peer): another library's decode on the same inputs, its replays interleaved with OpenMLA's.
  std::string peer;         // empty without a peer, else its name ("flashmla")
  std::string peer_status;  // "ok", "not run" (OpenMLA's side failed), "error: ..."
  int peer_num_sm_parts = 0;  // FlashMLA's split parts per query tile
  int peer_heads = 0;         // heads the peer ran: h_q, or more when it took the requests padded (sparse h_q 16)
  double peer_time_us = -1.0, peer_time_us_min = -1.0, peer_time_us_max = -1.0;  // per call, as time_us
  std::vector<double> peer_replay_us;
  double peer_max_rel_err = -1.0, peer_max_lse_err = -1.0;  // as max_rel_err / max_lse_err, same sample
  double peer_ratio = -1.0;  // peer_time_us / time_us (> 1: OpenMLA is faster)

  // Anchor (another kernel's time on the same shape, from --anchors FILE), when known.
  std::string anchor_kernel;
  double anchor_us = -1.0;
  double speedup = -1.0;  // anchor_us / time_us
};

struct Ceilings {
  double copy_gbps = -1.0;  // device-to-device cudaMemcpy, read + write bytes counted
  double copy_bytes = 0.0;
};

struct RunInfo {
  std::string tool_version, commit, date, command_line;
  std::string device_name;
  std::string driver;  // the display driver's version (NVML), else the CUDA driver API version
  int compute_major = 0, compute_minor = 0, num_sms = 0;
  double device_memory_gb = 0.0;
  std::string grid, formats, backend_requested, anchors_file;
  std::string peer;  // --peer: empty or the peer's name
  std::string fp8_math = "off";  // DecodeOptions::fp8_math of the fp8_e4m3 configs
  std::string fp8_query = "bf16";  // the query type of the FP8 configs
  double min_kv_bytes_per_pass = 0.0;
  int replays = 0, check_samples = 0, check_heads = 0;
  double sustain_ms = 0.0;  // --sustain-ms (0: each replay on its own)
  std::string allocation = "arena";  // --allocation
  uint64_t seed = 0;
  Ceilings ceilings;
};

// One RatioDef evaluated on the rows of one format.
struct RatioResult {
  RatioDef def;
  KVFormat format = KVFormat::kBF16;
  double value = -1.0;      // negative: not computed (see status)
  std::string status = "ok";  // "ok", or "missing: <row> (<its status>)" when a row it reads did not time
  // Whether value <= def.target_max: 1 yes, 0 no, -1 no target or no value.
  int meets_target() const { return def.target_max < 0 || value < 0 ? -1 : value <= def.target_max ? 1 : 0; }
};
// Every ratio of `defs` for every format present in `results`, in that order (format-major). copy_gbps: the device
// copy bandwidth of the run (RatioKind::kGbpsOverCopy; negative: not measured).
std::vector<RatioResult> evaluate_ratios(const std::vector<RatioDef>& defs, const std::vector<BenchResult>& results,
                                         double copy_gbps = -1.0);

// The progress line's config part: "b=64 s_q=2 h_q=64 s_k=4096 bf16".
std::string describe(const BenchResult& r);

void print_table(std::FILE* out, const RunInfo& info, const std::vector<BenchResult>& results,
                 const std::vector<RatioResult>& ratios);
// Throws Error(kInvalidArgument) when the file cannot be written.
void write_json(const std::string& path, const RunInfo& info, const std::vector<BenchResult>& results,
                const std::vector<RatioResult>& ratios);

}  // namespace openmla::bench
