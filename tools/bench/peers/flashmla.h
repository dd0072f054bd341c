// FlashMLA's dense decode (sm90; bf16 and fp16 caches) and its sparse top-k decode (sm90; fp8_ds_mla caches)
// driven on openmla-bench's own buffers, so that the two libraries are timed on the same q, paged cache, block
// tables or indices and lengths (--peer flashmla).
//
// FlashMLA's sources are compiled from the checkout named by -DOPENMLA_BENCH_FLASHMLA_DIR into openmla-bench only
// (tools/bench/peers/CMakeLists.txt); without it built() is false and Decode / SparseDecode throw kUnsupported.
// The calls are the ones FlashMLA's Python entry makes: get_decoding_sched_meta once per step (its scheduler
// metadata is reused by every layer of the step), then per layer the split-KV kernel and the combine.
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
// Empty when it runs on a device of compute capability major.minor with num_sms multiprocessors (9.0: its kernels
// are sm_90a code; at most 160 SMs: its combine takes at most 160 splits per request), else why not.
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

// FlashMLA's sparse decode on sm90 (csrc/api/sparse_decode.h, Decode_Sm90_Impl): DeepSeek-V3.2's layout (d_qk 576,
// fp8_ds_mla tokens of 656 bytes), bf16 q and out, h_q 64 or 128, topk a multiple of 64, no topk_length.
inline constexpr int kSparseTopkBlock = 64;

struct SparseShape {
  int batch_size = 0;
  int q_len = 1;      // s_q
  int num_heads = 0;  // h_q FlashMLA runs: 64 or 128 (a request of fewer heads is padded by the caller)
  int topk = 0;       // indices per query token
  KVFormat kv_format = KVFormat::kFP8DsMla;
};

// The heads FlashMLA's sparse decode runs a request of h_q heads with: 64 up to 64, else 128 (the q of fewer heads
// padded, as engines do for TP8's 16 heads).
int sparse_heads_for(int h_q) noexcept;
// Empty when FlashMLA's sm90 sparse decode runs the shape, else why not.
std::string sparse_shape_unsupported(const SparseShape& shape);

// One sparse call's device buffers, contiguous: q [b, s_q, h, 576] bf16, kv [num_pages, 64, 656] bytes,
// indices [b, s_q, topk] int32 (global slots page * 64 + offset), out [b, s_q, h, 512] bf16, lse [b, s_q, h]
// float32 (natural log); h the shape's num_heads.
struct SparseArgs {
  const void* q = nullptr;
  const void* kv = nullptr;
  int64_t num_pages = 0;
  const int32_t* indices = nullptr;
  float softmax_scale = 0.f;
  void* out = nullptr;
  float* lse = nullptr;
};

class SparseDecode {
 public:
  // num_sms: the device's multiprocessor count; FlashMLA splits the work over max(num_sms / s_q / (h_q / 64), 1)
  // parts (Decode_Sm90_Impl::get_meta), and so does this. Throws kUnsupported (sparse_shape_unsupported, or a build
  // without the peer).
  SparseDecode(const SparseShape& shape, int num_sms);

  int num_sm_parts() const noexcept { return num_sm_parts_; }
  size_t workspace_bytes() const noexcept { return workspace_bytes_; }

  // Per step: get_decoding_sched_meta over topk keys per query token (no topk_length), into the workspace.
  void plan(void* workspace, cudaStream_t stream) const;
  // Per layer: FlashMLA's sparse split-KV kernel, then its combine; capturable in a CUDA graph.
  void run(const SparseArgs& args, void* workspace, cudaStream_t stream) const;

 private:
  SparseShape shape_;
  int num_sm_parts_ = 0;
  size_t meta_offset_ = 0, splits_offset_ = 0, lse_accum_offset_ = 0, out_accum_offset_ = 0;
  size_t workspace_bytes_ = 0;
};

}  // namespace openmla::bench::flashmla
