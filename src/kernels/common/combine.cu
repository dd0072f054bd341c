// Combine: merges the partial (normalized o_i, lse_i) results of a split request by LSE:
//   lse = log(sum_i exp(lse_i)),   out = sum_i exp(lse_i - lse) * o_i.
// Empty partials (lse_i = -inf, every key masked) weigh 0; all empty -> out 0, lse -inf.
// A NaN partial (a guarded bad input) makes the row NaN: fmaxf would silently drop it.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/common/launch.h"
#include "kernels/common/mma_sm80.cuh"

namespace openmla::kernels {
namespace {

constexpr int kWarps = 8;         // one warp per query row
constexpr int kMaxSplitsInSmem = 64;

template <typename T>
__global__ void __launch_bounds__(kWarps * 32) combine_kernel(DecodeParams p) {
  wait_for_preceding_grids();  // partials come from the decode kernel
  const int req = blockIdx.y;
  const RequestSplit split = p.splits[req];
  if (split.num_splits <= 1) return;  // written directly by the decode kernel
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int row = blockIdx.x * kWarps + warp;
  if (row >= p.rows) return;

  __shared__ float weights[kWarps][kMaxSplitsInSmem];
  const int n = split.num_splits;
  const size_t slot0 = static_cast<size_t>(split.partial_base);

  // Max and NaN over the partial LSEs (lanes stride over splits).
  float m = -INFINITY;
  bool has_nan = false;
  for (int i = lane; i < n; i += 32) {
    const float l = p.lse_partial[(slot0 + i) * p.rows + row];
    has_nan |= isnan(l);
    m = fmaxf(m, l);
  }
  for (int o = 16; o > 0; o /= 2) {
    m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  }
  has_nan = __any_sync(0xffffffffu, has_nan);
  float sum = 0.f;
  for (int i = lane; i < n; i += 32) {
    const float l = p.lse_partial[(slot0 + i) * p.rows + row];
    const float w = (m == -INFINITY) ? 0.f : __expf(l - m);
    if (i < kMaxSplitsInSmem) weights[warp][i] = w;
    sum += w;
  }
  for (int o = 16; o > 0; o /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  __syncwarp();

  const float inv = sum > 0.f ? 1.f / sum : 0.f;
  const float lse = has_nan ? NAN : (sum > 0.f ? m + logf(sum) : -INFINITY);

  // Each lane owns 16 of the 512 columns: 4 float4 reads per partial.
  float acc[16];
#pragma unroll
  for (int j = 0; j < 16; ++j) acc[j] = 0.f;
  // Unrolled so several partials' loads are in flight: a long request split over every SM has
  // 100+ partials and one dependent load at a time would make the combine slower than the attention.
#pragma unroll 4
  for (int i = 0; i < n; ++i) {
    const float w = (i < kMaxSplitsInSmem ? weights[warp][i]
                                          : (m == -INFINITY ? 0.f : __expf(p.lse_partial[(slot0 + i) * p.rows + row] - m))) * inv;
    const float4* src = reinterpret_cast<const float4*>(p.o_partial + ((slot0 + i) * p.rows + row) * 512);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float4 v = src[j * 32 + lane];
      acc[j * 4 + 0] += w * v.x;
      acc[j * 4 + 1] += w * v.y;
      acc[j * 4 + 2] += w * v.z;
      acc[j * 4 + 3] += w * v.w;
    }
  }

  const int qi = row / p.num_heads, head = row % p.num_heads;
  T* out = static_cast<T*>(p.out) + req * p.o_stride_b + qi * p.o_stride_s + head * p.o_stride_h;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int col = (j * 32 + lane) * 4;
    uint2 packed;
    packed.x = pack2<T>(has_nan ? NAN : acc[j * 4 + 0], has_nan ? NAN : acc[j * 4 + 1]);
    packed.y = pack2<T>(has_nan ? NAN : acc[j * 4 + 2], has_nan ? NAN : acc[j * 4 + 3]);
    *reinterpret_cast<uint2*>(out + col) = packed;
  }
  if (lane == 0) p.lse[req * p.lse_stride_b + qi * p.lse_stride_s + head * p.lse_stride_h] = lse;
}

}  // namespace

cudaError_t launch_combine(const DecodeParams& p, bool q_is_bf16, bool programmatic, cudaStream_t stream) {
  const dim3 grid((p.rows + kWarps - 1) / kWarps, p.batch);
  return q_is_bf16 ? launch_kernel(combine_kernel<__nv_bfloat16>, grid, kWarps * 32, 0, stream, programmatic, p)
                   : launch_kernel(combine_kernel<__half>, grid, kWarps * 32, 0, stream, programmatic, p);
}

}  // namespace openmla::kernels
