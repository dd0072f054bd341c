// e4m3 queries (per-tensor FP8 with device-held scales): the codes widened to bf16, which holds every e4m3 value
// exactly, for the decode kernels' 16-bit query path; the query's scale is applied to the scores on the device
// (call_scales, segment.cuh). The launcher of src/kernels/common/fp8_query.cu.
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

namespace openmla::kernels {

struct WidenFp8QueryParams {
  const uint8_t* q;  // e4m3 codes, tokens x heads x 576, last dim contiguous
  // Token t of a uniform batch is (t / tokens_per_request, t % tokens_per_request); ragged tokens are packed rows
  // (tokens_per_request = 1). Strides in elements.
  int64_t num_tokens;
  int tokens_per_request;
  int heads;
  int64_t stride_request, stride_token, stride_head;
  uint16_t* out;  // [num_tokens, heads, 576] bf16, contiguous
};

// One kernel on `stream`; no sync, no allocation (graph-capturable). Throws Error(kCudaError) when the launch fails.
void launch_widen_fp8_query(const WidenFp8QueryParams& params, cudaStream_t stream);

}  // namespace openmla::kernels
