// The scaled query of per-tensor FP8 decode with device-held scales (DecodeShape::device_scales): q times its
// scales, written in the decode kernels' 16-bit type, and its launcher (src/kernels/common/scaled_query.cu).
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

namespace openmla::kernels {

enum class ScaledQueryInput : uint8_t { kE4M3, kBFloat16, kFloat16 };

struct ScaledQueryParams {
  const void* q;  // query tokens x heads x 576, last dim contiguous
  ScaledQueryInput input;
  bool out_bf16;  // the output type: bf16 (e4m3 and bf16 inputs) or fp16
  // Row r = token * heads + head; a token is (request, index) of a uniform batch (tokens_per_request = s_q) or
  // a packed ragged token (tokens_per_request = 1: the request stride is the token stride). Strides in elements.
  int64_t num_tokens;
  int tokens_per_request;
  int heads;
  int64_t stride_request, stride_token, stride_head;
  const float* q_scale;   // e4m3 queries: value = code * q_scale[0]; else nullptr
  const float* kv_scale;  // the cache's scale, folded into the scores here (and into the output by the kernels)
  void* out;              // [num_tokens, heads, 576] contiguous, out type
  unsigned* error_word;   // kDeviceErrorScale for a scale that is not finite and > 0, or a product out of range
};

// One kernel on `stream`; no sync, no allocation (graph-capturable). Throws Error(kCudaError) when the launch fails.
void launch_scaled_query(const ScaledQueryParams& params, cudaStream_t stream);

}  // namespace openmla::kernels
