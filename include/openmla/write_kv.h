// Scatter new tokens into the paged KV cache, converting / quantizing to the cache format.
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

#include "openmla/kv_format.h"
#include "openmla/tensor.h"

namespace openmla {

// What an fp8_e4m3 write does with a value x / scale whose magnitude rounds past 448 (above 464,
// +-inf included). Both round to nearest even below that; docs/kv-formats.md.
enum class E4M3Overflow : uint8_t {
  kSaturate = 0,  // +-448 (0x7E / 0xFE); NaN -> 0x7F. CUDA's __NV_SATFINITE conversion, as vLLM's
                  // concat_and_cache_mla writes "fp8" / "fp8_e4m3" caches.
  kNaN = 1,       // NaN with the value's sign (0x7F / 0xFF); a NaN keeps its sign. PyTorch's float ->
                  // float8_e4m3fn cast, as SGLang's MLA KV pool writes fp8_e4m3 caches.
};

struct WriteKVArgs {
  TensorView kv_latent;  // [n, 512] bf16, fp16 or float32, last dim contiguous
  TensorView k_rope;     // [n, 64], same dtype as kv_latent, last dim contiguous
  TensorView slots;      // [n] int32 or int64: page_id * 64 + offset_in_page; a negative slot is
                         // skipped (padding tokens), a slot >= num_pages * 64 is skipped and flagged
  KVCache cache;         // destination (any format)
  // kFP8E4M3 caches only. fp8_ds_mla's power-of-two tile scales keep every |x / scale| <= 448, so
  // no value can overflow there: kNaN is rejected for every other format (Error naming e4m3_overflow)
  // rather than silently meaning nothing.
  E4M3Overflow e4m3_overflow = E4M3Overflow::kSaturate;
};

// GPU: one kernel on `stream`, no host sync, graph-capturable. device_error_word (optional,
// device pointer) gets kDeviceErrorSlotOutOfRange OR-ed in when a slot is beyond the cache.
// With cache.device_scale the kernel reads the scale from the device when it runs (a captured graph
// sees the tensor's value at each replay): stored = e4m3(x / *device_scale). A device scale that is
// not finite and > 0 writes nothing (no byte of the cache changes) and sets kDeviceErrorScale.
// Formats whose GPU writer is not built yet throw Error(kUnsupported).
void write_kv(const WriteKVArgs& args, cudaStream_t stream, unsigned* device_error_word = nullptr);

}  // namespace openmla
