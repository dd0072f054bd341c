// openmla-bench: times OpenMLA decode over named grids of configurations (docs/benchmarking.md).
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <deque>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <cuda_runtime_api.h>

#include "anchors.h"
#include "bench_config.h"
#include "capacity.h"
#include "core/check.h"
#include "cpu_fallback.h"
#include "gpu_bench.h"
#include "openmla/error.h"
#include "openmla/version.h"
#include "peers/flashmla.h"
#include "report.h"

#include "openmla_commit.h"  // OPENMLA_GIT_COMMIT, written at build time (cmake/write_commit.cmake)

namespace openmla::bench {
namespace {

constexpr int kValidCheckHeads[] = {8, 16, 32, 64, 128};
constexpr int kMinReplays = 5;

const char* kUsage =
    "usage: openmla-bench [options]\n"
    "  --grid quick|deepseek|varlen|fp8|spec|sparse|all   configurations to time (default quick); spec:\n"
    "                      speculative decoding (tree verify vs chain, mixed 1/8-token batches vs halves and\n"
    "                      padding, 64-token verify vs the compute-bound shapes), reported with its ratios;\n"
    "                      sparse: top-k decode (SparseDecodePlan), topk 2048 of s_k 32K and 128K, b 1..128,\n"
    "                      h_q/s_q 64/1, 128/1, 64/2 and 16/1, fp8_ds_mla unless --format says otherwise, with\n"
    "                      its ratios (vs FlashMLA's sparse decode, bandwidth vs the device copy); all: every\n"
    "                      grid but spec and sparse\n"
    "  --format LIST       bf16, fp16, fp8_e4m3, fp8_ds_mla or all, comma-separated (default bf16; fp8_ds_mla\n"
    "                      for --grid sparse)\n"
    "  --backend B         auto|portable|sm90 (default auto: the kernel the plan resolves to, per config)\n"
    "  --filter SPEC       keep matching configs: b=64/128,s_q=1,h_q=16,s_k=4096,varlen=0\n"
    "  --shape B,SQ,HQ,SK[,varlen]  time this shape instead of a grid (repeatable; --grid is then ignored)\n"
    "  --json FILE         results file (default bench-results.json)\n"
    "  --anchors FILE      FlashMLA times measured elsewhere, CSV (kernel,b,s_q,h_q,s_k,varlen,time_us,...): the\n"
    "                      anchor_us and speedup columns (default: none)\n"
    "  --peer P            none|flashmla: also time FlashMLA's decode on the same inputs, its replays\n"
    "                      interleaved with OpenMLA's (dense: bf16/fp16 formats; sparse: fp8_ds_mla, h_q 64\n"
    "                      or 128, fewer heads padded to 64; sm_90 GPU; a build with\n"
    "                      -DOPENMLA_BENCH_FLASHMLA_DIR). Default none\n"
    "  --check-samples N   requests of the first input set checked against the CPU reference (default 2, 0 = off)\n"
    "  --check-heads N     heads of each sampled request checked: 8|16|32|64|128 (default 16)\n"
    "  --replays N         timed graph replays per config, >= 5 (default 10)\n"
    "  --sustain-ms MS     replay each config back to back for MS ms first and time the replays back to back:\n"
    "                      the GPU at its power cap, as in serving (default 0: each replay on its own)\n"
    "  --min-set-mib N     KV bytes one pass over the input sets must touch, MiB (default 384)\n"
    "  --mem-budget-gb X   device memory the input sets may use (default 80% of free memory)\n"
    "  --allocation A      arena|per-config: the budget allocated once at start and every buffer taken from it\n"
    "                      (default), or cudaMalloc / cudaFree per buffer of each config\n"
    "  --num-parts N       split-KV parts (DecodeOptions::num_parts; default 0 = automatic)\n"
    "  --fp8-math M        off|qk_and_pv: DecodeOptions::fp8_math for the fp8_e4m3 configs (default off)\n"
    "  --fp8-query T       bf16|fp16: the query type of the fp8 configs (default bf16)\n"
    "  --sm90-rows-per-cta N  0|16|32|64: testing::DecodeOverrides::sm90_rows_per_cta, the sm90 kernel (default 0 = automatic)\n"
    "  --device N          CUDA device (default 0)\n"
    "  --seed N            seed of the varlen draws, inputs and block tables (default 2026)\n"
    "  --list              print the selected configurations and exit\n"
    "  --capacity GB       print how many tokens fit GB (10^9 bytes) of KV cache per format, and exit\n"
    "  --layers N          layers for --capacity (default 61, DeepSeek-V3)\n"
    "  --help\n"
    "Without a CUDA GPU it runs the CPU reference on a small case instead.\n";

struct Options {
  std::string grid = "quick";
  std::vector<BenchConfig> shapes;  // --shape: replaces the grid
  std::vector<KVFormat> formats = {KVFormat::kBF16};
  std::string formats_text = "bf16";
  bool formats_given = false;  // --format: else the grid's default (fp8_ds_mla for sparse, bf16 otherwise)
  Backend backend = Backend::kAuto;
  std::string backend_text = "auto";
  ConfigFilter filter;
  std::string json = "bench-results.json";
  std::string anchors;
  Peer peer = Peer::kNone;
  int check_samples = 2;
  int check_heads = 16;
  int replays = 10;
  double sustain_ms = 0;
  bool arena = true;
  double min_set_mib = 384;
  double mem_budget_gb = 0;
  int num_parts = 0;
  Fp8Math fp8_math = Fp8Math::kOff;
  DType fp8_query = DType::kBFloat16;
  int sm90_rows_per_cta = 0;
  int device = 0;
  uint64_t seed = 2026;
  bool list = false;
  double capacity_gb = -1;
  int layers = 61;
};

int parse_int(const char* name, const std::string& v) {
  size_t used = 0;
  int x = 0;
  try {
    x = std::stoi(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (v.empty() || used != v.size()) detail::fail_arg(name, "an integer", "'" + v + "'");
  return x;
}

double parse_double(const char* name, const std::string& v) {
  size_t used = 0;
  double x = 0;
  try {
    x = std::stod(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (v.empty() || used != v.size() || !std::isfinite(x)) detail::fail_arg(name, "a number", "'" + v + "'");
  return x;
}

std::vector<KVFormat> parse_formats(const std::string& text) {
  if (text == "all") return {KVFormat::kBF16, KVFormat::kFP16, KVFormat::kFP8E4M3, KVFormat::kFP8DsMla};
  std::vector<KVFormat> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    KVFormat f;
    if (!parse_kv_format(item.c_str(), &f)) {
      detail::fail_arg("--format", "bf16, fp16, fp8_e4m3, fp8_ds_mla or all", "'" + item + "'");
    }
    out.push_back(f);
  }
  if (out.empty()) detail::fail_arg("--format", "at least one format", "''");
  return out;
}

// The value of option `name` spelled v, one of `choices`; anything else is an error that lists them
// ("a, b or c").
template <typename T, size_t N>
T parse_choice(const char* name, const std::string& v, const std::pair<const char*, T> (&choices)[N]) {
  std::string expected;
  for (size_t k = 0; k < N; ++k) {
    if (v == choices[k].first) return choices[k].second;
    expected += std::string(k == 0 ? "" : k + 1 == N ? " or " : ", ") + choices[k].first;
  }
  detail::fail_arg(name, expected, "'" + v + "'");
}

Options parse_options(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i], value;
    const size_t eq = arg.find('=');
    const bool has_inline = arg.rfind("--", 0) == 0 && eq != std::string::npos;
    if (has_inline) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
    }
    auto next = [&]() -> std::string {
      if (has_inline) return value;
      if (i + 1 >= argc) detail::fail_arg(arg.c_str(), "a value", "nothing");
      return argv[++i];
    };
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else if (arg == "--grid") {
      o.grid = next();
      grid_configs(o.grid);  // validates the name
    } else if (arg == "--format") {
      o.formats_text = next();
      o.formats = parse_formats(o.formats_text);
      o.formats_given = true;
    } else if (arg == "--backend") {
      o.backend_text = next();
      o.backend = parse_choice<Backend>(
          "--backend", o.backend_text,
          {{"auto", Backend::kAuto}, {"portable", Backend::kPortable}, {"sm90", Backend::kSm90}});
    } else if (arg == "--filter") {
      o.filter = parse_filter(next());
    } else if (arg == "--shape") {
      o.shapes.push_back(parse_shape(next()));
    } else if (arg == "--json") {
      o.json = next();
    } else if (arg == "--anchors") {
      o.anchors = next();
    } else if (arg == "--peer") {
      o.peer = parse_choice<Peer>("--peer", next(), {{"none", Peer::kNone}, {"flashmla", Peer::kFlashMLA}});
    } else if (arg == "--check-samples") {
      o.check_samples = parse_int("--check-samples", next());
      if (o.check_samples < 0) detail::fail_arg("--check-samples", ">= 0", o.check_samples);
    } else if (arg == "--check-heads") {
      o.check_heads = parse_int("--check-heads", next());
      bool valid = false;
      for (int h : kValidCheckHeads) valid = valid || h == o.check_heads;
      if (!valid) detail::fail_arg("--check-heads", "one of 8, 16, 32, 64, 128", o.check_heads);
    } else if (arg == "--replays") {
      o.replays = parse_int("--replays", next());
      if (o.replays < kMinReplays) detail::fail_arg("--replays", ">= 5 (the method's median)", o.replays);
    } else if (arg == "--allocation") {
      const std::string v = next();
      if (v != "arena" && v != "per-config") detail::fail_arg("--allocation", "arena or per-config", "'" + v + "'");
      o.arena = v == "arena";
    } else if (arg == "--sustain-ms") {
      o.sustain_ms = parse_double("--sustain-ms", next());
      if (!(o.sustain_ms >= 0 && o.sustain_ms <= 60000))
        detail::fail_arg("--sustain-ms", "a duration in [0, 60000] ms", o.sustain_ms);
    } else if (arg == "--min-set-mib") {
      o.min_set_mib = parse_double("--min-set-mib", next());
      if (o.min_set_mib <= 0) detail::fail_arg("--min-set-mib", "> 0", o.min_set_mib);
    } else if (arg == "--mem-budget-gb") {
      o.mem_budget_gb = parse_double("--mem-budget-gb", next());
      if (o.mem_budget_gb <= 0) detail::fail_arg("--mem-budget-gb", "> 0", o.mem_budget_gb);
    } else if (arg == "--num-parts") {
      o.num_parts = parse_int("--num-parts", next());
    } else if (arg == "--fp8-math") {
      o.fp8_math = parse_choice<Fp8Math>("--fp8-math", next(),
                                         {{"off", Fp8Math::kOff}, {"qk_and_pv", Fp8Math::kQkAndPv}});
    } else if (arg == "--fp8-query") {
      o.fp8_query = parse_choice<DType>("--fp8-query", next(), {{"bf16", DType::kBFloat16}, {"fp16", DType::kFloat16}});
    } else if (arg == "--sm90-rows-per-cta") {
      o.sm90_rows_per_cta = parse_int("--sm90-rows-per-cta", next());
      if (o.sm90_rows_per_cta != 0 && o.sm90_rows_per_cta != 16 && o.sm90_rows_per_cta != 32 &&
          o.sm90_rows_per_cta != 64)
        detail::fail_arg("--sm90-rows-per-cta", "0, 16, 32 or 64", o.sm90_rows_per_cta);
    } else if (arg == "--device") {
      o.device = parse_int("--device", next());
    } else if (arg == "--seed") {
      o.seed = static_cast<uint64_t>(parse_int("--seed", next()));
    } else if (arg == "--list") {
      o.list = true;
    } else if (arg == "--capacity") {
      o.capacity_gb = parse_double("--capacity", next());
    } else if (arg == "--layers") {
      o.layers = parse_int("--layers", next());
    } else {
      detail::fail_arg("argument", "an option listed by --help", "'" + arg + "'");
    }
  }
  // The sparse grid is stated on DeepSeek-V3.2's cache, the layout FlashMLA's sparse decode reads.
  if (!o.formats_given && o.shapes.empty() && o.grid == "sparse") {
    o.formats = {KVFormat::kFP8DsMla};
    o.formats_text = "fp8_ds_mla";
  }
  return o;
}

// --peer flashmla: refused, naming the option, when this binary lacks FlashMLA or a selected configuration is not
// one its dense or sparse decode runs (the device is checked when the GPU is opened).
void check_peer(const Options& o, const std::vector<BenchConfig>& configs) {
  if (o.peer != Peer::kFlashMLA) return;
  if (!flashmla::built()) {
    detail::fail(Status::kInvalidArgument,
                 "--peer flashmla: this openmla-bench was built without FlashMLA; configure with "
                 "-DOPENMLA_BENCH_FLASHMLA_DIR=<FlashMLA checkout> (bench/peers/get_flashmla.sh fetches one)");
  }
  for (KVFormat f : o.formats) {
    for (const BenchConfig& c : configs) {
      if (c.speculative_form()) continue;  // timed without the peer (its row says so)
      std::string why;
      if (c.sparse()) {
        why = flashmla::sparse_shape_unsupported(
            {c.batch_size, c.q_len, flashmla::sparse_heads_for(c.num_heads), c.topk, f});
        if (why.empty() && o.fp8_query != DType::kBFloat16) why = "FlashMLA's sparse decode takes a bf16 query";
      } else {
        why = flashmla::shape_unsupported({c.batch_size, c.q_len, c.num_heads, f, c.causal()});
      }
      if (!why.empty()) {
        detail::fail(Status::kInvalidArgument, "--peer flashmla: ", why, " (", c.label(), " ", kv_format_name(f),
                     ")");
      }
    }
  }
}

std::string command_line(int argc, char** argv) {
  std::string s;
  for (int i = 0; i < argc; ++i) s += (i ? " " : "") + std::string(argv[i]);
  return s;
}

// OPENMLA_COMMIT when set, else the commit the binary was built from (generated/openmla_commit.h, written by
// every build): a binary carried to another machine, or run after its sources moved on, reports what it is.
std::string source_commit() {
  if (const char* env = std::getenv("OPENMLA_COMMIT"); env != nullptr && *env != '\0') return env;
  const std::string built = OPENMLA_GIT_COMMIT;
  return built.empty() ? "unknown" : built;
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

bool has_cuda_device() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) cudaGetLastError();  // clear it: nothing else will use the runtime
  return err == cudaSuccess && count > 0;
}

void apply_check(BenchResult& r, const CheckOutcome& c) {
  r.checked_requests = c.requests;
  r.checked_heads = c.heads;
  if (!c.error.empty()) {
    r.status = "error: reference check failed: " + c.error;
    return;
  }
  r.max_rel_err = c.max_rel_err;
  r.max_lse_err = c.max_lse_err;
  r.peer_max_rel_err = c.peer_max_rel_err;
  r.peer_max_lse_err = c.peer_max_lse_err;
}

int run(int argc, char** argv) {
  const Options o = parse_options(argc, argv);
  if (o.capacity_gb >= 0) {
    print_capacity(stdout, o.capacity_gb, o.layers);
    return 0;
  }

  const std::string grid_name = o.shapes.empty() ? o.grid : "shapes";  // --shape replaces the grid
  std::vector<BenchConfig> configs;
  for (const BenchConfig& c : o.shapes.empty() ? grid_configs(o.grid) : o.shapes) {
    if (o.filter.matches(c)) configs.push_back(c);
  }
  const size_t total = configs.size() * o.formats.size();
  const std::vector<RatioDef> ratio_defs = grid_ratios(grid_name, configs);
  check_peer(o, configs);
  if (o.list) {
    for (KVFormat f : o.formats)
      for (const BenchConfig& c : configs) std::printf("%s %s\n", c.label().c_str(), kv_format_name(f));
    std::printf("%zu configurations\n", total);
    for (const RatioDef& d : ratio_defs) {
      char target[32] = "";
      if (d.target_max >= 0) std::snprintf(target, sizeof(target), " (target <= %.2f)", d.target_max);
      std::printf("ratio %s%s: %s\n", d.name.c_str(), target, d.meaning.c_str());
    }
    return 0;
  }

  if (!has_cuda_device()) {
    std::printf("no CUDA GPU found: running the CPU reference on a small case instead\n");
    return run_cpu_reference_demo(stdout, o.seed, configs);
  }
  if (total == 0) {
    std::fprintf(stderr, "openmla-bench: the filter leaves no configuration of grid '%s'\n", grid_name.c_str());
    return 2;
  }

  RunInfo info;
  info.tool_version = kVersion;
  info.commit = source_commit();
  info.date = utc_now();
  info.command_line = command_line(argc, argv);
  info.grid = grid_name;
  info.formats = o.formats_text;
  info.backend_requested = o.backend_text;
  info.fp8_math = fp8_math_name(o.fp8_math);
  info.fp8_query = o.fp8_query == DType::kFloat16 ? "fp16" : "bf16";
  info.replays = o.replays;
  info.sustain_ms = o.sustain_ms;
  info.allocation = o.arena ? "arena" : "per-config";
  info.check_samples = o.check_samples;
  info.check_heads = o.check_heads;
  info.seed = o.seed;
  info.min_kv_bytes_per_pass = o.min_set_mib * (1 << 20);
  info.anchors_file = o.anchors;
  const Anchors anchors = o.anchors.empty() ? Anchors() : Anchors::load(o.anchors);
  info.peer = o.peer == Peer::kNone ? "" : peer_name(o.peer);

  GpuBenchOptions go;
  go.device = o.device;
  go.backend = o.backend;
  go.num_parts = o.num_parts;
  go.fp8_math = o.fp8_math;
  go.fp8_query = o.fp8_query;
  go.sm90_rows_per_cta = o.sm90_rows_per_cta;
  go.replays = o.replays;
  go.sustain_ms = o.sustain_ms;
  go.arena = o.arena;
  go.min_kv_bytes_per_pass = info.min_kv_bytes_per_pass;
  go.memory_budget_bytes = o.mem_budget_gb * 1e9;
  go.check_samples = o.check_samples;
  go.check_heads = o.check_heads;
  go.seed = o.seed;
  go.peer = o.peer;
  GpuBench bench(go);
  bench.describe_device(info);
  info.ceilings = bench.measure_ceilings();
  std::fprintf(stderr, "openmla-bench on %s: %zu configurations; device copy %.0f GB/s (read + write)\n",
               info.device_name.c_str(), total, info.ceilings.copy_gbps);

  // Checks run on the CPU while the GPU times the next configs; at most this many at once.
  const size_t max_pending = std::max(1u, std::thread::hardware_concurrency() / 2);
  std::vector<BenchResult> results;
  std::deque<std::pair<size_t, std::shared_future<CheckOutcome>>> pending;
  const bool tty = isatty(fileno(stderr));
  size_t index = 0;
  for (KVFormat format : o.formats) {
    for (const BenchConfig& config : configs) {
      ++index;
      BenchResult probe;
      probe.config = config;
      probe.format = format;
      if (tty) std::fprintf(stderr, "\r\033[K[%zu/%zu] %s ...", index, total, describe(probe).c_str());
      TimedConfig timed = bench.run(config, format);
      BenchResult& r = timed.result;
      if (const AnchorRow* a = anchors.find(r.anchor_kernel, config)) {
        r.anchor_us = a->time_us;
        if (r.status == "ok" && r.time_us > 0) r.speedup = r.anchor_us / r.time_us;
      }
      if (tty) std::fprintf(stderr, "\r\033[K");
      if (r.status == "ok") {
        char anchor[64] = "";
        if (r.speedup > 0) std::snprintf(anchor, sizeof(anchor), ", %.2fx %s", r.speedup, r.anchor_kernel.c_str());
        char peer[96] = "";
        if (r.peer_status == "ok") {
          std::snprintf(peer, sizeof(peer), "; %s %.1f us (%.2fx)", r.peer.c_str(), r.peer_time_us, r.peer_ratio);
        }
        std::fprintf(stderr, "[%zu/%zu] %s: %.1f us, %.0f GB/s, %.1f TFLOP/s (R=%d)%s%s\n", index, total,
                     describe(r).c_str(), r.time_us, r.gbps, r.tflops, r.input_sets, anchor, peer);
      } else {
        std::fprintf(stderr, "[%zu/%zu] %s: %s\n", index, total, describe(r).c_str(), r.status.c_str());
      }
      results.push_back(r);
      if (timed.check.valid()) pending.emplace_back(results.size() - 1, timed.check);
      while (pending.size() > max_pending) {
        apply_check(results[pending.front().first], pending.front().second.get());
        pending.pop_front();
      }
      if (!bench.sticky_error().empty()) break;
    }
    if (!bench.sticky_error().empty()) break;
  }
  if (!pending.empty()) std::fprintf(stderr, "waiting for %zu reference checks...\n", pending.size());
  for (auto& [i, check] : pending) apply_check(results[i], check.get());

  const std::vector<RatioResult> ratios = evaluate_ratios(ratio_defs, results, info.ceilings.copy_gbps);
  print_table(stdout, info, results, ratios);
  write_json(o.json, info, results, ratios);
  std::printf("results written to %s\n", o.json.c_str());
  if (!bench.sticky_error().empty()) {
    std::fprintf(stderr, "openmla-bench: stopped after a CUDA error that leaves the device unusable: %s\n",
                 bench.sticky_error().c_str());
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace openmla::bench

int main(int argc, char** argv) {
  try {
    return openmla::bench::run(argc, argv);
  } catch (const openmla::Error& e) {
    std::fprintf(stderr, "openmla-bench: %s\n", e.what());
    return 2;
  }
}
