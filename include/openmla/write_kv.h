// Scatter new tokens into the paged KV cache, converting / quantizing to the cache format.
#pragma once

#include <cuda_runtime_api.h>

#include "openmla/kv_format.h"
#include "openmla/tensor.h"

namespace openmla {

struct WriteKVArgs {
  TensorView kv_latent;  // [n, 512] bf16, fp16 or float32, last dim contiguous
  TensorView k_rope;     // [n, 64], same dtype as kv_latent, last dim contiguous
  TensorView slots;      // [n] int32 or int64: page_id * 64 + offset_in_page; a negative slot is
                         // skipped (padding tokens), a slot >= num_pages * 64 is skipped and flagged
  KVCache cache;         // destination (any format)
};

// GPU: one kernel on `stream`, no host sync, graph-capturable. device_error_word (optional,
// device pointer) gets kDeviceErrorSlotOutOfRange OR-ed in when a slot is beyond the cache.
// Formats whose GPU writer is not built yet throw Error(kUnsupported).
void write_kv(const WriteKVArgs& args, cudaStream_t stream, unsigned* device_error_word = nullptr);

}  // namespace openmla
