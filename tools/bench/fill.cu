// N(0, 1) fills for openmla-bench: a counter-based hash (splitmix64) feeds Box-Muller, so every
// value is a pure function of (seed, index) and any grid shape gives the same data.
#include "fill.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

#include "core/check.h"

namespace openmla::bench {
namespace {

__device__ __forceinline__ uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Two independent N(0, 1) values from one 64-bit hash (Box-Muller on two 24-bit uniforms).
__device__ __forceinline__ float2 normal_pair(uint64_t seed, int64_t pair_index) {
  const uint64_t h = splitmix64(seed ^ splitmix64(static_cast<uint64_t>(pair_index)));
  const float u1 = (static_cast<float>(h >> 40) + 1.0f) * 0x1p-24f;  // (0, 1]: log stays finite
  const float u2 = static_cast<float>((h >> 16) & 0xFFFFFFu) * 0x1p-24f;
  const float radius = sqrtf(-2.0f * logf(u1));
  float s, c;
  sincospif(2.0f * u2, &s, &c);
  return make_float2(radius * c, radius * s);
}

__device__ __forceinline__ void store(float* dst, float x) { *dst = x; }
__device__ __forceinline__ void store(__nv_bfloat16* dst, float x) { *dst = __float2bfloat16_rn(x); }
__device__ __forceinline__ void store(__half* dst, float x) { *dst = __float2half_rn(x); }

template <typename T>
__global__ void fill_normal_kernel(T* dst, int64_t count, uint64_t seed) {
  const int64_t pairs = (count + 1) / 2;
  for (int64_t p = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; p < pairs;
       p += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float2 v = normal_pair(seed, p);
    store(dst + 2 * p, v.x);
    if (2 * p + 1 < count) store(dst + 2 * p + 1, v.y);
  }
}

template <typename T>
void launch(void* dst, int64_t count, uint64_t seed, cudaStream_t stream) {
  constexpr int kThreads = 256;
  constexpr int64_t kMaxBlocks = 8192;  // grid-stride beyond this
  const int64_t pairs = (count + 1) / 2;
  const int64_t blocks = std::min<int64_t>(kMaxBlocks, (pairs + kThreads - 1) / kThreads);
  fill_normal_kernel<T><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(static_cast<T*>(dst),
                                                                                count, seed);
  OPENMLA_CUDA_CHECK(cudaGetLastError());
}

__global__ void gather_rows_kernel(uint8_t* dst, const uint8_t* src, int64_t row_bytes, const int32_t* rows,
                                   int64_t count) {
  for (int64_t i = blockIdx.x; i < count; i += gridDim.x) {
    const uint8_t* from = src + static_cast<int64_t>(rows[i]) * row_bytes;
    for (int64_t k = threadIdx.x; k < row_bytes; k += blockDim.x) dst[i * row_bytes + k] = from[k];
  }
}

}  // namespace

void gather_rows(void* dst, const void* src, int64_t row_bytes, const int32_t* rows, int64_t count,
                 cudaStream_t stream) {
  if (count <= 0) return;
  constexpr int kThreads = 128;
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(count, 65535));
  gather_rows_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<uint8_t*>(dst), static_cast<const uint8_t*>(src),
                                                      row_bytes, rows, count);
  OPENMLA_CUDA_CHECK(cudaGetLastError());
}

void fill_normal(void* dst, DType dtype, int64_t count, uint64_t seed, cudaStream_t stream) {
  if (count <= 0) return;
  switch (dtype) {
    case DType::kBFloat16: return launch<__nv_bfloat16>(dst, count, seed, stream);
    case DType::kFloat16: return launch<__half>(dst, count, seed, stream);
    case DType::kFloat32: return launch<float>(dst, count, seed, stream);
    default: break;
  }
  detail::fail_arg("fill_normal dtype", "bf16, fp16 or float32", dtype_name(dtype));
}

}  // namespace openmla::bench
