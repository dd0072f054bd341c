// Sparse top-k MLA decode (DeepSeek-V3.2's attention): every query token attends to its own list of cache
// slots, chosen by an indexer, instead of its request's whole prefix. FlashMLA's sparse decode semantics.
//
//   SparseDecodePlan plan(shape);                          // host: validate, query device once
//   cudaMalloc(&ws, plan.workspace_bytes());               // caller owns all memory
//   plan.reset_device_errors(ws, stream);                  // once after allocation
//   per step:  plan.plan(topk_length, extra_topk_length, ws, bytes, stream);  // device kernel, no host sync
//   per layer: plan.run(args, ws, bytes, stream);                             // graph-capturable
//
// Query token (r, i) attends to the slots indices[r, i, 0 .. n) of the cache, n = min(topk_length[r], topk)
// (topk without topk_length), and, with an extra cache, to extra_indices[r, i, 0 .. m) of it, m likewise from
// extra_topk_length, all in one softmax; a negative length sets kDeviceErrorNegativeSeqlen and makes the
// request's rows NaN. A slot is page * page_block_size + offset in page (the cache's own page
// block size, any value >= 1). Slot -1 is skipped. Any other slot outside [0, num_pages * page_block_size) is
// never dereferenced: it sets kDeviceErrorSparseIndex and that query token's rows are NaN. A slot listed twice
// counts twice. A query token with no slot to attend gets out 0 and lse -inf (FlashMLA returns +inf; its
// drop-in, openmla.flash_mla, does). With attn_sink, out is scaled by exp(lse) / (exp(lse) + exp(sink[h]));
// lse is returned without the sink.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include <cuda_runtime_api.h>

#include "openmla/decode.h"
#include "openmla/kv_format.h"
#include "openmla/tensor.h"

namespace openmla {

inline constexpr int kMaxSparseQueryLen = 16;   // query tokens per request (MTP with sparse attention)
inline constexpr int kMaxSparseTopk = 65536;    // indices per query token, per cache

// Everything about a sparse decode step that is fixed when planning (host-known).
struct SparseDecodeShape {
  int batch_size = 0;                    // b >= 1
  int q_len = 1;                         // s_q in [1, kMaxSparseQueryLen]
  int num_heads = 0;                     // h_q in [1, 128]
  DType q_dtype = DType::kBFloat16;      // bf16 or fp16; out has the same dtype
  KVFormat kv_format = KVFormat::kFP8DsMla;  // every format; the extra cache has the same one
  int topk = 0;                          // indices per query token, [1, kMaxSparseTopk]
  int extra_topk = 0;                    // indices per query token into the extra cache; 0 = no extra cache
  bool topk_length = false;              // plan() takes topk_length [b]
  bool extra_topk_length = false;        // plan() takes extra_topk_length [b] (needs extra_topk > 0)
  bool attn_sink = false;                // run() takes attn_sink [h_q]
};

// Arguments of one sparse decode call (one layer). All tensors on the plan's CUDA device.
struct SparseDecodeArgs {
  TensorView q;              // [b, s_q, h_q, 576], q_dtype, last dim contiguous, 16-B aligned rows, and
                             // stride(0) == s_q * stride(1) (its tokens are addressed as one [b * s_q] dimension)
  KVCache kv;                // [num_pages, page_block_size, (1,) W]: as for decode, any page block size >= 1
  TensorView indices;        // [b, s_q, topk] int32, last dim contiguous
  KVCache extra_kv;          // with extra_topk: the extra cache (same format, its own page block size)
  TensorView extra_indices;  // with extra_topk: [b, s_q, extra_topk] int32, last dim contiguous
  TensorView attn_sink;      // with attn_sink: [h_q] float32, contiguous
  float softmax_scale = 0.f; // finite, > 0
  TensorView out;            // [b, s_q, h_q, 512], q_dtype, last dim contiguous, 16-B aligned rows
  TensorView lse;            // [b, s_q, h_q] float32, any strides (FlashMLA's [b, h_q, s_q] as for decode)
};

namespace detail {
struct SparseDecodeLaunch;
}  // namespace detail

class SparseDecodePlan {
 public:
  // Validates the shape and options (backend, num_parts as for DecodePlan), queries the device once and
  // chooses the kernel.
  explicit SparseDecodePlan(const SparseDecodeShape& shape, const DecodeOptions& options = {}, int device = -1);

  const SparseDecodeShape& shape() const noexcept { return shape_; }
  Backend backend() const noexcept { return backend_; }
  int num_parts() const noexcept { return num_parts_; }
  int device() const noexcept { return device_; }
  size_t workspace_bytes() const noexcept { return workspace_bytes_; }

  // Writes the step's schedule into the workspace from the per-request lengths (device tensors [b] int32;
  // undefined views where the shape has none). One small kernel on `stream`: no host sync, capturable.
  void plan(const TensorView& topk_length, const TensorView& extra_topk_length, void* workspace,
            size_t workspace_bytes, cudaStream_t stream) const;

  // Sparse attention + combine with the schedule plan() wrote on the same stream.
  void run(const SparseDecodeArgs& args, void* workspace, size_t workspace_bytes, cudaStream_t stream) const;

  // The device error word (DeviceErrorBits) inside the workspace, as DecodePlan's.
  static unsigned* device_error_word(void* workspace) noexcept;
  static void reset_device_errors(void* workspace, cudaStream_t stream);
  static unsigned read_device_errors(const void* workspace, cudaStream_t stream);

 private:
  SparseDecodeShape shape_;
  Backend backend_ = Backend::kPortable;
  int device_ = 0;
  int num_parts_ = 0;
  bool programmatic_launch_ = false;
  size_t workspace_bytes_ = 0;
  std::shared_ptr<const detail::SparseDecodeLaunch> launch_;
};

}  // namespace openmla
