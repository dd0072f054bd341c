// FlashMLA's dense decode (sm90; bf16 and fp16 caches) driven on openmla-bench's own buffers, so that the two
// libraries are timed on the same q, paged cache, block tables and lengths (--peer flashmla).
//
// FlashMLA's sources are compiled from the checkout named by -DOPENMLA_BENCH_FLASHMLA_DIR into openmla-bench only
// (tools/bench/peers/CMakeLists.txt); without it built() is false and Decode throws kUnsupported. The calls are
// the ones FlashMLA's Python entry makes for a dense decode: get_decoding_sched_meta once per step (its
// scheduler metadata is reused by every layer of the step), then per layer the split-KV kernel and the combine.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include <cuda_runtime_api.h>

#include "openmla/kv_format.h"

namespace openmla::bench::flashmla {

inline constexpr size_t kSchedMetaBytes = 32;  // FlashMLA's DecodingSchedMeta, one per part (checked in flashmla.cu)
inline constexpr int kMaxSplits = 160;         // the most splits per request its combine takes
inline constexpr int kMaxHeads = 128;

// Whether this binary has FlashMLA's dense decode compiled in.
bool built() noexcept;

struct Shape {
  int batch_size = 0;
  int q_len = 1;      // s_q
  int num_heads = 0;  // h_q (one KV head, as MLA has)
  KVFormat kv_format = KVFormat::kBF16;  // the query and output have the cache's type
  bool causal = false;
};

// Empty when FlashMLA's dense decode runs the shape (bf16 or fp16 cache, b >= 1, s_q >= 1, h_q 1..128), else why
// not.
std::string shape_unsupported(const Shape& shape);
// Empty when it runs on a device of compute capability major.minor with num_sms multiprocessors (9.0: its kernel
// is sm_90a code; at most 160 SMs: its combine takes at most 160 splits per request), else why not.
std::string device_unsupported(int major, int minor, int num_sms);

// One decode call's device buffers, laid out as openmla::DecodeArgs has them (all contiguous):
// q [b, s_q, h_q, 576], kv [num_pages, 64, 576], block_table [b, max_pages] int32, seqlens [b] int32,
// out [b, s_q, h_q, 512] (q's type), lse [b, s_q, h_q] float32 (natural log).
struct Args {
  const void* q = nullptr;
  const void* kv = nullptr;
  int64_t num_pages = 0;
  const int32_t* block_table = nullptr;
  int max_pages = 0;
  const int32_t* seqlens = nullptr;
  float softmax_scale = 0.f;
  void* out = nullptr;
  float* lse = nullptr;
};

class Decode {
 public:
  // num_sms: the device's multiprocessor count. FlashMLA's Python entry splits the batch's KV over
  // max(num_sms / ceil(s_q * h_q / 64), 1) parts per 64-row query tile, and so does this. Throws kUnsupported
  // (shape_unsupported, or a build without the peer).
  Decode(const Shape& shape, int num_sms);

  int num_sm_parts() const noexcept { return num_sm_parts_; }
  // Scheduler metadata, split counts and the partial rows of the b + num_sm_parts splits, in one buffer (shared by
  // every call of a step, as OpenMLA's workspace is).
  size_t workspace_bytes() const noexcept { return workspace_bytes_; }

  // Per step: the split schedule from the lengths (FlashMLA's get_decoding_sched_meta kernel), into the workspace.
  void plan(const int32_t* seqlens, void* workspace, cudaStream_t stream) const;
  // Per layer: FlashMLA's split-KV kernel, then its combine (PDL-chained as FlashMLA launches them); capturable
  // in a CUDA graph. args.seqlens must be the lengths given to plan().
  void run(const Args& args, void* workspace, cudaStream_t stream) const;

 private:
  Shape shape_;
  int num_sm_parts_ = 0;
  size_t meta_offset_ = 0, splits_offset_ = 0, lse_accum_offset_ = 0, out_accum_offset_ = 0;
  size_t workspace_bytes_ = 0;
};

}  // namespace openmla::bench::flashmla
