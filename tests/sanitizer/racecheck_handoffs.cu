// compute-sanitizer racecheck on the barrier handoffs of the sm90 kernels (docs/sanitizers.md). Every
// shared-memory access here is ordered by the PTX memory model, so a hazard that racecheck reports on this program
// is the tool's view, not a race. Each mode checks its own result and exits non-zero when it is wrong.
//
//   two-sided   Two consumer warpgroups hand a row word back and forth through shared memory; both sides of every
//               handoff wait (barrier.sync on a named barrier of 256 threads). racecheck reports nothing.
//   one-sided   The same, but the writer only arrives (barrier.arrive) and the reader waits (barrier.sync). PTX
//               orders the writer's accesses before the reader's later ones (the arrive synchronizes with the sync
//               that completes the barrier); racecheck does not take the arrive into account and reports hazards in
//               both directions. The kernels hand data between warpgroups with two-sided barriers only.
//   merge FLAGS [CTAS SEGMENTS TILES UNEVEN]
//               The 32-row narrow kernel's consumer handoffs at their own sizes, per segment: lane 0 of each consumer
//               warp publishes a word that all 256 consumer threads read (load_q's |q| maximum); consumer 1 hands
//               its row statistics, then 64 floats a thread in each of two rounds through a 32 KB buffer, to
//               consumer 0 (write, bar.sync 1 256, read, bar.sync 1 256). As in the kernel, the producer warpgroup
//               gives registers to the consumers (setmaxnreg) and two of its warps exit at once. FLAGS (a sum) add
//               the kernel's surroundings: 1 the page pipeline (one lane copies pages with cp.async.bulk into four
//               stages on mbarriers, a second warp waits for each page, zeroes tail rows and releases it; the
//               consumers wait, read the stage and release it), 2 wgmma reading the merge buffer as its B operand,
//               4 a bar.red.or per tile on the warpgroup's own barrier (id in a register), 8 consumer 0 computing
//               longer than consumer 1 around the merge, 16 Q^T stored into the buffer at each segment's start,
//               32 a producer warp polling an mbarrier until the consumers finish, 64 per-warp row sums through
//               shared memory, 128 griddepcontrol at the start. Defaults: 132 CTAs, 8 segments of 4 tiles.
//   probe       Exits 0 on an sm_90 GPU, 77 otherwise (racecheck_handoffs.sh skips then).
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

// The library's own primitives, so that the handoffs here are the instructions the kernels issue.
#include "kernels/arch/sm90/ptx.cuh"
#include "kernels/arch/sync.cuh"

namespace {

using namespace openmla::kernels;
using namespace openmla::kernels::sm90;

constexpr unsigned kPipeline = 1;  // copy warp (cp.async.bulk, mbarriers), finish warp; consumers wait, read, release
constexpr unsigned kWgmma = 2;     // each tile: wgmma reads the merge buffer as its B operand (Q^T)
constexpr unsigned kBarRed = 4;    // each tile: bar.red.or.pred on the warpgroup's own barrier (id in a register)
constexpr unsigned kUneven = 8;    // consumer 0 computes longer than consumer 1 before the merge's barriers
constexpr unsigned kQStore = 16;   // each segment starts by writing the merge buffer (st.shared + fence.proxy.async)
constexpr unsigned kSpin = 32;     // producer warp 9 polls an mbarrier (test_wait) until the consumers finish
constexpr unsigned kRowSums = 64;  // per segment: per-warp row sums through shared memory, warpgroup barrier
constexpr unsigned kPdl = 128;     // griddepcontrol.wait and .launch_dependents at the start, as every decode kernel

constexpr int kStages = 4;
constexpr int kStageBytes = 36864;
constexpr int kBufferBytes = 9 * 32 * 128;  // Q^T of 32 rows; the merge passes 64 floats x 128 threads = 32 KB

struct __align__(1024) Smem {
  uint8_t stage[kStages][kStageBytes];
  uint8_t buffer[kBufferBytes];
  float red[2][4][32];
  float word[8];
  float merge[3][32];
  uint64_t full[kStages], ready[kStages], empty[kStages];
  uint64_t done;
};

__device__ __forceinline__ void bulk_copy(void* dst, const void* src, uint32_t bytes, uint64_t* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                   smem_addr(dst)),
               "l"(src), "r"(bytes), "r"(smem_addr(bar))
               : "memory");
}

__device__ __forceinline__ void wgmma_m64n32k16(float (&d)[16], const uint32_t (&a)[4], uint64_t desc_b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}, "
      "{%16, %17, %18, %19}, %20, p, 1, 1, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
        "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b));
}

__device__ __forceinline__ float busy(float x, int iters) {
  for (int i = 0; i < iters; ++i) x = fmaf(x, 0.999f, 0.001f);
  return x;
}

// The 32-row narrow kernel's consumer handoffs (merge mode). out: consumer 0's sum of what it was handed (checked
// by the host); junk: what the surroundings computed, stored so that they are not optimized away.
__global__ void __launch_bounds__(384, 1) merge_kernel(unsigned* out, float* junk, const uint8_t* src, int segments,
                                                       int tiles, unsigned flags, int uneven_iters) {
  extern __shared__ uint8_t smem_raw[];
  Smem& sm = *reinterpret_cast<Smem*>(smem_raw + ((1024u - (smem_addr(smem_raw) & 1023u)) & 1023u));
  const int warp = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x / 32), 0);
  const int lane = threadIdx.x % 32;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbarrier_init(&sm.full[s], 1);
      mbarrier_init(&sm.ready[s], 32);
      mbarrier_init(&sm.empty[s], 128);
    }
    mbarrier_init(&sm.done, 256);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (flags & kPdl) {
    asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  }
  const int total_tiles = segments * tiles;

  if (warp >= 8) {  // the producer warpgroup: warp 8 copies, warp 9 finishes (or polls), warps 10-11 exit
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::: "memory");
    const int role = warp - 8;
    if ((flags & kPipeline) && role == 0) {
      if (lane == 0) {
        for (int i = 0; i < total_tiles; ++i) {
          const int stage = i % kStages;
          mbarrier_wait(&sm.empty[stage], ((i / kStages) & 1) ^ 1);
          mbarrier_arrive_expect_tx(&sm.full[stage], kStageBytes);
          bulk_copy(sm.stage[stage], src + static_cast<size_t>((blockIdx.x + i) % 64) * kStageBytes, kStageBytes,
                    &sm.full[stage]);
        }
      }
    } else if ((flags & kPipeline) && role == 1) {
      for (int i = 0; i < total_tiles; ++i) {
        const int stage = i % kStages;
        mbarrier_wait(&sm.full[stage], (i / kStages) & 1);
        if (i % 3 == 0) {  // a request's last page: zero its last 8 rows in the four latent boxes
          for (int k = lane; k < 4 * 8 * 8; k += 32) {
            const int box = k / 64, row = 56 + (k / 8) % 8, chunk = k % 8;
            *reinterpret_cast<uint4*>(sm.stage[stage] + box * 8192 + row * 128 + chunk * 16) = make_uint4(0, 0, 0, 0);
          }
          fence_proxy_async();  // the stage is the bulk copy's again after this page
        }
        mbarrier_arrive(&sm.ready[stage]);
      }
    } else if ((flags & kSpin) && role == 1) {
      while (!mbarrier_test_wait(&sm.done, 0)) __nanosleep(20);
    }
    return;
  }

  asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory");
  const int t = threadIdx.x, me = warp / 4, tw = t % 128, w = warp % 4;
  float* buffer = reinterpret_cast<float*>(sm.buffer);
  float acc = 0.f;
  unsigned check = 0;
  uint32_t it = 0;  // the CTA's tile count: consumer it % 2 takes tile it, in stage it % kStages
  for (int seg = 0; seg < segments; ++seg) {
    named_barrier_sync(1, 256);  // the previous segment's readers of the buffer, the words and the statistics are done
    // load_q's |q| maximum: lane 0 of every warp publishes a word; every thread reads all eight.
    if (lane == 0) sm.word[warp] = static_cast<float>(seg + warp);
    named_barrier_sync(1, 256);
    float m = 0.f;
#pragma unroll
    for (int k = 0; k < 8; ++k) m = fmaxf(m, sm.word[k]);
    check += static_cast<unsigned>(m);
    if (flags & kQStore) {  // Q^T into the buffer, for wgmma
#pragma unroll
      for (int box = 0; box < 9; ++box)
        *reinterpret_cast<uint4*>(sm.buffer + box * 4096 + t * 16) = make_uint4(seg, box, t, 0x3c003c00u);
      fence_proxy_async();
    }
    named_barrier_sync(1, 256);

    float o[16];
#pragma unroll
    for (int i = 0; i < 16; ++i) o[i] = 0.f;
    for (int j = 0; j < tiles; ++j, ++it) {
      if (static_cast<int>(it % 2) != me) continue;
      const int stage = it % kStages;
      const uint32_t parity = (it / kStages) & 1;
      if (flags & kPipeline) {
        mbarrier_wait(&sm.full[stage], parity);
        mbarrier_wait(&sm.ready[stage], parity);
        const uint4 v = *reinterpret_cast<const uint4*>(sm.stage[stage] + (tw % 64) * 128 + (tw / 64) * 16 + w * 8192);
        acc += static_cast<float>(v.x & 0xff);
      }
      if (flags & kWgmma) {  // S^T-like: A from registers, B (K-major, 128-B swizzle) from the buffer
        const uint32_t a[4] = {0x3c003c00u, 0x3c003c00u, 0x3c003c00u, 0x3c003c00u};
        const uint64_t desc = sw128_desc(smem_addr(sm.buffer), 16, 1024);
        asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
        for (int ks = 0; ks < 4; ++ks) wgmma_m64n32k16(o, a, desc + ks * 2);
        asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
#pragma unroll
        for (int i = 0; i < 16; ++i) asm volatile("" : "+f"(o[i])::"memory");
      }
      if (flags & kPipeline) mbarrier_arrive(&sm.empty[stage]);  // this thread's reads of the stage are done
      if (flags & kBarRed) {
        if (named_barrier_sync_or(2 + me, 128, (lane + j) % 97 == 0)) acc += 1.f;
      }
      if ((flags & kUneven) && me == 0) acc = busy(acc, uneven_iters);
    }
    if (flags & kRowSums) {  // per-warp partial sums through shared memory, the warpgroup's own barrier
      if (lane % 4 == 0) sm.red[me][w][lane / 4] = acc;
      named_barrier_sync(2 + me, 128);
      acc += sm.red[me][0][lane / 4] + sm.red[me][3][lane / 4];
    }
    // The merge: consumer 1's row statistics, then 64 floats a thread in each of two rounds through the buffer,
    // stored [value][thread] so that each thread of consumer 0 reads what the thread at its position wrote.
    if (me == 1 && w == 0 && lane < 8) {
      sm.merge[0][lane] = static_cast<float>(seg + lane);
      sm.merge[1][lane] = o[0];
    }
    named_barrier_sync(1, 256);
    if (me == 0) {
      check += static_cast<unsigned>(sm.merge[0][lane % 8]);
      acc += sm.merge[1][lane % 8];
      if (flags & kUneven) acc = busy(acc, uneven_iters);
    }
#pragma unroll
    for (int round = 0; round < 2; ++round) {
      if (me == 1) {
#pragma unroll
        for (int i = 0; i < 64; ++i) buffer[i * 128 + tw] = static_cast<float>(seg * 128 + round * 64 + i);
        if (flags & kWgmma) fence_proxy_async();  // the buffer is wgmma's operand again in the next segment
      }
      named_barrier_sync(1, 256);
      if (me == 0) {
#pragma unroll
        for (int i = 0; i < 64; ++i) check += static_cast<unsigned>(buffer[i * 128 + tw]);
        if (flags & kUneven) acc = busy(acc, uneven_iters);
      }
      named_barrier_sync(1, 256);
    }
  }
  if (flags & kSpin) mbarrier_arrive(&sm.done);
  if (me == 0) out[blockIdx.x * 128 + tw] = check;
  junk[blockIdx.x * 256 + t] = acc;
}


// One-sided handoffs between two consumer warpgroups: consumer 0 writes a row word and arrives on barrier 7
// (barrier.arrive, no wait); consumer 1 waits there (barrier.sync), reads it, writes another word and arrives
// on barrier 8, where consumer 0 waits before reading that one. Every round, one lane per quad writes
// (after __syncwarp), all four lanes read. two_sided: both sides wait (barrier.sync), the control.
__global__ void __launch_bounds__(384, 1) one_sided_kernel(float* out, int rounds, bool two_sided) {
  __shared__ float row_a[64], row_b[64];
  const int wg = threadIdx.x / 128, tw = threadIdx.x % 128, lane = tw % 32;
  const int row = (tw / 32) * 16 + lane / 4;
  if (wg == 2) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::: "memory");
    return;
  }
  asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory");
  auto signal = [&](int id) {
    if (two_sided) {
      named_barrier_wait(id, 256);
    } else {
      named_barrier_arrive(id, 256);
    }
  };
  float acc = 0.f;
  for (int r = 0; r < rounds; ++r) {
    if (wg == 0) {
      __syncwarp();  // the quad's reads of the previous round are done
      if (lane % 4 == 0) row_a[row] = static_cast<float>(r * 64 + row);
      signal(7);
      named_barrier_wait(8, 256);
      acc += row_b[row];
    } else {
      named_barrier_wait(7, 256);
      const float a = row_a[row];
      __syncwarp();
      if (lane % 4 == 0) row_b[row] = a + 1.f;
      signal(8);
    }
  }
  if (wg == 0) out[blockIdx.x * 128 + tw] = acc;
}

}  // namespace

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "merge";
  if (std::strcmp(mode, "probe") == 0) {  // 0 with a Hopper GPU (the kernels are sm_90a), else 77
    int count = 0, major = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) return 77;
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0);
    return major == 9 ? 0 : 77;
  }
  if (std::strcmp(mode, "one-sided") == 0 || std::strcmp(mode, "two-sided") == 0) {
    const bool two_sided = mode[0] == 't';
    const int blocks = 4, rounds = 8;
    float* out = nullptr;
    cudaMalloc(&out, blocks * 128 * sizeof(float));
    one_sided_kernel<<<blocks, 384>>>(out, rounds, two_sided);
    const cudaError_t err = cudaDeviceSynchronize();
    float host[128];
    cudaMemcpy(host, out, sizeof(host), cudaMemcpyDeviceToHost);
    float expect = 0.f;  // thread 5 (row 1): sum over rounds of (r * 64 + 1) + 1
    for (int r = 0; r < rounds; ++r) expect += static_cast<float>(r * 64 + 2);
    std::printf("%s: %s, out[5] = %.0f (expected %.0f)\n", mode, cudaGetErrorString(err), host[5], expect);
    cudaFree(out);
    return err == cudaSuccess && host[5] == expect ? 0 : 1;
  }
  // merge FLAGS [BLOCKS] [SEGMENTS] [TILES] [UNEVEN_ITERS]
  const unsigned flags = argc > 2 ? static_cast<unsigned>(strtoul(argv[2], nullptr, 0)) : 0u;
  const int blocks = argc > 3 ? atoi(argv[3]) : 132;
  const int segments = argc > 4 ? atoi(argv[4]) : 8;
  const int tiles = argc > 5 ? atoi(argv[5]) : 4;
  const int uneven = argc > 6 ? atoi(argv[6]) : 200;
  unsigned* out = nullptr;
  float* junk = nullptr;
  uint8_t* src = nullptr;
  cudaMalloc(&out, static_cast<size_t>(blocks) * 128 * sizeof(unsigned));
  cudaMalloc(&junk, static_cast<size_t>(blocks) * 256 * sizeof(float));
  cudaMalloc(&src, static_cast<size_t>(64) * kStageBytes);
  cudaMemset(src, 0x38, static_cast<size_t>(64) * kStageBytes);
  const size_t smem = sizeof(Smem) + 1024;  // + the alignment slack
  cudaFuncSetAttribute(merge_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
  merge_kernel<<<blocks, 384, smem>>>(out, junk, src, segments, tiles, flags, uneven);
  const cudaError_t err = cudaDeviceSynchronize();
  std::vector<unsigned> host(static_cast<size_t>(blocks) * 128);
  cudaMemcpy(host.data(), out, host.size() * sizeof(unsigned), cudaMemcpyDeviceToHost);
  int wrong = 0;
  for (int b = 0; b < blocks; ++b)
    for (int tw = 0; tw < 128; ++tw) {
      unsigned expect = 0;  // per segment: the words' maximum, the statistic, the two rounds' values
      for (int seg = 0; seg < segments; ++seg) {
        expect += static_cast<unsigned>(seg + 7) + static_cast<unsigned>(seg + tw % 8);
        for (int k = 0; k < 128; ++k) expect += static_cast<unsigned>(seg * 128 + k);
      }
      wrong += host[static_cast<size_t>(b) * 128 + tw] != expect;
    }
  std::printf("merge flags 0x%x, %d CTAs x %d segments x %d tiles: %s, %d of %d sums wrong\n", flags, blocks, segments,
              tiles, cudaGetErrorString(err), wrong, blocks * 128);
  cudaFree(out);
  cudaFree(junk);
  cudaFree(src);
  return err == cudaSuccess && wrong == 0 ? 0 : 1;
}
