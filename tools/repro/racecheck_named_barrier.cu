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
//   6: the 32-row kernel's merge at its own size: per segment, consumer 1 hands 64 floats per thread
//      to consumer 0 in two rounds through the same 32 KB (write, bar.sync, read, bar.sync), and every
//      warp's lane 0 publishes a word that all 256 threads read after a bar.sync (load_q's q_amax);
//      8 segments, the producer exited, setmaxnreg as in the kernel.
//   7: variant 6 with the kernel's producer: one warp stays (polling, ~50 us) while the other three exit.
//   8: variant 6 plus, per segment, a barrier of each consumer warpgroup alone (`bar.sync 2 + wg, 128`,
//      the id in a register, as the narrow kernel's softmax and row sums compile).
// Result on the H200 (CUDA 13.0, 2026-12-01): variants 6, 7 and 8 compute the right sum with 0 hazards. The
// 32-row kernel's reports are the tool's ordering of its records: its --racecheck-trace-sync trace shows a
// writer warp's post-barrier accesses processed before the reader warps' arrivals at that barrier
// (docs/hopper-kernel.md, "The narrow kernel"; scripts/racecheck_known.py).
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

// Variant 6. out = consumer 0's sum of everything consumer 1 handed over, plus the words' maxima.
__global__ void __launch_bounds__(384, 1) merge_rounds(float* out, int segments, bool one_producer_warp_stays,
                                                       bool own_barriers) {
  __shared__ float buffer[64 * 128];
  __shared__ float word[8];
  const int wg = threadIdx.x / 128, tw = threadIdx.x % 128, t = threadIdx.x;
  if (wg == 2) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::: "memory");
    if (one_producer_warp_stays && tw / 32 == 0)
      for (int i = 0; i < 500; ++i) __nanosleep(100);
    return;
  }
  asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory");
  float acc = 0.f;
  for (int seg = 0; seg < segments; ++seg) {
    bar_sync(1, 256);
    if (t % 32 == 0) word[t / 32] = static_cast<float>(seg + t / 32);
    bar_sync(1, 256);
    float m = 0.f;
#pragma unroll
    for (int w = 0; w < 8; ++w) m = fmaxf(m, word[w]);
    acc += m;
    if (own_barriers) bar_sync(2 + __shfl_sync(0xffffffffu, wg, 0), 128);
    float o[64];
#pragma unroll
    for (int i = 0; i < 64; ++i) o[i] = static_cast<float>(seg * 64 + i + tw);
    bar_sync(1, 256);
#pragma unroll
    for (int round = 0; round < 2; ++round) {
      if (wg == 1) {
#pragma unroll
        for (int i = 0; i < 32; ++i) buffer[i * 128 + tw] = o[32 * round + i];
      }
      bar_sync(1, 256);
      if (wg == 0) {
#pragma unroll
        for (int i = 0; i < 32; ++i) acc += buffer[i * 128 + tw];
      }
      bar_sync(1, 256);
    }
  }
  if (wg == 0) out[blockIdx.x * 128 + tw] = acc;
}

int main(int argc, char** argv) {
  const int variant = argc > 1 ? atoi(argv[1]) : 0;
  const int blocks = 4, rounds = 8;
  float* out = nullptr;
  cudaMalloc(&out, blocks * 128 * sizeof(float));
  if (variant >= 6) {
    merge_rounds<<<blocks, 384>>>(out, rounds, variant == 7, variant == 8);
  } else if (variant >= 4) {
    seesaw_handoffs<<<blocks, 384>>>(out, rounds, variant == 5);
  } else {
    handoff<<<blocks, variant == 2 ? 256 : 384>>>(out, rounds, variant == 0, variant == 3);
  }
  const cudaError_t err = cudaDeviceSynchronize();
  float host[128];
  cudaMemcpy(host, out, sizeof(host), cudaMemcpyDeviceToHost);
  // Expected for thread 5: sum over r of (r * 128 + 5); variants 4, 5 (row 1): sum of (r * 64 + 1 + 1).
  float expect = 0.f;
  for (int r = 0; r < rounds; ++r) {
    if (variant >= 6) {  // thread 5: the words' max (r + 7), then sum over i of (r * 64 + i + 5)
      expect += static_cast<float>(r + 7);
      for (int i = 0; i < 64; ++i) expect += static_cast<float>(r * 64 + i + 5);
    } else {
      expect += variant >= 4 ? static_cast<float>(r * 64 + 2) : static_cast<float>(r * 128 + 5);
    }
  }
  std::printf("variant %d: %s, out[5] = %.0f (expected %.0f)\n", variant, cudaGetErrorString(err), host[5], expect);
  cudaFree(out);
  return err == cudaSuccess && host[5] == expect ? 0 : 1;
}
