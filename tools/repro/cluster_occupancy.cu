// How many thread-block clusters of a decode kernel's shape run at once: cudaOccupancyMaxActiveClusters for
// cluster sizes 1, 2, 4 and 8 with one CTA per SM (the FP8-math kernel's threads and dynamic shared memory,
// from its config: 384 threads and 224,256 B when measured). It decides whether m-tile CTAs that read the same
// pages can be grouped into clusters (to share the FP8-math kernel's V^T transposition through distributed shared
// memory, docs/hopper-kernel.md, "Where the time goes", step 8) without leaving SMs idle: a GPC whose SM count
// is not a multiple of the cluster size keeps the remainder idle, and a grid of more clusters than fit runs a
// second wave.
// Result on the H200 (2026-12-02, bench/results/2026-12-02-h200-fp8-math-ceilings.md, run 2): clusters of 2 use
// all 132 SMs (66 at once); clusters of 4 and 8 only 120 (30 and 15 at once).
// Built as build/openmla-cluster-occupancy (sm_90a); run by hand on the GPU.
#include <cuda_runtime.h>

#include <cstdio>

#include "kernels/sm90/decode/fp8_math_config.h"

namespace {

__global__ void cluster_shaped(int* out) {
  extern __shared__ char smem[];
  if (threadIdx.x == 0) {
    smem[0] = 1;
    out[blockIdx.x] = smem[0];
  }
}

}  // namespace

int main() {
  constexpr int kThreads = openmla::kernels::sm90::Fp8MathConfig::kThreads;
  constexpr int kSmemBytes = static_cast<int>(openmla::kernels::sm90::kFp8MathSmemBytes);
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  if (cudaFuncSetAttribute(cluster_shaped, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes) != cudaSuccess ||
      cudaFuncSetAttribute(cluster_shaped, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) != cudaSuccess) {
    std::printf("CUDA setup failed: %s\n", cudaGetErrorString(cudaGetLastError()));
    return 1;
  }
  std::printf("%d SMs; %d threads and %d B of dynamic shared memory per CTA\n", sms, kThreads, kSmemBytes);
  for (int size : {1, 2, 4, 8}) {
    cudaLaunchConfig_t config = {};
    config.gridDim = dim3(size * sms, 1, 1);
    config.blockDim = dim3(kThreads, 1, 1);
    config.dynamicSmemBytes = kSmemBytes;
    cudaLaunchAttribute attribute = {};
    attribute.id = cudaLaunchAttributeClusterDimension;
    attribute.val.clusterDim.x = size;
    attribute.val.clusterDim.y = 1;
    attribute.val.clusterDim.z = 1;
    config.attrs = &attribute;
    config.numAttrs = 1;
    int clusters = 0;
    const cudaError_t err = cudaOccupancyMaxActiveClusters(&clusters, cluster_shaped, &config);
    if (err != cudaSuccess) {
      std::printf("cluster size %d: %s\n", size, cudaGetErrorString(err));
      continue;
    }
    std::printf("cluster size %d: %d clusters at once = %d of %d SMs busy\n", size, clusters, clusters * size, sms);
  }
  return 0;
}
