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
//   4: the seesaw's one-sided handoffs (kernel.cuh, consume_seesaw): consumer 0 writes a row word,
//      `barrier.arrive 7`; consumer 1 `barrier.sync 7`, reads it, writes another, `barrier.arrive 8`;
//      consumer 0 `barrier.sync 8` and reads that; every round, one lane per quad writing after a
//      __syncwarp, all four lanes reading, with the producer exited and setmaxnreg as in the kernel.
//      The PTX memory model orders each arrive before the completion of the sync it meets, and every
//      reuse passes such a pair, so a racecheck report here is the tool's.
//   5: variant 4 with both sides of each handoff waiting (`barrier.sync`), the control.
// Result on the H200 (CUDA 13.0, 2026-11-30, ed39053): variant 4 computes the right sum and racecheck reports
// 8 errors (both directions: row_a read against its write, row_b write against its read); variant 5: 0
// hazards; variant 3 again 0. So racecheck does not take a `barrier.arrive` as ordering the arriving
// thread's earlier accesses before the waiting side's later ones, which the PTX memory model does: the
// seesaw's reports on the same pattern are this (bench/results/2026-11-30-h200-sm90-seesaw.md).
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

__device__ __forceinline__ void barrier_arrive(int id, int threads) {
  asm volatile("barrier.arrive %0, %1;" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void barrier_sync(int id, int threads) {
  asm volatile("barrier.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

// Variants 4 and 5: the seesaw's handoff of the row max (rows as in the wgmma fragment: a quad of
// lanes shares a row). out = consumer 0's sum over rounds of what consumer 1 wrote for its row.
__global__ void __launch_bounds__(384, 1) seesaw_handoffs(float* out, int rounds, bool two_sided) {
  __shared__ float row_a[64], row_b[64];
  const int wg = threadIdx.x / 128, tw = threadIdx.x % 128, lane = tw % 32;
  const int row = (tw / 32) * 16 + lane / 4;
  if (wg == 2) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::: "memory");
    return;
  }
  asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory");
  auto signal = [&](int id) { if (two_sided) barrier_sync(id, 256); else barrier_arrive(id, 256); };
  float acc = 0.f;
  for (int r = 0; r < rounds; ++r) {
    if (wg == 0) {
      __syncwarp();  // the quad's reads of the previous round are done
      if (lane % 4 == 0) row_a[row] = static_cast<float>(r * 64 + row);
      signal(7);
      barrier_sync(8, 256);
      acc += row_b[row];
    } else {
      barrier_sync(7, 256);
      const float a = row_a[row];
      __syncwarp();
      if (lane % 4 == 0) row_b[row] = a + 1.f;
      signal(8);
    }
  }
  if (wg == 0) out[blockIdx.x * 128 + tw] = acc;
}

int main(int argc, char** argv) {
  const int variant = argc > 1 ? atoi(argv[1]) : 0;
  const int blocks = 4, rounds = 8;
  float* out = nullptr;
  cudaMalloc(&out, blocks * 128 * sizeof(float));
  if (variant >= 4) {
    seesaw_handoffs<<<blocks, 384>>>(out, rounds, variant == 5);
  } else {
    handoff<<<blocks, variant == 2 ? 256 : 384>>>(out, rounds, variant == 0, variant == 3);
  }
  const cudaError_t err = cudaDeviceSynchronize();
  float host[128];
  cudaMemcpy(host, out, sizeof(host), cudaMemcpyDeviceToHost);
  // Expected for thread 5: sum over r of (r * 128 + 5); variants 4, 5 (row 1): sum of (r * 64 + 1 + 1).
  float expect = 0.f;
  for (int r = 0; r < rounds; ++r) expect += variant >= 4 ? static_cast<float>(r * 64 + 2) : static_cast<float>(r * 128 + 5);
  std::printf("variant %d: %s, out[5] = %.0f (expected %.0f)\n", variant, cudaGetErrorString(err), host[5], expect);
  cudaFree(out);
  return err == cudaSuccess && host[5] == expect ? 0 : 1;
}
