// The scaled query: out = q * q_scale * kv_scale in the decode kernels' 16-bit type. Per-tensor FP8 decode
// with device-held scales runs it before the decode kernel, which then reads a 16-bit query as usual and
// multiplies its outputs by kv_scale (output_scale, segment.cuh):
//   score = q . k = (code_q * q_scale) . (code_k * kv_scale) = (code_q * q_scale * kv_scale) . code_k
// Rounding the product to bf16 costs at most 2^-9 of each element, far below the e4m3 cache's 2^-4.
// A scale that is not finite and > 0 (or a product the output type cannot hold) writes NaN and is flagged,
// so that no finite output comes from a bad scale.
#include "kernels/common/scaled_query_launch.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "core/check.h"
#include "kernels/common/convert.cuh"
#include "openmla/error.h"
#include "openmla/kv_format.h"

namespace openmla::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kChunk = 8;  // elements per thread and step: one 16-byte store
constexpr int kChunksPerRow = kHeadDimQK / kChunk;
static_assert(kHeadDimQK % kChunk == 0, "rows are whole chunks");

__device__ __forceinline__ bool valid_scale(float s) { return isfinite(s) && s > 0.f; }

// 8 input elements as floats.
__device__ __forceinline__ void load_chunk(const void* q, ScaledQueryInput input, int64_t offset, float (&v)[kChunk]) {
  if (input == ScaledQueryInput::kE4M3) {
    const uint2 raw = *reinterpret_cast<const uint2*>(static_cast<const uint8_t*>(q) + offset);
    const uint32_t words[2] = {raw.x, raw.y};
#pragma unroll
    for (int w = 0; w < 2; ++w)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const __nv_fp8_storage_t code = static_cast<__nv_fp8_storage_t>((words[w] >> (8 * i)) & 0xFFu);
        v[4 * w + i] = __half2float(__half(__nv_cvt_fp8_to_halfraw(code, __NV_E4M3)));
      }
  } else {
    const uint4 raw = *reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(q) + offset);
    const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      const float2 f = input == ScaledQueryInput::kBFloat16 ? unpack2<__nv_bfloat16>(words[w]) : unpack2<__half>(words[w]);
      v[2 * w] = f.x;
      v[2 * w + 1] = f.y;
    }
  }
}

__global__ void __launch_bounds__(kThreads) scaled_query_kernel(const ScaledQueryParams p) {
  const float q_scale = p.q_scale != nullptr ? *p.q_scale : 1.f;
  const float kv_scale = *p.kv_scale;
  const bool scales_ok = valid_scale(q_scale) && valid_scale(kv_scale);
  const float factor = scales_ok ? q_scale * kv_scale : __int_as_float(0x7FC00000);
  if (!scales_ok && blockIdx.x == 0 && threadIdx.x == 0 && p.error_word != nullptr)
    atomicOr(p.error_word, kDeviceErrorScale);

  const int64_t chunks = p.num_tokens * p.heads * kChunksPerRow;
  bool overflow = false;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x; i < chunks;
       i += static_cast<int64_t>(gridDim.x) * kThreads) {
    const int64_t row = i / kChunksPerRow;
    const int col = static_cast<int>(i % kChunksPerRow) * kChunk;
    const int64_t token = row / p.heads;
    const int head = static_cast<int>(row % p.heads);
    const int64_t offset = (token / p.tokens_per_request) * p.stride_request +
                           (token % p.tokens_per_request) * p.stride_token + head * p.stride_head + col;
    float v[kChunk];
    load_chunk(p.q, p.input, offset, v);
    uint32_t words[kChunk / 2];
#pragma unroll
    for (int w = 0; w < kChunk / 2; ++w) {
      const float a = v[2 * w] * factor, b = v[2 * w + 1] * factor;
      words[w] = p.out_bf16 ? pack2<__nv_bfloat16>(a, b) : pack2<__half>(a, b);
      const float2 back = p.out_bf16 ? unpack2<__nv_bfloat16>(words[w]) : unpack2<__half>(words[w]);
      // A finite input whose product the type cannot hold (fp16 above 65504).
      overflow |= scales_ok && isfinite(v[2 * w]) && isfinite(v[2 * w + 1]) && !(isfinite(back.x) && isfinite(back.y));
    }
    *reinterpret_cast<uint4*>(static_cast<uint16_t*>(p.out) + row * kHeadDimQK + col) =
        make_uint4(words[0], words[1], words[2], words[3]);
  }
  if (overflow && p.error_word != nullptr) atomicOr(p.error_word, kDeviceErrorScale);
}

}  // namespace

void launch_scaled_query(const ScaledQueryParams& p, cudaStream_t stream) {
  const int64_t chunks = p.num_tokens * p.heads * kChunksPerRow;
  if (chunks == 0) return;
  // Enough blocks to fill any current GPU several times over; a grid-stride loop covers the rest.
  const int64_t blocks = (chunks + kThreads - 1) / kThreads;
  const unsigned grid = static_cast<unsigned>(blocks < 4096 ? blocks : 4096);
  scaled_query_kernel<<<grid, kThreads, 0, stream>>>(p);
  OPENMLA_CUDA_CHECK(cudaGetLastError());
}

}  // namespace openmla::kernels
