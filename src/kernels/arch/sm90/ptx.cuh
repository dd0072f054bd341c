// Named Hopper primitives (sm_90a): mbarriers, TMA tile loads, proxy fences, register reallocation and
// wgmma shared-memory descriptors. Thin wrappers over PTX so that the kernels read as their algorithm.
// (Named barriers and programmatic dependent launch: kernels/arch/sync.cuh.)
#pragma once

#include <cuda.h>  // CUtensorMap (type only; the map is encoded on the host)

#include <cstdint>

#include "kernels/arch/sync.cuh"  // smem_addr

namespace openmla::kernels::sm90 {

__device__ __forceinline__ void st_shared_v4(uint32_t addr, uint4 v) {
  asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};" ::"r"(addr), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
               : "memory");
}

// ---- mbarriers ---------------------------------------------------------------------------------

__device__ __forceinline__ void mbarrier_init(uint64_t* bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)), "r"(count));
}

// Makes barrier initialization visible to the async proxy (TMA) and to other threads.
__device__ __forceinline__ void fence_barrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

__device__ __forceinline__ void mbarrier_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_addr(bar)) : "memory");
}

// Arrives and announces `bytes` of asynchronous copies that complete on this phase.
__device__ __forceinline__ void mbarrier_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)), "r"(bytes)
               : "memory");
}

// Blocks until the phase with the given parity has completed.
__device__ __forceinline__ void mbarrier_wait(uint64_t* bar, uint32_t parity) {
  const uint32_t addr = smem_addr(bar);
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "wait_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra wait_%=;\n"
      "}\n" ::"r"(addr),
      "r"(parity)
      : "memory");
}

// Whether the phase with the given parity has completed, without waiting.
__device__ __forceinline__ bool mbarrier_test_wait(uint64_t* bar, uint32_t parity) {
  uint32_t done;
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "mbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2;\n"
      "selp.u32 %0, 1, 0, p;\n"
      "}\n"
      : "=r"(done)
      : "r"(smem_addr(bar)), "r"(parity)
      : "memory");
  return done != 0;
}

// ---- TMA ---------------------------------------------------------------------------------------

// L2 policy for streamed KV: read once per (m-tile group), evict first.
__device__ __forceinline__ uint64_t l2_evict_first_policy() {
  uint64_t policy;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  return policy;
}

// One box of a 3-D tensor map into shared memory, completing on `bar`.
__device__ __forceinline__ void tma_load_3d(void* dst, const CUtensorMap* map, int c0, int c1, int c2,
                                            uint64_t* bar, uint64_t policy) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
      " [%0], [%1, {%2, %3, %4}], [%5], %6;" ::"r"(smem_addr(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(smem_addr(bar)), "l"(policy)
      : "memory");
}

// One box of a 4-D tensor map into shared memory, completing on `bar`.
__device__ __forceinline__ void tma_load_4d(void* dst, const CUtensorMap* map, int c0, int c1, int c2, int c3,
                                            uint64_t* bar, uint64_t policy) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
      " [%0], [%1, {%2, %3, %4, %5}], [%6], %7;" ::"r"(smem_addr(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(smem_addr(bar)), "l"(policy)
      : "memory");
}

// The same with the default L2 policy.
__device__ __forceinline__ void tma_load_4d(void* dst, const CUtensorMap* map, int c0, int c1, int c2, int c3,
                                            uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3, %4, %5}], [%6];" ::"r"(smem_addr(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(smem_addr(bar))
      : "memory");
}

// Bytes [src, src + bytes) into L2 (bytes a multiple of 16, src 16-B aligned); no completion to wait for.
__device__ __forceinline__ void bulk_prefetch_l2(const void* src, uint32_t bytes) {
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(src), "r"(bytes) : "memory");
}

__device__ __forceinline__ void prefetch_tensor_map(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}

// ---- ordering ----------------------------------------------------------------------------------

// Generic-proxy shared-memory writes (st.shared, cp.async) made visible to wgmma / TMA.
__device__ __forceinline__ void fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// Four 8x8 b16 matrices from registers into shared memory (row addresses from lanes 8m..8m+7 for
// matrix m; lane t holds row t / 4, columns 2 (t % 4) and 2 (t % 4) + 1 of each).
__device__ __forceinline__ void stmatrix_x4(uint32_t smem_row_addr, const uint32_t (&r)[4]) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(smem_row_addr), "r"(r[0]),
               "r"(r[1]), "r"(r[2]), "r"(r[3])
               : "memory");
}

// ---- registers ---------------------------------------------------------------------------------

template <int kRegs>
__device__ __forceinline__ void warpgroup_reg_alloc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(kRegs));
}
template <int kRegs>
__device__ __forceinline__ void warpgroup_reg_dealloc() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(kRegs));
}

// ---- wgmma -------------------------------------------------------------------------------------

// Shared-memory matrix descriptor for a 128-byte-swizzled operand (the layout TMA's
// SWIZZLE_128B writes: 8 rows of 128 B form a 1024-B atom; 16-B chunk c of row r sits at c ^ (r % 8)).
//   K-major  (rows = M/N, 128 B of K per row): SBO = 1024 B between 8-row groups; LBO unused.
//            The k-th 16-element step of a 64-element row starts at +32 k bytes.
//   MN-major (rows = K, 128 B = 64 M/N elements per row): LBO = byte stride between 64-element
//            column blocks, SBO = 1024 B between 8-row (K) groups.
// The atom base must be 1024-B aligned (base_offset field 0).
__device__ __forceinline__ uint64_t sw128_desc(uint32_t smem_addr, uint32_t lbo_bytes, uint32_t sbo_bytes) {
  uint64_t d = 0;
  d |= static_cast<uint64_t>((smem_addr & 0x3FFFF) >> 4);
  d |= static_cast<uint64_t>((lbo_bytes >> 4) & 0x3FFF) << 16;
  d |= static_cast<uint64_t>((sbo_bytes >> 4) & 0x3FFF) << 32;
  d |= static_cast<uint64_t>(1) << 62;  // 128-byte swizzle
  return d;
}

// A descriptor of the operand `bytes` further on in shared memory. The address field is addr >> 4 in
// bits 0-13 and shared memory ends below 2^18 B, so the sum never carries into the next field, and the
// add is on the low word alone (a 64-bit add makes ptxas carry into the high word): one add per operand
// and wgmma, where re-encoding each address (mask, shift, or) costs about ten uniform instructions per
// wgmma. `bytes` must keep the operand's alignment.
__device__ __forceinline__ uint64_t desc_advance(uint64_t desc, uint32_t bytes) {
  const uint32_t lo = static_cast<uint32_t>(desc) + (bytes >> 4);
  return (desc & 0xFFFFFFFF00000000ull) | lo;
}

// The same for a 64-byte-swizzled K-major operand (TMA's SWIZZLE_64B: 8 rows of 64 B form a 512-B
// atom; 16-B chunk c of row r sits at c ^ ((r / 2) % 4)): SBO = 512 B between 8-row groups, LBO
// unused; the second 32-B k-step of a row starts at +32 B. The atom base must be 512-B aligned.
// 8-bit operands (one 64-B row = 64 e4m3 values = two k32 steps).
__device__ __forceinline__ uint64_t sw64_desc(uint32_t smem_addr) {
  uint64_t d = 0;
  d |= static_cast<uint64_t>((smem_addr & 0x3FFFF) >> 4);
  d |= static_cast<uint64_t>(1) << 16;              // LBO (unused by swizzled K-major layouts)
  d |= static_cast<uint64_t>(512 >> 4) << 32;       // SBO
  d |= static_cast<uint64_t>(2) << 62;              // 64-byte swizzle
  return d;
}

// Byte offset of 16-B chunk `chunk` (0..3) of row `row` in a 64-B swizzled box.
__device__ __forceinline__ int sw64_offset(int row, int chunk) {
  return row * 64 + ((chunk ^ ((row >> 1) & 3)) << 4);
}

// Byte offset of 16-B chunk `chunk` (0..7) of row `row` in a 128-B swizzled box (the layout above).
__device__ __forceinline__ int sw128_offset(int row, int chunk) {
  return row * 128 + ((chunk ^ (row & 7)) << 4);
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int kPending>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(kPending) : "memory");
}

// Keeps the compiler from moving accumulator reads/writes across asynchronous wgmma issue/wait.
template <int N>
__device__ __forceinline__ void fence_operands(float (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i])::"memory");
}
template <int N>
__device__ __forceinline__ void fence_operands(uint32_t (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+r"(r[i])::"memory");
}

// x, as a value the compiler cannot compute ahead of this point: what derives from it stays here instead of being
// hoisted to the kernel's start and held (or spilled) through the tile loop.
__device__ __forceinline__ int opaque(int x) {
  asm volatile("" : "+r"(x));
  return x;
}

}  // namespace openmla::kernels::sm90
