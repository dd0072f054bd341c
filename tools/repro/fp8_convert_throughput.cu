// How fast an SM turns e4m3 pairs into f16 pairs, by each way the portable kernel can do it
// (common/fp8_registers.cuh). The portable FP8 path converts every K and V byte of a tile in
// registers; at the memory-bound rate of the H200 that is about 33 values per clock per SM, so the
// conversion pipe's rate decides whether the path can reach the copy ceiling (docs/portable-kernel.md).
// Each thread runs 8 independent chains (a conversion's output is the next one's input), 32 warps
// per SM; the SM's clock counter over the loop gives values converted per clock per SM.
// Built as build/openmla-fp8-convert-throughput (sm_90a); run on the GPU, no arguments.
// Result on the H200 (CUDA 13.0, 2026-12-01; every mode also runs one LOP3 + SHF per word to chain;
// measured with local copies of the fp8_registers.cuh functions, whose SASS has the same instructions
// in a slightly different order):
//   cvt.rn.f16x2.e4m3x2 (F2FP)                   63.4 values / clk / SM
//   prmt + lop (sm_80 path), with or without ×256 25.1 / 25.2
//   lop in place, no prmt                        36.2
//   half cvt, half lop in place                  45.5
// So cvt is the fastest way on sm_90, and the ~33 values / clk / SM that the copy ceiling asks of the
// portable FP8 path use half of it: conversions are not what holds that path (a timing-only build
// without them was not faster; bench/results/2026-12-01-h200-portable-fp8-splitk.md).
#include <cstdint>
#include <cstdio>

#include "kernels/common/fp8_registers.cuh"

namespace {

using namespace openmla::kernels;

// 1: the kernels' sm_89+ conversion, two cvt.rn.f16x2.e4m3x2 per word.
__device__ __forceinline__ void convert_cvt(uint32_t w, uint32_t& lo, uint32_t& hi) {
  lo = e4m3x2_to_f16x2_cvt<false>(w);
  hi = e4m3x2_to_f16x2_cvt<true>(w);
}
// 2 and 3: the kernels' sm_80 path (prmt, then sign | magnitude >> 1), times 256 or not (a scale that
// could be folded elsewhere).
__device__ __forceinline__ void convert_int_prmt(uint32_t w, uint32_t& lo, uint32_t& hi, bool scale) {
  lo = e4m3x2_to_f16x2_over_256<false>(w);
  hi = e4m3x2_to_f16x2_over_256<true>(w);
  if (scale) {
    lo = hmul2(lo, 0x5C005C00u);
    hi = hmul2(hi, 0x5C005C00u);
  }
}
// 4: an alternative the kernels do not use: no prmt, bytes 1 and 3 in place, bytes 0 and 2 shifted
// up by 8 (pairs (1, 3) and (0, 2)), / 256.
__device__ __forceinline__ void convert_int_inplace(uint32_t w, uint32_t& odd, uint32_t& even) {
  odd = (w & 0x80008000u) | ((w >> 1) & 0x3F803F80u);
  even = ((w << 8) & 0x80008000u) | ((w << 7) & 0x3F803F80u);
}

template <int kMode>
__global__ void __launch_bounds__(512) convert_loop(const uint32_t* in, uint32_t* out, int iters, long long* clocks) {
  uint32_t x[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) x[i] = in[(blockIdx.x * blockDim.x + threadIdx.x) * 8 + i];
  __syncthreads();
  const long long t0 = clock64();
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      uint32_t a, b;
      if constexpr (kMode == 1) {
        convert_cvt(x[i], a, b);
      } else if constexpr (kMode == 2) {
        convert_int_prmt(x[i], a, b, true);
      } else if constexpr (kMode == 3) {
        convert_int_prmt(x[i], a, b, false);
      } else if constexpr (kMode == 4) {
        convert_int_inplace(x[i], a, b);
      } else {  // 5: half the chains by cvt, half in place
        if (i % 2 == 0) {
          convert_cvt(x[i], a, b);
        } else {
          convert_int_inplace(x[i], a, b);
        }
      }
      x[i] = a ^ (b >> 3);  // both halves feed the next step; one xor+shift per word in every mode
    }
  }
  __syncthreads();
  const long long t1 = clock64();
  uint32_t acc = 0;
#pragma unroll
  for (int i = 0; i < 8; ++i) acc ^= x[i];
  out[blockIdx.x * blockDim.x + threadIdx.x] = acc;
  if (threadIdx.x == 0) clocks[blockIdx.x] = t1 - t0;
}

template <int kMode>
void measure(const char* name, int sms, const uint32_t* in, uint32_t* out, long long* clocks, long long* host) {
  const int blocks = 2 * sms, threads = 512, iters = 4096;
  convert_loop<kMode><<<blocks, threads>>>(in, out, 64, clocks);  // warm-up
  convert_loop<kMode><<<blocks, threads>>>(in, out, iters, clocks);
  cudaMemcpy(host, clocks, blocks * sizeof(long long), cudaMemcpyDeviceToHost);
  long long worst = 0;
  for (int b = 0; b < blocks; ++b) worst = host[b] > worst ? host[b] : worst;
  // 2 CTAs per SM; each thread converts 8 words of 4 values per iteration.
  const double values = 2.0 * threads * iters * 8 * 4;
  std::printf("%-44s %8.1f values/clk/SM (%lld clk)\n", name, values / static_cast<double>(worst), worst);
}

}  // namespace

int main() {
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  const int n = 2 * sms * 512 * 8;
  uint32_t *in = nullptr, *out = nullptr;
  long long* clocks = nullptr;
  cudaMalloc(&in, n * sizeof(uint32_t));
  cudaMalloc(&out, n * sizeof(uint32_t));
  cudaMalloc(&clocks, 2 * sms * sizeof(long long));
  cudaMemset(in, 0x35, n * sizeof(uint32_t));
  long long* host = new long long[2 * sms];
  std::printf("e4m3 -> f16 conversion throughput, %d SMs, 32 warps per SM, 8 chains per thread\n", sms);
  measure<1>("cvt.rn.f16x2.e4m3x2", sms, in, out, clocks, host);
  measure<2>("prmt + lop (sm_80 path) + mul.f16x2 by 256", sms, in, out, clocks, host);
  measure<3>("prmt + lop, scale folded elsewhere", sms, in, out, clocks, host);
  measure<4>("lop in place (pairs 1,3 / 0,2), no prmt", sms, in, out, clocks, host);
  measure<5>("half cvt, half lop in place", sms, in, out, clocks, host);
  const cudaError_t err = cudaDeviceSynchronize();
  if (err != cudaSuccess) {
    std::printf("CUDA error: %s\n", cudaGetErrorString(err));
    return 1;
  }
  delete[] host;
  return 0;
}
