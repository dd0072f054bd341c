// Where the CTAs of a decode-shaped grid land: the SM (%smid) of each CTA, for a kernel with the narrow
// decode kernel's shape (160 threads, 97 KB of dynamic shared memory: two CTAs per SM) and the wide one's
// (384 threads, 200 KB: one per SM). It answers whether the first half of a 264-CTA grid spreads over
// the SMs or packs two CTAs per SM, which decides whether parts left empty at the end of a plan leave
// SMs idle.
// Result on the H200 (2026-12-02, bench/results/2026-12-02-h200-fp8-64row-swapped.md, run 7): the first
// 132 CTAs of a 1 x 264 grid cover 124 of the 132 SMs (consecutive CTAs go to different SMs).
// Built as build/openmla-cta-placement (sm_90a); run by hand on the GPU.
#include <cuda_runtime.h>

#include <cstdio>
#include <vector>

namespace {

__global__ void record_sm(int* smid, long long spin_cycles) {
  extern __shared__ char smem[];
  unsigned sm;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
  if (threadIdx.x == 0) {
    smid[blockIdx.y * gridDim.x + blockIdx.x] = static_cast<int>(sm);
    smem[0] = 1;
  }
  // Stay resident a while, as a decode CTA does, so that later CTAs cannot reuse the slot.
  const long long t0 = clock64();
  while (clock64() - t0 < spin_cycles) {
  }
}

int distinct(const std::vector<int>& sm, int begin, int end, int step) {
  std::vector<int> seen(1024, 0);
  int n = 0;
  for (int i = begin; i < end; i += step) n += seen[sm[i] & 1023]++ == 0;
  return n;
}

}  // namespace

int main() {
  struct Shape {
    int grid_x, grid_y, threads, smem_bytes;
    const char* name;
  };
  const Shape shapes[] = {{1, 264, 160, 97 * 1024, "narrow-like 1 x 264"},
                          {1, 132, 160, 97 * 1024, "narrow-like 1 x 132"},
                          {2, 132, 160, 97 * 1024, "narrow-like 2 x 132 (two m-tiles)"},
                          {1, 132, 384, 200 * 1024, "wide-like 1 x 132"}};
  int* d_sm = nullptr;
  if (cudaMalloc(&d_sm, 4096 * sizeof(int)) != cudaSuccess ||
      cudaFuncSetAttribute(record_sm, cudaFuncAttributeMaxDynamicSharedMemorySize, 220 * 1024) != cudaSuccess) {
    std::printf("CUDA setup failed: %s\n", cudaGetErrorString(cudaGetLastError()));
    return 1;
  }
  for (const Shape& s : shapes) {
    const int n = s.grid_x * s.grid_y;
    record_sm<<<dim3(s.grid_x, s.grid_y), s.threads, s.smem_bytes>>>(d_sm, 40000);
    if (cudaDeviceSynchronize() != cudaSuccess) {
      std::printf("%s: launch failed: %s\n", s.name, cudaGetErrorString(cudaGetLastError()));
      return 1;
    }
    std::vector<int> sm(n);
    cudaMemcpy(sm.data(), d_sm, n * sizeof(int), cudaMemcpyDeviceToHost);
    std::printf("%s: SMs of the first 40 CTAs:", s.name);
    for (int i = 0; i < 40 && i < n; ++i) std::printf(" %d", sm[i]);
    std::printf("\n  the first %d CTAs cover %d distinct SMs; every second CTA: %d\n", n / 2, distinct(sm, 0, n / 2, 1),
                distinct(sm, 0, n, 2));
  }
  cudaFree(d_sm);
  return 0;
}
