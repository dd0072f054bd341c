#include "gpu_bench.h"

#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "anchors.h"
#include "core/check.h"
#include "fill.h"
#include "openmla/error.h"
#include "openmla/fp8.h"
#include "openmla/reference.h"
#include "openmla/sparse_decode.h"
#include "openmla/testing.h"
#include "openmla/write_kv.h"
#include "peers/flashmla.h"

namespace openmla::bench {
namespace {

constexpr int kFillChunkPages = 1024;      // pages converted per write_kv call while filling
constexpr int kMaxInputSets = 4096;        // graph size bound for tiny configs
constexpr int32_t kUnusedTableEntry = 2147480000;  // out of range, as FlashMLA's tests use
constexpr int kWarmupReplays = 2;
constexpr double kCopyCeilingBytes = 1024.0 * (1 << 20);
constexpr int kCopyRepeats = 10;
constexpr size_t kArenaAlign = 4096;  // every buffer taken from the arena starts on this boundary
constexpr int kBuffersPerSet = 5;     // InputSet: q, kv, block_table, out, lse (and q_indptr, mask when used)
constexpr int kSharedBuffers = 2;     // per config: the lengths and the workspace

}  // namespace

// One device allocation made at start, handed out in order (GpuBenchOptions::arena). A config's buffers go back
// together when it ends (ArenaScope), so every config starts from the same addresses and no cudaMalloc / cudaFree
// runs between configs: with those, the memory-bound rows of a long grid ran 3-12% slower than alone
// (docs/benchmarking.md, "Allocation").
struct DeviceArena {
  uint8_t* base = nullptr;
  size_t size = 0, used = 0;

  explicit DeviceArena(size_t bytes) : size(bytes) {
    if (const cudaError_t e = cudaMalloc(reinterpret_cast<void**>(&base), size); e != cudaSuccess) {
      cudaGetLastError();  // not sticky: clear it
      size_t free_bytes = 0, total_bytes = 0;
      cudaMemGetInfo(&free_bytes, &total_bytes);
      detail::fail(Status::kUnsupported, "memory budget: ", size / 1e9, " GB could not be allocated as one arena (",
                   free_bytes / 1e9, " GB free; --mem-budget-gb sets it, --allocation per-config allocates per buffer)");
    }
  }
  ~DeviceArena() { cudaFree(base); }
  DeviceArena(const DeviceArena&) = delete;
  DeviceArena& operator=(const DeviceArena&) = delete;
  void* take(size_t bytes) {
    const size_t at = (used + kArenaAlign - 1) / kArenaAlign * kArenaAlign;
    if (at > size || bytes > size - at)
      detail::fail(Status::kUnsupported, "memory: ", bytes, " bytes asked of the arena, ", at > size ? 0 : size - at,
                   " left of ", size);
    used = at + bytes;
    return base + at;
  }
};

namespace {

// Owning device allocation: its own cudaMalloc, or a piece of an arena (given back by the ArenaScope).
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(size_t bytes, DeviceArena* arena) : bytes_(bytes), owned_(arena == nullptr) {
    if (bytes_ == 0) return;
    if (arena != nullptr) {
      data_ = arena->take(bytes_);
    } else {
      OPENMLA_CUDA_CHECK(cudaMalloc(&data_, bytes_));
    }
  }
  ~DeviceBuffer() {
    if (data_ != nullptr && owned_) cudaFree(data_);
  }
  DeviceBuffer(DeviceBuffer&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)), bytes_(std::exchange(o.bytes_, 0)), owned_(o.owned_) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(bytes_, o.bytes_);
    std::swap(owned_, o.owned_);
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* get() const { return data_; }
  uint8_t* bytes_ptr() const { return static_cast<uint8_t*>(data_); }
  size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
  bool owned_ = true;
};

// Hands out a config's buffers (from the arena, or each its own cudaMalloc without one) and gives back, when it
// ends, what the arena handed out since it began. Declared before the buffers it hands out, so it ends after them.
class ArenaScope {
 public:
  explicit ArenaScope(DeviceArena* arena) : arena_(arena), used_(arena != nullptr ? arena->used : 0) {}
  DeviceBuffer buffer(size_t bytes) const { return DeviceBuffer(bytes, arena_); }
  ~ArenaScope() {
    if (arena_ != nullptr) arena_->used = used_;
  }
  ArenaScope(const ArenaScope&) = delete;
  ArenaScope& operator=(const ArenaScope&) = delete;

 private:
  DeviceArena* arena_;
  size_t used_;
};

class Event {
 public:
  Event() { OPENMLA_CUDA_CHECK(cudaEventCreate(&event_)); }
  ~Event() { cudaEventDestroy(event_); }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

// Graph and its executable, destroyed together.
struct Graph {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  ~Graph() {
    if (exec != nullptr) cudaGraphExecDestroy(exec);
    if (graph != nullptr) cudaGraphDestroy(graph);
  }
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// 16-bit caches take a query of their own type; FP8 caches the one asked for (bf16 by default).
DType q_dtype_for(KVFormat f, DType fp8_query) {
  return f == KVFormat::kFP16 ? DType::kFloat16 : f == KVFormat::kBF16 ? DType::kBFloat16 : fp8_query;
}

// Cache tensor dtype and row width (elements) of a format.
DType cache_dtype_for(KVFormat f) {
  switch (f) {
    case KVFormat::kBF16: return DType::kBFloat16;
    case KVFormat::kFP16: return DType::kFloat16;
    case KVFormat::kFP8E4M3: return DType::kFloat8E4M3;
    case KVFormat::kFP8DsMla: return DType::kUInt8;
  }
  return DType::kUndefined;
}
int cache_row_elems(KVFormat f) { return f == KVFormat::kFP8DsMla ? kDsMlaBytesPerToken : kHeadDimQK; }

KVCache cache_view(void* data, int64_t num_pages, KVFormat format, DeviceType device, int device_id) {
  KVCache kv;
  kv.format = format;
  kv.scale = 1.0f;  // N(0, 1) values fit e4m3's range as they are
  kv.data = make_tensor(data, cache_dtype_for(format), {num_pages, kPageSize, cache_row_elems(format)},
                        device, device_id);
  return kv;
}

int blocks_of(int seqlen) { return (seqlen + kPageSize - 1) / kPageSize; }

// One input set's device tensors, and its block table on the host (the check reads it). q_indptr (ragged
// queries) and mask (a tree mask) stay empty when the configuration has none.
struct InputSet {
  DeviceBuffer q, kv, block_table, out, lse, q_indptr, mask;
  std::vector<int32_t> host_block_table;
};

// A view of q, out ([..., dim]) or lse (dim 0) in the shape's query layout: [b, s_q, h_q(, dim)] or
// [total_q, h_q(, dim)].
TensorView query_view(void* data, DType dtype, const DecodeShape& shape, int64_t total_q, int64_t dim,
                      DeviceType device, int device_id) {
  const int64_t h = shape.num_heads;
  if (shape.query_layout == QueryLayout::kRagged) {
    return dim > 0 ? make_tensor(data, dtype, {total_q, h, dim}, device, device_id)
                   : make_tensor(data, dtype, {total_q, h}, device, device_id);
  }
  const int64_t b = shape.batch_size, s_q = shape.q_len;
  return dim > 0 ? make_tensor(data, dtype, {b, s_q, h, dim}, device, device_id)
                 : make_tensor(data, dtype, {b, s_q, h}, device, device_id);
}

// The mask tensor of a tree-masked shape: [s_q], [b, s_q] or [total_q] int64 (TreeMask).
TensorView mask_view(void* data, const DecodeShape& shape, int64_t total_q, DeviceType device, int device_id) {
  switch (shape.tree_mask) {
    case TreeMask::kShared: return make_tensor(data, DType::kInt64, {shape.q_len}, device, device_id);
    case TreeMask::kPerRequest:
      return make_tensor(data, DType::kInt64, {shape.batch_size, shape.q_len}, device, device_id);
    case TreeMask::kPacked: return make_tensor(data, DType::kInt64, {total_q}, device, device_id);
    case TreeMask::kNone: break;
  }
  return TensorView();
}

// Everything the background check needs, copied to the host.
struct CheckJob {
  DecodeShape shape;  // reduced: the sampled requests and heads
  Fp8Math math = Fp8Math::kOff;  // the kernel's arithmetic (reference::decode)
  float softmax_scale = 0.f;
  int num_pages = 0, max_pages = 0;
  // Query tokens of the S sampled requests: request r's are rows token_begin[r] .. token_begin[r+1] - 1 of the
  // arrays below (uniform: r * s_q; ragged: the sample's q_indptr, as decode takes it).
  std::vector<int32_t> token_begin;
  std::vector<int64_t> mask;     // the sample's tree-mask rows, as the shape's TreeMask lays them out (or empty)
  std::vector<uint16_t> q;       // [T, heads, 576], T = token_begin[S]
  std::vector<uint8_t> cache;    // [num_pages, 64, row]
  std::vector<int32_t> block_table, seqlens;
  std::vector<uint16_t> gpu_out;  // [T, heads, 512]
  std::vector<float> gpu_lse;     // [T, heads]
  std::vector<uint16_t> peer_out;  // the peer's, the same rows (empty without a peer)
  std::vector<float> peer_lse;
};

float to_float(uint16_t bits, DType t) {
  return t == DType::kFloat16 ? fp8::fp16_to_float(bits) : fp8::bf16_to_float(bits);
}

// Worst request's max |out - ref| / max |ref|, and max |lse - ref| / max(1, |ref|), of one library's output.
std::pair<double, double> compare_with_reference(const CheckJob& job, const std::vector<float>& out,
                                                 const std::vector<float>& lse, const std::vector<uint16_t>& gpu_out,
                                                 const std::vector<float>& gpu_lse) {
  const int s = job.shape.batch_size;
  const size_t heads = static_cast<size_t>(job.shape.num_heads);
  double worst_out = 0.0, worst_lse = 0.0;
  for (int r = 0; r < s; ++r) {
    const size_t first_row = job.token_begin[r] * heads, end_row = job.token_begin[r + 1] * heads;
    double max_ref = 0.0, max_diff = 0.0;
    for (size_t i = first_row * kHeadDimV; i < end_row * kHeadDimV; ++i) {
      const double got = to_float(gpu_out[i], job.shape.q_dtype);
      const double diff = std::fabs(got - out[i]);
      max_ref = std::max(max_ref, std::fabs(static_cast<double>(out[i])));
      max_diff = std::isnan(diff) ? INFINITY : std::max(max_diff, diff);
    }
    worst_out = std::max(worst_out, max_ref > 0 ? max_diff / max_ref : max_diff);
    for (size_t i = first_row; i < end_row; ++i) {
      const double ref = lse[i], got = gpu_lse[i];
      if (std::isinf(ref) && got == ref) continue;  // empty rows: -inf on both sides
      const double err = std::fabs(got - ref) / std::max(1.0, std::fabs(ref));
      worst_lse = std::isnan(err) ? INFINITY : std::max(worst_lse, err);
    }
  }
  return {worst_out, worst_lse};
}

CheckOutcome run_check(const CheckJob& job) {
  CheckOutcome outcome;
  outcome.requests = job.shape.batch_size;
  outcome.heads = job.shape.num_heads;
  try {
    const DecodeShape& shape = job.shape;
    const int s = shape.batch_size, h = shape.num_heads;
    const int64_t tokens = job.token_begin[s];
    std::vector<uint16_t> q = job.q;
    std::vector<uint8_t> cache = job.cache;
    std::vector<int32_t> table = job.block_table, seqlens = job.seqlens, q_indptr = job.token_begin;
    std::vector<int64_t> mask = job.mask;
    std::vector<float> out(static_cast<size_t>(tokens) * h * kHeadDimV);
    std::vector<float> lse(static_cast<size_t>(tokens) * h);
    DecodeArgs args;
    args.q = query_view(q.data(), shape.q_dtype, shape, tokens, kHeadDimQK, DeviceType::kCPU, 0);
    args.kv = cache_view(cache.data(), job.num_pages, shape.kv_format, DeviceType::kCPU, 0);
    args.block_table = make_tensor(table.data(), DType::kInt32, {s, job.max_pages});
    args.cache_seqlens = make_tensor(seqlens.data(), DType::kInt32, {s});
    args.softmax_scale = job.softmax_scale;
    args.out = query_view(out.data(), DType::kFloat32, shape, tokens, kHeadDimV, DeviceType::kCPU, 0);
    args.lse = query_view(lse.data(), DType::kFloat32, shape, tokens, 0, DeviceType::kCPU, 0);
    if (shape.query_layout == QueryLayout::kRagged)
      args.q_indptr = make_tensor(q_indptr.data(), DType::kInt32, {s + 1});
    if (shape.tree_mask != TreeMask::kNone) args.mask = mask_view(mask.data(), shape, tokens, DeviceType::kCPU, 0);
    reference::decode(args, shape, job.math);

    std::tie(outcome.max_rel_err, outcome.max_lse_err) =
        compare_with_reference(job, out, lse, job.gpu_out, job.gpu_lse);
    if (!job.peer_out.empty()) {
      std::tie(outcome.peer_max_rel_err, outcome.peer_max_lse_err) =
          compare_with_reference(job, out, lse, job.peer_out, job.peer_lse);
    }
  } catch (const std::exception& e) {
    outcome.error = e.what();
  }
  return outcome;
}

template <typename T>
void download(std::vector<T>& dst, const void* src, size_t count, cudaStream_t stream) {
  dst.resize(count);
  OPENMLA_CUDA_CHECK(cudaMemcpyAsync(dst.data(), src, count * sizeof(T), cudaMemcpyDeviceToHost, stream));
}

// A sparse check: the sampled query tokens' q, their selected tokens gathered into a cache of one token per page
// (their indices renumbered into it), and the outputs. `base` carries the reduced shape and the outputs in the
// layout compare_with_reference reads.
struct SparseCheckJob {
  CheckJob base;
  SparseDecodeShape shape;      // reduced: the sampled requests and heads
  std::vector<uint8_t> cache;   // [rows, 1, W]
  int64_t cache_rows = 0;
  std::vector<int32_t> indices;  // [samples, s_q, topk], rows of `cache`
};

CheckOutcome run_sparse_check(const SparseCheckJob& job) {
  CheckOutcome outcome;
  outcome.requests = job.shape.batch_size;
  outcome.heads = job.shape.num_heads;
  try {
    const SparseDecodeShape& shape = job.shape;
    const int64_t s = shape.batch_size, s_q = shape.q_len, h = shape.num_heads, tokens = s * s_q;
    std::vector<uint16_t> q = job.base.q;
    std::vector<uint8_t> cache = job.cache;
    std::vector<int32_t> indices = job.indices;
    std::vector<float> out(static_cast<size_t>(tokens * h * kHeadDimV)), lse(static_cast<size_t>(tokens * h));
    SparseDecodeArgs args;
    args.q = make_tensor(q.data(), shape.q_dtype, {s, s_q, h, kHeadDimQK});
    args.kv.format = shape.kv_format;
    args.kv.scale = 1.0f;  // as cache_view
    args.kv.data = make_tensor(cache.data(), cache_dtype_for(shape.kv_format),
                               {job.cache_rows, 1, cache_row_elems(shape.kv_format)});
    args.indices = make_tensor(indices.data(), DType::kInt32, {s, s_q, static_cast<int64_t>(shape.topk)});
    args.softmax_scale = job.base.softmax_scale;
    args.out = make_tensor(out.data(), DType::kFloat32, {s, s_q, h, kHeadDimV});
    args.lse = make_tensor(lse.data(), DType::kFloat32, {s, s_q, h});
    reference::sparse_decode(args, shape, TensorView(), TensorView());
    std::tie(outcome.max_rel_err, outcome.max_lse_err) =
        compare_with_reference(job.base, out, lse, job.base.gpu_out, job.base.gpu_lse);
    if (!job.base.peer_out.empty()) {
      std::tie(outcome.peer_max_rel_err, outcome.peer_max_lse_err) =
          compare_with_reference(job.base, out, lse, job.base.peer_out, job.base.peer_lse);
    }
  } catch (const std::exception& e) {
    outcome.error = e.what();
  }
  return outcome;
}

// topk distinct positions of [0, s_k) in random order, as FlashMLA's tests draw them (the top-k of random keys):
// a partial Fisher-Yates shuffle of `pool` (the identity on entry and on return).
void draw_distinct(std::vector<int32_t>& pool, int topk, std::mt19937_64& rng, int32_t* out) {
  const int n = static_cast<int>(pool.size());
  std::vector<int> picked(static_cast<size_t>(topk));
  for (int k = 0; k < topk; ++k) {
    const int j = k + static_cast<int>(rng() % static_cast<uint64_t>(n - k));
    std::swap(pool[k], pool[j]);
    picked[k] = j;
    out[k] = pool[k];
  }
  for (int k = topk - 1; k >= 0; --k) std::swap(pool[k], pool[picked[k]]);
}

}  // namespace

// Reused across configs: the source tokens write_kv converts into each set's cache, and the arena.
struct GpuBench::Scratch {
  DeviceBuffer source;  // [kFillChunkPages * 64, 576] bf16
  DeviceBuffer slots;   // [kFillChunkPages * 64] int32: 0, 1, 2, ...
  std::unique_ptr<DeviceArena> arena;
};

DeviceArena* GpuBench::arena() const { return scratch_->arena.get(); }

const char* peer_name(Peer p) noexcept { return p == Peer::kFlashMLA ? "flashmla" : "none"; }

GpuBench::GpuBench(const GpuBenchOptions& options) : options_(options), scratch_(std::make_unique<Scratch>()) {
  OPENMLA_CUDA_CHECK(cudaSetDevice(options_.device));
  OPENMLA_CUDA_CHECK(cudaGetDeviceProperties(&prop_, options_.device));
  OPENMLA_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  if (options_.peer == Peer::kFlashMLA) {
    const std::string why = flashmla::device_unsupported(prop_.major, prop_.minor, prop_.multiProcessorCount);
    if (!why.empty()) detail::fail(Status::kInvalidArgument, "--peer flashmla: ", why);
  }
  if (options_.memory_budget_bytes <= 0) {
    size_t free_bytes = 0, total_bytes = 0;
    OPENMLA_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    options_.memory_budget_bytes = 0.8 * static_cast<double>(free_bytes);
  }
  constexpr int64_t kChunkTokens = int64_t{kFillChunkPages} * kPageSize;
  scratch_->source = DeviceBuffer(kChunkTokens * kHeadDimQK * sizeof(uint16_t), nullptr);
  std::vector<int32_t> iota(kChunkTokens);
  std::iota(iota.begin(), iota.end(), 0);
  scratch_->slots = DeviceBuffer(iota.size() * sizeof(int32_t), nullptr);
  OPENMLA_CUDA_CHECK(cudaMemcpy(scratch_->slots.get(), iota.data(), scratch_->slots.bytes(), cudaMemcpyHostToDevice));
  options_.memory_budget_bytes -= static_cast<double>(scratch_->source.bytes() + scratch_->slots.bytes());
  if (options_.arena) scratch_->arena = std::make_unique<DeviceArena>(static_cast<size_t>(options_.memory_budget_bytes));
}

GpuBench::~GpuBench() {
  scratch_.reset();
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

// The display driver's version ("580.159.04") from NVML, opened at run time so that the tool links no NVML; without
// it, the CUDA driver API version the driver reports ("CUDA 13.0").
static std::string driver_version() {
  if (void* nvml = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL)) {
    using InitFn = int (*)();
    using VersionFn = int (*)(char*, unsigned);
    auto init = reinterpret_cast<InitFn>(dlsym(nvml, "nvmlInit_v2"));
    auto version = reinterpret_cast<VersionFn>(dlsym(nvml, "nvmlSystemGetDriverVersion"));
    auto shutdown = reinterpret_cast<InitFn>(dlsym(nvml, "nvmlShutdown"));
    char text[96] = {};
    const bool ok = init != nullptr && version != nullptr && init() == 0 && version(text, sizeof(text)) == 0;
    if (init != nullptr && shutdown != nullptr && ok) shutdown();
    dlclose(nvml);
    if (ok && text[0] != '\0') return text;
  }
  int v = 0;
  if (cudaDriverGetVersion(&v) != cudaSuccess) return "unknown";
  return "CUDA " + std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
}

void GpuBench::describe_device(RunInfo& info) const {
  info.device_name = prop_.name;
  info.driver = driver_version();
  info.compute_major = prop_.major;
  info.compute_minor = prop_.minor;
  info.num_sms = prop_.multiProcessorCount;
  info.device_memory_gb = static_cast<double>(prop_.totalGlobalMem) / 1e9;
}

Ceilings GpuBench::measure_ceilings() {
  Ceilings c;
  const size_t bytes = static_cast<size_t>(kCopyCeilingBytes);
  if (2.0 * bytes > options_.memory_budget_bytes) return c;
  const ArenaScope scope(arena());
  DeviceBuffer src = scope.buffer(bytes), dst = scope.buffer(bytes);
  OPENMLA_CUDA_CHECK(cudaMemsetAsync(src.get(), 1, bytes, stream_));
  Event start, stop;
  std::vector<double> ms;
  for (int i = 0; i < kCopyRepeats + 1; ++i) {
    OPENMLA_CUDA_CHECK(cudaEventRecord(start.get(), stream_));
    OPENMLA_CUDA_CHECK(cudaMemcpyAsync(dst.get(), src.get(), bytes, cudaMemcpyDeviceToDevice, stream_));
    OPENMLA_CUDA_CHECK(cudaEventRecord(stop.get(), stream_));
    OPENMLA_CUDA_CHECK(cudaEventSynchronize(stop.get()));
    float elapsed = 0.f;
    OPENMLA_CUDA_CHECK(cudaEventElapsedTime(&elapsed, start.get(), stop.get()));
    if (i > 0) ms.push_back(elapsed);  // the first copy warms up
  }
  c.copy_bytes = static_cast<double>(bytes);
  c.copy_gbps = 2.0 * c.copy_bytes / (median(ms) * 1e-3) / 1e9;
  return c;
}

std::vector<std::vector<double>> GpuBench::time_replays(const std::vector<cudaGraphExec_t>& graphs, int sets,
                                                        int count, bool back_to_back) {
  const size_t n = graphs.size();
  std::vector<Event> start(n * count), stop(n * count);  // [round][graph]
  for (int i = 0; i < count; ++i) {
    for (size_t k = 0; k < n; ++k) {
      const size_t g = i % 2 == 0 ? k : n - 1 - k;
      const size_t e = i * n + g;
      OPENMLA_CUDA_CHECK(cudaEventRecord(start[e].get(), stream_));
      OPENMLA_CUDA_CHECK(cudaGraphLaunch(graphs[g], stream_));
      OPENMLA_CUDA_CHECK(cudaEventRecord(stop[e].get(), stream_));
      if (!back_to_back) OPENMLA_CUDA_CHECK(cudaEventSynchronize(stop[e].get()));
    }
  }
  OPENMLA_CUDA_CHECK(cudaStreamSynchronize(stream_));
  std::vector<std::vector<double>> per_call_us(n);
  for (int i = 0; i < count; ++i) {
    for (size_t g = 0; g < n; ++g) {
      float ms = 0.f;
      OPENMLA_CUDA_CHECK(cudaEventElapsedTime(&ms, start[i * n + g].get(), stop[i * n + g].get()));
      per_call_us[g].push_back(1e3 * ms / sets);
    }
  }
  return per_call_us;
}

std::vector<std::vector<double>> GpuBench::time_sustained(const std::vector<cudaGraphExec_t>& graphs, int sets) {
  // How many rounds fill sustain_ms: from one timed round (the GPU warm from the untimed ones).
  double round_ms = 0.0;
  for (const std::vector<double>& us : time_replays(graphs, sets, 1, false)) round_ms += us[0] * sets * 1e-3;
  const int untimed = static_cast<int>(std::min(1e6, std::ceil(options_.sustain_ms / std::max(1e-3, round_ms))));
  for (int i = 0; i < untimed; ++i) {
    for (cudaGraphExec_t graph : graphs) OPENMLA_CUDA_CHECK(cudaGraphLaunch(graph, stream_));
  }
  // The timed replays follow without a host wait, so the GPU never idles between them.
  return time_replays(graphs, sets, options_.replays, true);
}

std::vector<std::vector<double>> GpuBench::time_graphs(const std::vector<cudaGraphExec_t>& graphs, int sets) {
  for (int i = 0; i < kWarmupReplays; ++i) {
    for (cudaGraphExec_t g : graphs) OPENMLA_CUDA_CHECK(cudaGraphLaunch(g, stream_));
  }
  // By default each replay on its own, the host waiting in between: the GPU stays mostly below its
  // power cap (docs/benchmarking.md, "Power state"). With a peer, OpenMLA's and its replays alternate.
  return options_.sustain_ms > 0 ? time_sustained(graphs, sets) : time_replays(graphs, sets, options_.replays, false);
}

void GpuBench::fill_cache(uint8_t* kv, int64_t num_pages, KVFormat format, uint64_t& fill_seed) {
  const int64_t page_bytes = int64_t{kPageSize} * kv_bytes_per_token(format);
  for (int64_t p0 = 0; p0 < num_pages; p0 += kFillChunkPages) {
    const int64_t pages = std::min<int64_t>(kFillChunkPages, num_pages - p0);
    const int64_t tokens = pages * kPageSize;
    fill_normal(scratch_->source.get(), DType::kBFloat16, tokens * kHeadDimQK, ++fill_seed, stream_);
    WriteKVArgs w;
    w.kv_latent = make_tensor_strided(scratch_->source.get(), DType::kBFloat16, {tokens, kHeadDimV},
                                      {kHeadDimQK, 1}, DeviceType::kCUDA, options_.device);
    w.k_rope = make_tensor_strided(static_cast<uint16_t*>(scratch_->source.get()) + kHeadDimV, DType::kBFloat16,
                                   {tokens, kRopeDim}, {kHeadDimQK, 1}, DeviceType::kCUDA, options_.device);
    w.slots = make_tensor(scratch_->slots.get(), DType::kInt32, {tokens}, DeviceType::kCUDA, options_.device);
    w.cache = cache_view(kv + p0 * page_bytes, pages, format, DeviceType::kCUDA, options_.device);
    write_kv(w, stream_);
  }
}

TimedConfig GpuBench::run(const BenchConfig& config, KVFormat format) {
  if (config.sparse()) return run_sparse(config, format);
  const ArenaScope scope(arena());  // declared first: every buffer of the config comes from it
  TimedConfig timed;
  BenchResult& r = timed.result;
  r.config = config;
  r.format = format;
  r.backend = backend_name(options_.backend);
  r.anchor_kernel = anchor_kernel_for(format);
  // FlashMLA's dense decode takes uniform queries without a tree mask; the other rows run without the peer.
  const bool with_peer = options_.peer != Peer::kNone && !config.speculative_form();
  if (options_.peer != Peer::kNone) {
    r.peer = peer_name(options_.peer);
    r.peer_status = with_peer ? "not run"  // until its replays are timed
                              : "not run: the peer takes uniform queries without a tree mask";
  }

  const std::vector<int> seqlens = config_seqlens(config, options_.seed);
  const WorkCount work = count_work(config, seqlens, format);
  r.total_seqlen = work.total_seqlen;
  r.mean_seqlen = static_cast<double>(work.total_seqlen) / config.batch_size;
  r.max_seqlen = *std::max_element(seqlens.begin(), seqlens.end());

  try {
    DecodeShape shape;
    shape.batch_size = config.batch_size;
    shape.q_len = config.q_len;
    shape.num_heads = config.num_heads;
    shape.q_dtype = q_dtype_for(format, options_.fp8_query);
    shape.kv_format = format;
    shape.causal = config.causal();
    shape.query_layout = config.layout;
    shape.tree_mask = config.tree_mask;
    // Tokens per request, q_indptr and the mask rows: each input set gets its own device copy.
    const QueryInputs queries = query_inputs(config);
    DecodeOptions decode_options;
    decode_options.backend = options_.backend;
    decode_options.num_parts = options_.num_parts;
    // FP8 math applies to per-tensor e4m3 caches; the other formats of a run keep their own math.
    if (format == KVFormat::kFP8E4M3) decode_options.fp8_math = options_.fp8_math;
    // The environment's overrides (OPENMLA_BACKEND, OPENMLA_PORTABLE_TILE) as for a plain DecodePlan, and a
    // forced sm90 kernel.
    testing::DecodeOverrides overrides = testing::environment_overrides();
    overrides.sm90_rows_per_cta = options_.sm90_rows_per_cta;
    const DecodePlan plan = testing::make_decode_plan(shape, decode_options, overrides, options_.device);
    r.backend = backend_name(plan.backend());
    if (plan.fp8_math() != Fp8Math::kOff) r.backend += std::string("+fp8math");
    if (!kv_format_is_16bit(format) && shape.q_dtype == DType::kFloat16) r.backend += "+fp16q";
    if (options_.sm90_rows_per_cta != 0 && plan.backend() == Backend::kSm90)
      r.backend += "/rows" + std::to_string(options_.sm90_rows_per_cta);  // a forced schedule
    // The peer decodes the same inputs into the same out / lse buffers; its split buffers (one workspace) are
    // shared by the sets as OpenMLA's workspace is.
    std::unique_ptr<flashmla::Decode> peer;
    if (options_.peer == Peer::kFlashMLA && with_peer) {
      peer = std::make_unique<flashmla::Decode>(
          flashmla::Shape{config.batch_size, config.q_len, config.num_heads, format, shape.causal},
          prop_.multiProcessorCount);
      r.peer_num_sm_parts = peer->num_sm_parts();
      r.peer_heads = config.num_heads;
    }
    const size_t peer_workspace_bytes = peer ? peer->workspace_bytes() : 0;

    // Sizes of one input set.
    const int b = config.batch_size, s_q = config.q_len, h_q = config.num_heads;
    int64_t num_pages = 0;
    int max_pages = 0;
    for (int len : seqlens) {
      num_pages += blocks_of(len);
      max_pages = std::max(max_pages, blocks_of(len));
    }
    const int64_t page_bytes = int64_t{kPageSize} * kv_bytes_per_token(format);
    const int64_t total_q = queries.total_q;  // b * s_q when uniform
    const int64_t rows = total_q * h_q;
    const size_t q_bytes = rows * kHeadDimQK * 2, out_bytes = rows * kHeadDimV * 2, lse_bytes = rows * 4;
    const size_t table_bytes = static_cast<size_t>(b) * max_pages * 4;
    const size_t indptr_bytes = queries.q_indptr.size() * sizeof(int32_t);
    const size_t mask_bytes = queries.mask.size() * sizeof(int64_t);
    const double kv_bytes = static_cast<double>(num_pages * page_bytes);
    r.set_bytes = kv_bytes + q_bytes + out_bytes + lse_bytes + table_bytes + indptr_bytes + mask_bytes;

    // What a set and the shared buffers take of the budget, each buffer rounded up to the arena's boundary.
    const int buffers_per_set = kBuffersPerSet + (indptr_bytes > 0 ? 1 : 0) + (mask_bytes > 0 ? 1 : 0);
    const double set_footprint = r.set_bytes + static_cast<double>(buffers_per_set) * kArenaAlign;
    const double budget = options_.memory_budget_bytes - plan.workspace_bytes() - 4.0 * b -
                          double{kSharedBuffers} * kArenaAlign -
                          (peer ? static_cast<double>(peer_workspace_bytes + kArenaAlign) : 0.0);
    int sets = static_cast<int>(std::ceil(options_.min_kv_bytes_per_pass / kv_bytes));
    sets = std::clamp(sets, 2, kMaxInputSets);
    if (sets * set_footprint > budget) sets = static_cast<int>(budget / set_footprint);
    if (sets < 2) {
      detail::fail(Status::kUnsupported, "memory: 2 input sets need ", 2 * r.set_bytes / 1e9,
                   " GB, the budget is ", budget / 1e9, " GB");
    }
    r.input_sets = sets;
    r.kv_bytes_per_pass = sets * kv_bytes;
    r.replays = options_.replays;

    // Shared by every set: the lengths, and the schedule plan() writes from them (one plan, as an
    // engine plans once per step for all layers).
    DeviceBuffer seqlens_dev = scope.buffer(seqlens.size() * sizeof(int32_t));
    OPENMLA_CUDA_CHECK(cudaMemcpyAsync(seqlens_dev.get(), seqlens.data(), seqlens_dev.bytes(),
                                       cudaMemcpyHostToDevice, stream_));
    DeviceBuffer workspace = scope.buffer(plan.workspace_bytes());
    DeviceBuffer peer_workspace = scope.buffer(peer_workspace_bytes);
    const TensorView seqlens_view = make_tensor(seqlens_dev.get(), DType::kInt32, {b}, DeviceType::kCUDA,
                                                options_.device);

    // Input sets: q and KV from N(0, 1) (KV through write_kv, so every format holds the same
    // distribution), each block table a random permutation of the set's own pages.
    std::vector<InputSet> inputs(sets);
    std::mt19937_64 rng(options_.seed ^ 0x5EEDull);
    uint64_t fill_seed = options_.seed * 1000003ull;
    for (int i = 0; i < sets; ++i) {
      InputSet& set = inputs[i];
      set.q = scope.buffer(q_bytes);
      set.kv = scope.buffer(static_cast<size_t>(num_pages * page_bytes));
      set.block_table = scope.buffer(table_bytes);
      set.out = scope.buffer(out_bytes);
      set.lse = scope.buffer(lse_bytes);
      set.q_indptr = scope.buffer(indptr_bytes);
      set.mask = scope.buffer(mask_bytes);
      if (indptr_bytes > 0) {
        OPENMLA_CUDA_CHECK(cudaMemcpyAsync(set.q_indptr.get(), queries.q_indptr.data(), indptr_bytes,
                                           cudaMemcpyHostToDevice, stream_));
      }
      if (mask_bytes > 0) {
        OPENMLA_CUDA_CHECK(
            cudaMemcpyAsync(set.mask.get(), queries.mask.data(), mask_bytes, cudaMemcpyHostToDevice, stream_));
      }
      fill_normal(set.q.get(), shape.q_dtype, rows * kHeadDimQK, ++fill_seed, stream_);
      fill_cache(set.kv.bytes_ptr(), num_pages, format, fill_seed);
      std::vector<int32_t> perm(static_cast<size_t>(num_pages));
      std::iota(perm.begin(), perm.end(), 0);
      std::shuffle(perm.begin(), perm.end(), rng);
      set.host_block_table.assign(static_cast<size_t>(b) * max_pages, kUnusedTableEntry);
      int64_t next = 0;
      for (int req = 0; req < b; ++req) {
        for (int j = 0; j < blocks_of(seqlens[req]); ++j) set.host_block_table[req * max_pages + j] = perm[next++];
      }
      OPENMLA_CUDA_CHECK(cudaMemcpyAsync(set.block_table.get(), set.host_block_table.data(), table_bytes,
                                         cudaMemcpyHostToDevice, stream_));
      // The pageable copies above return before the transfers are done; keep the host vectors alive
      // (they are) and finish before they could be touched again.
      OPENMLA_CUDA_CHECK(cudaStreamSynchronize(stream_));
    }

    const float softmax_scale = 1.0f / std::sqrt(static_cast<float>(kHeadDimQK));
    std::vector<DecodeArgs> args(sets);
    for (int i = 0; i < sets; ++i) {
      DecodeArgs& a = args[i];
      a.q = query_view(inputs[i].q.get(), shape.q_dtype, shape, total_q, kHeadDimQK, DeviceType::kCUDA,
                       options_.device);
      a.kv = cache_view(inputs[i].kv.get(), num_pages, format, DeviceType::kCUDA, options_.device);
      a.block_table = make_tensor(inputs[i].block_table.get(), DType::kInt32, {b, max_pages}, DeviceType::kCUDA,
                                  options_.device);
      a.cache_seqlens = seqlens_view;
      a.softmax_scale = softmax_scale;
      a.out = query_view(inputs[i].out.get(), shape.q_dtype, shape, total_q, kHeadDimV, DeviceType::kCUDA,
                         options_.device);
      a.lse = query_view(inputs[i].lse.get(), DType::kFloat32, shape, total_q, 0, DeviceType::kCUDA, options_.device);
      if (indptr_bytes > 0)
        a.q_indptr = make_tensor(inputs[i].q_indptr.get(), DType::kInt32, {b + 1}, DeviceType::kCUDA, options_.device);
      if (mask_bytes > 0)
        a.mask = mask_view(inputs[i].mask.get(), shape, total_q, DeviceType::kCUDA, options_.device);
    }

    // Planning: once, outside the timed region.
    DecodePlan::reset_device_errors(workspace.get(), stream_);
    plan.plan(seqlens_view, workspace.get(), workspace.bytes(), stream_);
    // Warm-up, eagerly (also surfaces launch errors outside a capture).
    for (int i = 0; i < sets; ++i) plan.run(args[i], workspace.get(), workspace.bytes(), stream_);
    OPENMLA_CUDA_CHECK(cudaStreamSynchronize(stream_));

    Graph graph;
    OPENMLA_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
    try {
      for (int i = 0; i < sets; ++i) plan.run(args[i], workspace.get(), workspace.bytes(), stream_);
    } catch (...) {
      cudaStreamEndCapture(stream_, &graph.graph);
      throw;
    }
    OPENMLA_CUDA_CHECK(cudaStreamEndCapture(stream_, &graph.graph));
    OPENMLA_CUDA_CHECK(cudaGraphInstantiate(&graph.exec, graph.graph, 0));
    std::vector<cudaGraphExec_t> graphs = {graph.exec};

    // The peer, the same way: its per-step schedule (FlashMLA's get_decoding_sched_meta, as plan() for
    // OpenMLA) once, outside the timed region; the R calls (split-KV kernel + combine each) eagerly, then in
    // one graph.
    Graph peer_graph;
    std::vector<flashmla::Args> peer_args(peer ? sets : 0);
    for (size_t i = 0; i < peer_args.size(); ++i) {
      flashmla::Args& a = peer_args[i];
      a.q = inputs[i].q.get();
      a.kv = inputs[i].kv.get();
      a.num_pages = num_pages;
      a.block_table = static_cast<const int32_t*>(inputs[i].block_table.get());
      a.max_pages = max_pages;
      a.seqlens = static_cast<const int32_t*>(seqlens_dev.get());
      a.softmax_scale = softmax_scale;
      a.out = inputs[i].out.get();
      a.lse = static_cast<float*>(inputs[i].lse.get());
    }
    if (peer) {
      try {
        peer->plan(static_cast<const int32_t*>(seqlens_dev.get()), peer_workspace.get(), stream_);
        OPENMLA_CUDA_CHECK(cudaStreamSynchronize(stream_));  // the schedule complete before any call reads it
        for (const flashmla::Args& a : peer_args) peer->run(a, peer_workspace.get(), stream_);
        OPENMLA_CUDA_CHECK(cudaStreamSynchronize(stream_));
        OPENMLA_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
        try {
          for (const flashmla::Args& a : peer_args) peer->run(a, peer_workspace.get(), stream_);
        } catch (...) {
          cudaStreamEndCapture(stream_, &peer_graph.graph);
          throw;
        }
        OPENMLA_CUDA_CHECK(cudaStreamEndCapture(stream_, &peer_graph.graph));
        OPENMLA_CUDA_CHECK(cudaGraphInstantiate(&peer_graph.exec, peer_graph.graph, 0));
      } catch (const Error& e) {
        throw Error(e.status(), std::string(peer_name(options_.peer)) + ": " + e.what());
      }
      graphs.push_back(peer_graph.exec);
    }
    const std::vector<std::vector<double>> replays_us = time_graphs(graphs, sets);
    const std::vector<double>& per_call_us = replays_us[0];
    r.time_us = median(per_call_us);
    r.time_us_min = *std::min_element(per_call_us.begin(), per_call_us.end());
    r.time_us_max = *std::max_element(per_call_us.begin(), per_call_us.end());
    r.replay_us = per_call_us;
    r.gbps = work.bytes / (r.time_us * 1e-6) / 1e9;
    r.tflops = work.flops / (r.time_us * 1e-6) / 1e12;
    if (peer) {
      const std::vector<double>& peer_us = replays_us[1];
      r.peer_time_us = median(peer_us);
      r.peer_time_us_min = *std::min_element(peer_us.begin(), peer_us.end());
      r.peer_time_us_max = *std::max_element(peer_us.begin(), peer_us.end());
      r.peer_replay_us = peer_us;
      r.peer_ratio = r.peer_time_us / r.time_us;
      r.peer_status = "ok";
      // Both wrote the same out / lse: OpenMLA's graph once more, so that its rows are the ones checked below.
      OPENMLA_CUDA_CHECK(cudaGraphLaunch(graph.exec, stream_));
    }
    r.device_errors = DecodePlan::read_device_errors(workspace.get(), stream_);

    // Accuracy: the first requests of input set 0 and their first heads, against the reference.
    const int samples = std::min(options_.check_samples, b);
    if (samples > 0) {
      const int heads = std::min(options_.check_heads, h_q);
      const InputSet& set = inputs[0];
      CheckJob job;
      job.shape = shape;
      job.math = plan.fp8_math();
      job.shape.batch_size = samples;
      job.shape.num_heads = heads;
      job.softmax_scale = softmax_scale;
      // The sampled requests' tokens lead q, out and lse in both layouts.
      for (int req = 0; req <= samples; ++req)
        job.token_begin.push_back(config.ragged() ? queries.q_indptr[req] : req * s_q);
      const size_t sample_tokens = static_cast<size_t>(job.token_begin[samples]);
      switch (shape.tree_mask) {
        case TreeMask::kShared: job.mask = queries.mask; break;
        case TreeMask::kPerRequest:
          job.mask.assign(queries.mask.begin(), queries.mask.begin() + static_cast<size_t>(samples) * s_q);
          break;
        case TreeMask::kPacked: job.mask.assign(queries.mask.begin(), queries.mask.begin() + sample_tokens); break;
        case TreeMask::kNone: break;
      }
      job.seqlens.assign(seqlens.begin(), seqlens.begin() + samples);
      for (int req = 0; req < samples; ++req) job.max_pages = std::max(job.max_pages, blocks_of(seqlens[req]));
      job.max_pages = std::max(job.max_pages, 1);
      job.block_table.assign(static_cast<size_t>(samples) * job.max_pages, kUnusedTableEntry);
      std::vector<int32_t> source_pages;
      for (int req = 0; req < samples; ++req) {
        for (int j = 0; j < blocks_of(seqlens[req]); ++j) {
          job.block_table[req * job.max_pages + j] = static_cast<int32_t>(source_pages.size());
          source_pages.push_back(set.host_block_table[req * max_pages + j]);
        }
      }
      job.num_pages = static_cast<int>(source_pages.size());
      job.cache.resize(source_pages.size() * page_bytes);
      for (size_t p = 0; p < source_pages.size(); ++p) {
        OPENMLA_CUDA_CHECK(cudaMemcpyAsync(job.cache.data() + p * page_bytes,
                                           set.kv.bytes_ptr() + source_pages[p] * page_bytes, page_bytes,
                                           cudaMemcpyDeviceToHost, stream_));
      }
      std::vector<uint16_t> q_all, out_all;
      std::vector<float> lse_all;
      const size_t sample_rows = sample_tokens * h_q;
      download(q_all, set.q.get(), sample_rows * kHeadDimQK, stream_);
      download(out_all, set.out.get(), sample_rows * kHeadDimV, stream_);
      download(lse_all, set.lse.get(), sample_rows, stream_);
      OPENMLA_CUDA_CHECK(cudaStreamSynchronize(stream_));
      std::vector<uint16_t> peer_out_all;
      std::vector<float> peer_lse_all;
      if (peer) {  // the peer's graph once more: its rows of the same buffers
        OPENMLA_CUDA_CHECK(cudaGraphLaunch(peer_graph.exec, stream_));
        download(peer_out_all, set.out.get(), sample_rows * kHeadDimV, stream_);
        download(peer_lse_all, set.lse.get(), sample_rows, stream_);
        OPENMLA_CUDA_CHECK(cudaStreamSynchronize(stream_));
      }
      // Keep heads [0, heads) of every (request, token) row.
      for (size_t row = 0; row < sample_tokens; ++row) {
        const size_t first = row * h_q;
        job.q.insert(job.q.end(), q_all.begin() + first * kHeadDimQK, q_all.begin() + (first + heads) * kHeadDimQK);
        job.gpu_out.insert(job.gpu_out.end(), out_all.begin() + first * kHeadDimV,
                           out_all.begin() + (first + heads) * kHeadDimV);
        job.gpu_lse.insert(job.gpu_lse.end(), lse_all.begin() + first, lse_all.begin() + first + heads);
        if (peer) {
          job.peer_out.insert(job.peer_out.end(), peer_out_all.begin() + first * kHeadDimV,
                              peer_out_all.begin() + (first + heads) * kHeadDimV);
          job.peer_lse.insert(job.peer_lse.end(), peer_lse_all.begin() + first, peer_lse_all.begin() + first + heads);
        }
      }
      timed.check = std::async(std::launch::async, [job = std::move(job)] { return run_check(job); }).share();
    }

    const cudaError_t last = cudaGetLastError();
    if (last != cudaSuccess) detail::fail(Status::kCudaError, "after the config: ", cudaGetErrorString(last));
  } catch (const Error& e) {
    r.status = std::string(e.status() == Status::kUnsupported ? "unsupported: " : "error: ") + e.what();
    if (e.status() == Status::kCudaError) {
      // An asynchronous kernel fault leaves the context unusable: say so and let the caller stop.
      const cudaError_t sticky = cudaDeviceSynchronize();
      if (sticky != cudaSuccess) sticky_error_ = cudaGetErrorString(sticky);
    }
  } catch (const std::exception& e) {  // e.g. std::bad_alloc of a host copy
    r.status = std::string("error: ") + e.what();
  }
  return timed;
}

// Sparse top-k decode (the sparse grid): the method of run() with SparseDecodePlan. Each input set has its own
// cache of s_k tokens per request (pages in a random permutation, as the dense sets' block tables) and its own
// indices: per query token, topk distinct positions of its request drawn at random, as slots of the cache. The
// inputs larger than L2 are counted in the tokens the calls read (b * s_q * topk per set), not in the caches.
TimedConfig GpuBench::run_sparse(const BenchConfig& config, KVFormat format) {
  const ArenaScope scope(arena());  // declared first: every buffer of the config comes from it
  TimedConfig timed;
  BenchResult& r = timed.result;
  r.config = config;
  r.format = format;
  r.backend = backend_name(options_.backend);
  r.anchor_kernel = "";  // the anchors are dense decode times
  const bool with_peer = options_.peer != Peer::kNone;
  if (with_peer) {
    r.peer = peer_name(options_.peer);
    r.peer_status = "not run";  // until its replays are timed
  }
  const std::vector<int> seqlens = config_seqlens(config, options_.seed);
  const WorkCount work = count_work(config, seqlens, format);
  r.total_seqlen = work.total_seqlen;
  r.mean_seqlen = static_cast<double>(work.total_seqlen) / config.batch_size;
  r.max_seqlen = *std::max_element(seqlens.begin(), seqlens.end());

  try {
    const int b = config.batch_size, s_q = config.q_len, h_q = config.num_heads, s_k = config.seqlen;
    const int topk = config.topk;
    if (config.varlen) detail::fail(Status::kUnsupported, "sparse rows take one s_k for every request");
    if (topk > s_k) detail::fail(Status::kUnsupported, "topk ", topk, " distinct slots need s_k >= topk, not ", s_k);
    SparseDecodeShape shape;
    shape.batch_size = b;
    shape.q_len = s_q;
    shape.num_heads = h_q;
    shape.q_dtype = q_dtype_for(format, options_.fp8_query);
    shape.kv_format = format;
    shape.topk = topk;
    DecodeOptions decode_options;
    decode_options.backend = options_.backend;
    decode_options.num_parts = options_.num_parts;
    const SparseDecodePlan plan(shape, decode_options, options_.device);
    r.backend = backend_name(plan.backend());
    if (!kv_format_is_16bit(format) && shape.q_dtype == DType::kFloat16) r.backend += "+fp16q";

    // FlashMLA's sparse kernels take 64 or 128 heads: fewer are run padded, each token's q rows followed by zero
    // rows, into buffers of its own; with the heads it takes, it shares q, out and lse with OpenMLA.
    std::unique_ptr<flashmla::SparseDecode> peer;
    int peer_h = h_q;
    if (options_.peer == Peer::kFlashMLA) {
      peer_h = flashmla::sparse_heads_for(h_q);
      peer = std::make_unique<flashmla::SparseDecode>(flashmla::SparseShape{b, s_q, peer_h, topk, format},
                                                      prop_.multiProcessorCount);
      r.peer_num_sm_parts = peer->num_sm_parts();
      r.peer_heads = peer_h;
    }
    const bool padded = peer && peer_h != h_q;
    const size_t peer_workspace_bytes = peer ? peer->workspace_bytes() : 0;

    // Sizes of one input set.
    const int pages_per_request = blocks_of(s_k);
    const int64_t num_pages = int64_t{b} * pages_per_request;
    const int64_t token_bytes = kv_bytes_per_token(format);
    const int64_t page_bytes = kPageSize * token_bytes;
    const int64_t tokens = int64_t{b} * s_q;
    const int64_t rows = tokens * h_q, peer_rows = padded ? tokens * peer_h : 0;
    const size_t q_bytes = rows * kHeadDimQK * 2, out_bytes = rows * kHeadDimV * 2, lse_bytes = rows * 4;
    const size_t indices_bytes = tokens * topk * sizeof(int32_t);
    const size_t peer_q_bytes = peer_rows * kHeadDimQK * 2, peer_out_bytes = peer_rows * kHeadDimV * 2,
                 peer_lse_bytes = peer_rows * 4;
    const double cache_bytes = static_cast<double>(num_pages * page_bytes);
    const double selected_bytes = static_cast<double>(tokens) * topk * token_bytes;  // what one call reads
    r.set_bytes = cache_bytes + q_bytes + out_bytes + lse_bytes + indices_bytes + peer_q_bytes + peer_out_bytes +
                  peer_lse_bytes;
    const int buffers_per_set = 5 + (padded ? 3 : 0);
    const double set_footprint = r.set_bytes + static_cast<double>(buffers_per_set) * kArenaAlign;
    const double budget = options_.memory_budget_bytes - plan.workspace_bytes() -
                          double{kSharedBuffers} * kArenaAlign -
                          (peer ? static_cast<double>(peer_workspace_bytes + kArenaAlign) : 0.0);
    int sets = static_cast<int>(std::ceil(options_.min_kv_bytes_per_pass / selected_bytes));
    sets = std::clamp(sets, 2, kMaxInputSets);
    if (sets * set_footprint > budget) sets = static_cast<int>(budget / set_footprint);
    if (sets < 2) {
      detail::fail(Status::kUnsupported, "memory: 2 input sets need ", 2 * r.set_bytes / 1e9, " GB, the budget is ",
                   budget / 1e9, " GB");
    }
    r.input_sets = sets;
    r.kv_bytes_per_pass = sets * selected_bytes;
    r.replays = options_.replays;

    DeviceBuffer workspace = scope.buffer(plan.workspace_bytes());
    DeviceBuffer peer_workspace = scope.buffer(peer_workspace_bytes);

    struct SparseSet {
      DeviceBuffer q, kv, indices, out, lse, peer_q, peer_out, peer_lse;
    };
    std::vector<SparseSet> inputs(sets);
    std::vector<int32_t> host_indices_0;  // set 0's, for the check
    std::mt19937_64 rng(options_.seed ^ 0x5BA55Eull);
    uint64_t fill_seed = options_.seed * 1000003ull;
    std::vector<int32_t> pool(static_cast<size_t>(s_k));
    std::iota(pool.begin(), pool.end(), 0);
    std::vector<int32_t> host_indices(static_cast<size_t>(tokens) * topk), positions(static_cast<size_t>(topk));
    for (int i = 0; i < sets; ++i) {
      SparseSet& set = inputs[i];
      set.q = scope.buffer(q_bytes);
      set.kv = scope.buffer(static_cast<size_t>(num_pages * page_bytes));
      set.indices = scope.buffer(indices_bytes);
      set.out = scope.buffer(out_bytes);
      set.lse = scope.buffer(lse_bytes);
      set.peer_q = scope.buffer(peer_q_bytes);
      set.peer_out = scope.buffer(peer_out_bytes);
      set.peer_lse = scope.buffer(peer_lse_bytes);
      fill_normal(set.q.get(), shape.q_dtype, rows * kHeadDimQK, ++fill_seed, stream_);
      fill_cache(set.kv.bytes_ptr(), num_pages, format, fill_seed);
      std::vector<int32_t> perm(static_cast<size_t>(num_pages));
      std::iota(perm.begin(), perm.end(), 0);
      std::shuffle(perm.begin(), perm.end(), rng);
      for (int req = 0; req < b; ++req) {
        const int32_t* pages = perm.data() + static_cast<size_t>(req) * pages_per_request;
        for (int t = 0; t < s_q; ++t) {
          draw_distinct(pool, topk, rng, positions.data());
          int32_t* slots = host_indices.data() + (static_cast<size_t>(req) * s_q + t) * topk;
          for (int k = 0; k < topk; ++k)
            slots[k] = pages[positions[k] / kPageSize] * kPageSize + positions[k] % kPageSize;
        }
      }
      OPENMLA_CUDA_CHECK(cudaMemcpyAsync(set.indices.get(), host_indices.data(), indices_bytes,
                                         cudaMemcpyHostToDevice, stream_));
      if (i == 0) host_indices_0 = host_indices;
      if (padded) {
        OPENMLA_CUDA_CHECK(cudaMemsetAsync(set.peer_q.get(), 0, peer_q_bytes, stream_));
        OPENMLA_CUDA_CHECK(cudaMemcpy2DAsync(set.peer_q.get(), size_t{2} * peer_h * kHeadDimQK, set.q.get(),
                                             size_t{2} * h_q * kHeadDimQK, size_t{2} * h_q * kHeadDimQK,
                                             static_cast<size_t>(tokens), cudaMemcpyDeviceToDevice, stream_));
      }
      // The pageable copy above returns before the transfer is done: finish before the host indices change.
      OPENMLA_CUDA_CHECK(cudaStreamSynchronize(stream_));
    }

    const float softmax_scale = 1.0f / std::sqrt(static_cast<float>(kHeadDimQK));
    std::vector<SparseDecodeArgs> args(sets);
    for (int i = 0; i < sets; ++i) {
      SparseDecodeArgs& a = args[i];
      a.q = make_tensor(inputs[i].q.get(), shape.q_dtype, {b, s_q, h_q, kHeadDimQK}, DeviceType::kCUDA,
                        options_.device);
      a.kv = cache_view(inputs[i].kv.get(), num_pages, format, DeviceType::kCUDA, options_.device);
      a.indices = make_tensor(inputs[i].indices.get(), DType::kInt32, {b, s_q, topk}, DeviceType::kCUDA,
                              options_.device);
      a.softmax_scale = softmax_scale;
      a.out = make_tensor(inputs[i].out.get(), shape.q_dtype, {b, s_q, h_q, kHeadDimV}, DeviceType::kCUDA,
                          options_.device);
      a.lse = make_tensor(inputs[i].lse.get(), DType::kFloat32, {b, s_q, h_q}, DeviceType::kCUDA, options_.device);
    }

    // Planning once, outside the timed region; warm-up eagerly, then the R calls in one graph.
    SparseDecodePlan::reset_device_errors(workspace.get(), stream_);
    plan.plan(TensorView(), TensorView(), workspace.get(), workspace.bytes(), stream_);
    for (int i = 0; i < sets; ++i) plan.run(args[i], workspace.get(), workspace.bytes(), stream_);
    OPENMLA_CUDA_CHECK(cudaStreamSynchronize(stream_));
    Graph graph;
    OPENMLA_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
    try {
      for (int i = 0; i < sets; ++i) plan.run(args[i], workspace.get(), workspace.bytes(), stream_);
    } catch (...) {
      cudaStreamEndCapture(stream_, &graph.graph);
      throw;
    }
    OPENMLA_CUDA_CHECK(cudaStreamEndCapture(stream_, &graph.graph));
    OPENMLA_CUDA_CHECK(cudaGraphInstantiate(&graph.exec, graph.graph, 0));
    std::vector<cudaGraphExec_t> graphs = {graph.exec};

    // The peer the same way: FlashMLA's schedule (get_decoding_sched_meta over topk keys) once, its R calls (sparse
    // split-KV kernel + combine each) eagerly, then in one graph.
    Graph peer_graph;
    std::vector<flashmla::SparseArgs> peer_args(peer ? sets : 0);
    for (size_t i = 0; i < peer_args.size(); ++i) {
      flashmla::SparseArgs& a = peer_args[i];
      a.q = padded ? inputs[i].peer_q.get() : inputs[i].q.get();
      a.kv = inputs[i].kv.get();
      a.num_pages = num_pages;
      a.indices = static_cast<const int32_t*>(inputs[i].indices.get());
      a.softmax_scale = softmax_scale;
      a.out = padded ? inputs[i].peer_out.get() : inputs[i].out.get();
      a.lse = static_cast<float*>(padded ? inputs[i].peer_lse.get() : inputs[i].lse.get());
    }
    if (peer) {
      try {
        peer->plan(peer_workspace.get(), stream_);
        OPENMLA_CUDA_CHECK(cudaStreamSynchronize(stream_));
        for (const flashmla::SparseArgs& a : peer_args) peer->run(a, peer_workspace.get(), stream_);
        OPENMLA_CUDA_CHECK(cudaStreamSynchronize(stream_));
        OPENMLA_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
        try {
          for (const flashmla::SparseArgs& a : peer_args) peer->run(a, peer_workspace.get(), stream_);
        } catch (...) {
          cudaStreamEndCapture(stream_, &peer_graph.graph);
          throw;
        }
        OPENMLA_CUDA_CHECK(cudaStreamEndCapture(stream_, &peer_graph.graph));
        OPENMLA_CUDA_CHECK(cudaGraphInstantiate(&peer_graph.exec, peer_graph.graph, 0));
      } catch (const Error& e) {
        throw Error(e.status(), std::string(peer_name(options_.peer)) + ": " + e.what());
      }
      graphs.push_back(peer_graph.exec);
    }

    const std::vector<std::vector<double>> replays_us = time_graphs(graphs, sets);
    const std::vector<double>& per_call_us = replays_us[0];
    r.time_us = median(per_call_us);
    r.time_us_min = *std::min_element(per_call_us.begin(), per_call_us.end());
    r.time_us_max = *std::max_element(per_call_us.begin(), per_call_us.end());
    r.replay_us = per_call_us;
    r.gbps = work.bytes / (r.time_us * 1e-6) / 1e9;
    r.tflops = work.flops / (r.time_us * 1e-6) / 1e12;
    if (peer) {
      const std::vector<double>& peer_us = replays_us[1];
      r.peer_time_us = median(peer_us);
      r.peer_time_us_min = *std::min_element(peer_us.begin(), peer_us.end());
      r.peer_time_us_max = *std::max_element(peer_us.begin(), peer_us.end());
      r.peer_replay_us = peer_us;
      r.peer_ratio = r.peer_time_us / r.time_us;
      r.peer_status = "ok";
      // Sharing out / lse: OpenMLA's graph once more, so that its rows are the ones checked below.
      if (!padded) OPENMLA_CUDA_CHECK(cudaGraphLaunch(graph.exec, stream_));
    }
    r.device_errors = SparseDecodePlan::read_device_errors(workspace.get(), stream_);

    // Accuracy: the first requests of input set 0 and their first heads, against reference::sparse_decode over
    // the tokens they select.
    const int samples = std::min(options_.check_samples, b);
    if (samples > 0) {
      const int heads = std::min(options_.check_heads, h_q);
      const SparseSet& set = inputs[0];
      const size_t sample_tokens = static_cast<size_t>(samples) * s_q;
      SparseCheckJob job;
      job.shape = shape;
      job.shape.batch_size = samples;
      job.shape.num_heads = heads;
      job.base.shape.batch_size = samples;
      job.base.shape.q_len = s_q;
      job.base.shape.num_heads = heads;
      job.base.shape.q_dtype = shape.q_dtype;
      job.base.softmax_scale = softmax_scale;
      for (int req = 0; req <= samples; ++req) job.base.token_begin.push_back(req * s_q);
      // The selected slots, each once, renumbered in order of first use.
      std::vector<int32_t> slots;
      std::unordered_map<int32_t, int32_t> row_of;
      job.indices.assign(host_indices_0.begin(), host_indices_0.begin() + sample_tokens * topk);
      for (int32_t& slot : job.indices) {
        const auto [it, added] = row_of.emplace(slot, static_cast<int32_t>(slots.size()));
        if (added) slots.push_back(slot);
        slot = it->second;
      }
      job.cache_rows = static_cast<int64_t>(slots.size());
      DeviceBuffer slots_dev = scope.buffer(slots.size() * sizeof(int32_t));
      DeviceBuffer rows_dev = scope.buffer(slots.size() * token_bytes);
      OPENMLA_CUDA_CHECK(cudaMemcpyAsync(slots_dev.get(), slots.data(), slots_dev.bytes(), cudaMemcpyHostToDevice,
                                         stream_));
      gather_rows(rows_dev.get(), set.kv.get(), token_bytes, static_cast<const int32_t*>(slots_dev.get()),
                  job.cache_rows, stream_);
      download(job.cache, rows_dev.get(), rows_dev.bytes(), stream_);
      std::vector<uint16_t> q_all, out_all, peer_out_all;
      std::vector<float> lse_all, peer_lse_all;
      download(q_all, set.q.get(), sample_tokens * h_q * kHeadDimQK, stream_);
      download(out_all, set.out.get(), sample_tokens * h_q * kHeadDimV, stream_);
      download(lse_all, set.lse.get(), sample_tokens * h_q, stream_);
      OPENMLA_CUDA_CHECK(cudaStreamSynchronize(stream_));
      if (peer) {
        if (!padded) OPENMLA_CUDA_CHECK(cudaGraphLaunch(peer_graph.exec, stream_));  // its rows of the same buffers
        download(peer_out_all, padded ? set.peer_out.get() : set.out.get(), sample_tokens * peer_h * kHeadDimV,
                 stream_);
        download(peer_lse_all, padded ? set.peer_lse.get() : set.lse.get(), sample_tokens * peer_h, stream_);
        OPENMLA_CUDA_CHECK(cudaStreamSynchronize(stream_));
      }
      // Heads [0, heads) of every sampled token (the peer's rows have peer_h heads).
      for (size_t t = 0; t < sample_tokens; ++t) {
        const size_t first = t * h_q, peer_first = t * peer_h;
        job.base.q.insert(job.base.q.end(), q_all.begin() + first * kHeadDimQK,
                          q_all.begin() + (first + heads) * kHeadDimQK);
        job.base.gpu_out.insert(job.base.gpu_out.end(), out_all.begin() + first * kHeadDimV,
                                out_all.begin() + (first + heads) * kHeadDimV);
        job.base.gpu_lse.insert(job.base.gpu_lse.end(), lse_all.begin() + first, lse_all.begin() + first + heads);
        if (peer) {
          job.base.peer_out.insert(job.base.peer_out.end(), peer_out_all.begin() + peer_first * kHeadDimV,
                                   peer_out_all.begin() + (peer_first + heads) * kHeadDimV);
          job.base.peer_lse.insert(job.base.peer_lse.end(), peer_lse_all.begin() + peer_first,
                                   peer_lse_all.begin() + peer_first + heads);
        }
      }
      timed.check = std::async(std::launch::async, [job = std::move(job)] { return run_sparse_check(job); }).share();
    }

    const cudaError_t last = cudaGetLastError();
    if (last != cudaSuccess) detail::fail(Status::kCudaError, "after the config: ", cudaGetErrorString(last));
  } catch (const Error& e) {
    r.status = std::string(e.status() == Status::kUnsupported ? "unsupported: " : "error: ") + e.what();
    if (e.status() == Status::kCudaError) {
      const cudaError_t sticky = cudaDeviceSynchronize();
      if (sticky != cudaSuccess) sticky_error_ = cudaGetErrorString(sticky);
    }
  } catch (const std::exception& e) {
    r.status = std::string("error: ") + e.what();
  }
  return timed;
}

}  // namespace openmla::bench
