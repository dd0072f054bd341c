// Plain-old-data parameters of the GPU write_kv kernel, filled by openmla::write_kv from validated
// views, and its launcher (src/kernels/common/write_kv.cu).
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

#include "openmla/kv_format.h"
#include "openmla/tensor.h"

namespace openmla::kernels {

struct WriteKVParams {
  int64_t num_tokens;  // n >= 1 (the caller does not launch for n == 0)

  const void* latent;  // [n, 512] input dtype, last dim contiguous
  int64_t latent_row_stride;  // elements
  const void* rope;    // [n, 64] input dtype, last dim contiguous
  int64_t rope_row_stride;    // elements
  DType input_dtype;   // kBFloat16, kFloat16 or kFloat32

  const void* slots;   // [n] int32 or int64
  int64_t slots_stride;       // elements
  bool slots_int64;

  uint8_t* cache;      // page 0, token 0
  int64_t page_stride_bytes;
  int64_t token_stride_bytes;
  int64_t num_slots;   // num_pages * 64: slots at or beyond are skipped and flagged
  KVFormat format;
  float fp8_scale;     // kFP8E4M3: stored = e4m3(x / fp8_scale)
  const float* device_scale;  // kFP8E4M3, optional (nullptr): the scale read on the device instead of
                              // fp8_scale; not finite and > 0: nothing is written, kDeviceErrorScale
  bool e4m3_nan_overflow;     // kFP8E4M3: E4M3Overflow::kNaN (false: saturate)

  unsigned* error_word;  // optional (nullptr): gets kDeviceErrorSlotOutOfRange, kDeviceErrorScale

  // Every base pointer and row/page stride is a multiple of 16 bytes: the kernel moves 16-byte
  // vectors. Otherwise it falls back to element accesses (same results).
  bool vectorized;
};

// One kernel on `stream`; no sync, no allocation (graph-capturable). Throws Error(kCudaError) when
// the launch fails.
void launch_write_kv(const WriteKVParams& params, cudaStream_t stream);

}  // namespace openmla::kernels
