// e4m3 query codes widened to bf16: exact (an e4m3 value has 4 significant bits and an exponent in [-9, 8]), so the
// decode kernels compute with the very codes the caller quantized; the scales stay in float32 on the device.
#include "kernels/common/fp8_query_launch.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "core/check.h"
#include "kernels/common/convert.cuh"
#include "openmla/kv_format.h"

namespace openmla::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kChunk = 8;  // codes per thread and step: an 8-byte load, a 16-byte store
constexpr int kChunksPerRow = kHeadDimQK / kChunk;
static_assert(kHeadDimQK % kChunk == 0, "rows are whole chunks");

__device__ __forceinline__ float e4m3_value(uint32_t code) {
  return __half2float(__half(__nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(code & 0xFFu), __NV_E4M3)));
}

__global__ void __launch_bounds__(kThreads) widen_fp8_query_kernel(const WidenFp8QueryParams p) {
  const int64_t chunks = p.num_tokens * p.heads * kChunksPerRow;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x; i < chunks;
       i += static_cast<int64_t>(gridDim.x) * kThreads) {
    const int64_t row = i / kChunksPerRow;
    const int col = static_cast<int>(i % kChunksPerRow) * kChunk;
    const int64_t token = row / p.heads;
    const int head = static_cast<int>(row % p.heads);
    const int64_t offset = (token / p.tokens_per_request) * p.stride_request +
                           (token % p.tokens_per_request) * p.stride_token + head * p.stride_head + col;
    const uint2 codes = *reinterpret_cast<const uint2*>(p.q + offset);  // 16-byte aligned rows (validated)
    uint32_t words[kChunk / 2];
#pragma unroll
    for (int w = 0; w < kChunk / 2; ++w) {
      const uint32_t src = w < 2 ? codes.x : codes.y;
      const int shift = 16 * (w & 1);
      words[w] = pack2<__nv_bfloat16>(e4m3_value(src >> shift), e4m3_value(src >> (shift + 8)));
    }
    *reinterpret_cast<uint4*>(p.out + row * kHeadDimQK + col) = make_uint4(words[0], words[1], words[2], words[3]);
  }
}

}  // namespace

void launch_widen_fp8_query(const WidenFp8QueryParams& p, cudaStream_t stream) {
  const int64_t chunks = p.num_tokens * p.heads * kChunksPerRow;
  if (chunks == 0) return;
  // A grid-stride loop: enough blocks to fill any current GPU several times over.
  const int64_t blocks = (chunks + kThreads - 1) / kThreads;
  widen_fp8_query_kernel<<<static_cast<unsigned>(blocks < 4096 ? blocks : 4096), kThreads, 0, stream>>>(p);
  OPENMLA_CUDA_CHECK(cudaGetLastError());
}

}  // namespace openmla::kernels
