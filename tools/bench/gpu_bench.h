// Timing decode configurations on a CUDA GPU by the method of docs/benchmarking.md: R disjoint
// input sets (>= 384 MiB of KV per pass), planning outside the timed region, the R decode calls
// captured in one CUDA graph, per-call time = replay time / R, median over the replays. The
// accuracy check against the CPU reference runs on a sampled subset in the background.
#pragma once

#include <cstdint>
#include <future>
#include <memory>
#include <string>

#include <cuda_runtime_api.h>

#include "bench_config.h"
#include "openmla/decode.h"
#include "report.h"

namespace openmla::bench {

// A library timed beside OpenMLA in the same process (--peer): same inputs, same method, its graph replays
// interleaved with OpenMLA's, its output checked against the same reference sample.
enum class Peer : uint8_t {
  kNone = 0,
  kFlashMLA = 1,  // FlashMLA's dense decode (bf16 / fp16 caches) or sparse decode (fp8_ds_mla), sm90; peers/flashmla.h
};
const char* peer_name(Peer p) noexcept;  // "none", "flashmla"

struct GpuBenchOptions {
  int device = 0;
  Backend backend = Backend::kAuto;
  int num_parts = 0;                          // DecodeOptions::num_parts (0 = automatic)
  Fp8Math fp8_math = Fp8Math::kOff;           // DecodeOptions::fp8_math, for fp8_e4m3 configs
  DType fp8_query = DType::kBFloat16;         // the query type of fp8_e4m3 and fp8_ds_mla configs
  int sm90_rows_per_cta = 0;                  // testing::DecodeOverrides::sm90_rows_per_cta (0 = automatic)
  int replays = 10;                           // timed graph replays per config (>= 5)
  double sustain_ms = 0.0;                    // > 0: back-to-back replays this long first (GpuBench::time_sustained)
  double min_kv_bytes_per_pass = 384.0 * (1 << 20);  // 6.4x the H200's 60 MiB L2
  double memory_budget_bytes = 0.0;           // 0: 80% of the free device memory at start
  // Every device buffer from one allocation of the budget made at start (as an engine's KV pool is), handed out
  // in order and taken back after each config; false: cudaMalloc / cudaFree per buffer (docs/benchmarking.md,
  // "Allocation").
  bool arena = true;
  int check_samples = 2;                      // requests of input set 0 checked (0: no check)
  int check_heads = 16;                       // first heads of each sampled request checked
  uint64_t seed = 2026;
  Peer peer = Peer::kNone;
};

// Outcome of the background accuracy check of one config.
struct CheckOutcome {
  double max_rel_err = -1.0;
  double max_lse_err = -1.0;
  int requests = 0;
  int heads = 0;
  double peer_max_rel_err = -1.0;  // the same measures of the peer's output, against the same reference
  double peer_max_lse_err = -1.0;
  std::string error;  // non-empty when the check itself failed
};

struct TimedConfig {
  BenchResult result;
  std::shared_future<CheckOutcome> check;  // invalid when no check was started
};

struct DeviceArena;  // gpu_bench.cpp

class GpuBench {
 public:
  explicit GpuBench(const GpuBenchOptions& options);
  ~GpuBench();
  GpuBench(const GpuBench&) = delete;
  GpuBench& operator=(const GpuBench&) = delete;

  // Device facts for the report.
  void describe_device(RunInfo& info) const;
  // Device-to-device copy bandwidth (read + write counted), median of several copies.
  Ceilings measure_ceilings();
  // Times one config (dense decode, or sparse top-k decode when config.sparse()); failures (unsupported
  // format/backend, memory) come back in result.status.
  TimedConfig run(const BenchConfig& config, KVFormat format);
  // A CUDA error that poisons the context (e.g. an illegal address) makes later configs
  // meaningless; the caller stops when this returns non-empty.
  std::string sticky_error() const { return sticky_error_; }

 private:
  struct Scratch;
  TimedConfig run_sparse(const BenchConfig& config, KVFormat format);
  // num_pages pages of 64 tokens from N(0, 1) written into `kv` by write_kv in `format` (every format the same
  // distribution); fill_seed advances once per chunk.
  void fill_cache(uint8_t* kv, int64_t num_pages, KVFormat format, uint64_t& fill_seed);
  // Replays R-call graphs as time_replays / time_sustained choose (the method's step 5), after the warm-up replays.
  std::vector<std::vector<double>> time_graphs(const std::vector<cudaGraphExec_t>& graphs, int sets);
  // Per-call µs of `count` rounds, per graph (R = sets calls each): a round replays every graph once, each replay
  // between its own two events, in reverse order every other round (with a peer: OpenMLA first, then the peer
  // first, so neither gains from its place); the host waits after each replay, or only after the last (back to
  // back: the GPU never idles).
  std::vector<std::vector<double>> time_replays(const std::vector<cudaGraphExec_t>& graphs, int sets, int count,
                                                bool back_to_back);
  // --sustain-ms: rounds back to back, untimed for sustain_ms, then the timed ones back to back.
  std::vector<std::vector<double>> time_sustained(const std::vector<cudaGraphExec_t>& graphs, int sets);
  // The arena while it is in use (options_.arena), else nullptr: where the config's buffers come from.
  DeviceArena* arena() const;
  GpuBenchOptions options_;
  cudaDeviceProp prop_{};
  cudaStream_t stream_ = nullptr;
  std::unique_ptr<Scratch> scratch_;
  std::string sticky_error_;
};

}  // namespace openmla::bench
