// Reduced reproducer for compute-sanitizer racecheck and named barriers (the 32-row narrow kernel's
// merge): two consumer warpgroups hand data through shared memory between `bar.sync 1, 256`s while a
// third warpgroup (the producer) has already exited, as in narrow_kernel.cuh. Every access below is
// ordered by the barriers, so a racecheck report on this program would be the tool's, not a race.
// Result on the H200 (compute-sanitizer of CUDA 13.0, 2026-11-29): 0 hazards in all four variants, so
// named barriers with a partial thread count, an exited warpgroup and setmaxnreg are modelled
// correctly, and the 32-row kernel's report is not explained by them (docs/hopper-kernel.md).
// Built as build/openmla-racecheck-named-barrier (sm_90a). Run on Hopper:
//   compute-sanitizer --tool racecheck build/openmla-racecheck-named-barrier <variant 0|1|2|3>
//   0: producer warpgroup exits at once (the narrow kernel's layout), barrier count 256
//   1: the same with the producer warpgroup staying to the end (it never touches barrier 1)
//   2: only the two consumer warpgroups launched (no third warpgroup), barrier count 256
//   3: as 1, with the narrow kernel's register rebalancing (setmaxnreg: producer 40, consumers 232)
#include <cstdio>
#include <cstdlib>

__device__ __forceinline__ void bar_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

__global__ void __launch_bounds__(384, 1) handoff(float* out, int rounds, bool producer_exits, bool rebalance) {
  __shared__ float buffer[128];
  const int wg = threadIdx.x / 128, tw = threadIdx.x % 128;
  if (rebalance) {
    if (wg == 2) {
      asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::: "memory");
    } else {
      asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory");
    }
  }
  if (wg == 2) {  // producer
    if (producer_exits) return;
    for (int i = 0; i < 1000; ++i) __nanosleep(100);
    return;
  }
  float acc = 0.f;
  for (int r = 0; r < rounds; ++r) {
    if (wg == 1) buffer[tw] = static_cast<float>(r * 128 + tw);  // consumer 1 writes
    bar_sync(1, 256);
    if (wg == 0) acc += buffer[tw];  // consumer 0 reads what the thread at its position wrote
    bar_sync(1, 256);
  }
  if (wg == 0) out[blockIdx.x * 128 + tw] = acc;
}

int main(int argc, char** argv) {
  const int variant = argc > 1 ? atoi(argv[1]) : 0;
  const int blocks = 4, rounds = 8;
  float* out = nullptr;
  cudaMalloc(&out, blocks * 128 * sizeof(float));
  handoff<<<blocks, variant == 2 ? 256 : 384>>>(out, rounds, variant == 0, variant == 3);
  const cudaError_t err = cudaDeviceSynchronize();
  float host[128];
  cudaMemcpy(host, out, sizeof(host), cudaMemcpyDeviceToHost);
  // Expected for thread 5: sum over r of (r * 128 + 5).
  float expect = 0.f;
  for (int r = 0; r < rounds; ++r) expect += static_cast<float>(r * 128 + 5);
  std::printf("variant %d: %s, out[5] = %.0f (expected %.0f)\n", variant, cudaGetErrorString(err), host[5], expect);
  cudaFree(out);
  return err == cudaSuccess && host[5] == expect ? 0 : 1;
}
