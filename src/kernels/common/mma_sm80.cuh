// Warp-level tensor-core and async-copy primitives available from sm_80 on (mma.sync, ldmatrix,
// cp.async). Fragment layouts: PTX ISA, "Matrix Fragments for mma.m16n8k16" and "ldmatrix".
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace openmla::kernels {

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 2^x with the MUFU instruction alone: exp2f adds a range test and a rescale for results below
// 2^-126, which the softmax flushes to zero just as well (they are < 1e-38 of the row's largest).
__device__ __forceinline__ float exp2_ftz(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// exp2 base for a softmax row: a row with no unmasked key yet keeps max -inf; use 0 so that
// exp2(-inf - base) = 0 instead of NaN.
__device__ __forceinline__ float softmax_base(float m) { return m == -INFINITY ? 0.f : m; }

// Lazy rescaling: a tile's weights are taken against the running max as it stands unless one would
// exceed 2^kLazyRescaleLog2 (the portable and sm90 narrow kernels then redo the tile with the rows' new
// max; the sm90 wide kernel, whose rows need no exchange, moves the max: lazy_running_max). P is stored
// as fp16 or bf16 and summed in fp32: 2^8 leaves both far from overflow.
inline constexpr float kLazyRescaleLog2 = 8.f;

// The largest weight exponent (log2 units) a row may take against its running max m without a redo:
// none while the row has no unmasked key yet (m = -inf), since its base is then a placeholder.
__device__ __forceinline__ float lazy_rescale_limit(float m) { return m == -INFINITY ? -INFINITY : kLazyRescaleLog2; }

// A row's running max after a tile whose own max (taken together with m_prev) is m: m_prev while the
// tile's weights against it stay within the limit, else m. (Written out: the same test through
// lazy_rescale_limit compiled the seesaw with 32 B of spills instead of 24.)
__device__ __forceinline__ float lazy_running_max(float m_prev, float m, float scale_log2) {
  return m_prev != -INFINITY && (m - m_prev) * scale_log2 <= kLazyRescaleLog2 ? m_prev : m;
}

// 16-byte global -> shared copy; bytes beyond src_bytes (0 or 16) are zero-filled, so a masked
// token costs no global read and lands as zeros.
__device__ __forceinline__ void cp_async_16(void* smem_dst, const void* gmem_src, bool valid) {
  const int src_bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(smem_dst)),
               "l"(gmem_src), "r"(src_bytes));
}
// Named barriers (id 0 is __syncthreads): waits until `threads` threads (whole warps) have arrived at
// barrier `id`. Pass an id that is a constant after inlining: for an id ptxas cannot fold it reserves
// all 16 of the CTA's barriers.
__device__ __forceinline__ void named_barrier_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

// named_barrier_sync that also returns whether `pred` holds in any of the participating threads.
__device__ __forceinline__ bool named_barrier_sync_or(int id, int threads, bool pred) {
  uint32_t any;
  asm volatile(
      "{\n .reg .pred p, q;\n setp.ne.u32 p, %1, 0;\n bar.red.or.pred q, %2, %3, p;\n selp.u32 %0, 1, 0, q;\n}"
      : "=r"(any)
      : "r"(static_cast<uint32_t>(pred)), "r"(id), "r"(threads)
      : "memory");
  return any != 0;
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
}

// Four 8x8 b16 matrices; lane l supplies the row address of matrix l / 8.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* row_addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(row_addr)));
}
// Same, from a 32-bit shared-memory address (lets base + constant offsets fold into the instruction).
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t smem_row_addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_row_addr));
}
__device__ __forceinline__ void ldmatrix_x2(uint32_t (&r)[2], uint32_t smem_row_addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(smem_row_addr));
}
__device__ __forceinline__ void ldmatrix_x2(uint32_t (&r)[2], const void* row_addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(smem_addr(row_addr)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t smem_row_addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_row_addr));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* row_addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(row_addr)));
}

// D(16x8, f32) += A(16x16, row) * B(16x8, col) for bf16 or fp16 operands.
template <typename T>
__device__ __forceinline__ void mma_16x8x16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1);

template <>
__device__ __forceinline__ void mma_16x8x16<__nv_bfloat16>(float (&d)[4], const uint32_t (&a)[4],
                                                           uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
template <>
__device__ __forceinline__ void mma_16x8x16<__half>(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                                    uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Two floats -> one packed pair of T (low half = first).
template <typename T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi);
template <>
__device__ __forceinline__ uint32_t pack2<__nv_bfloat16>(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}
template <>
__device__ __forceinline__ uint32_t pack2<__half>(float lo, float hi) {
  __half2 v = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}
// The inverse: one packed pair of T -> two floats (x = low half).
template <typename T>
__device__ __forceinline__ float2 unpack2(uint32_t v);
template <>
__device__ __forceinline__ float2 unpack2<__nv_bfloat16>(uint32_t v) {
  return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&v));
}
template <>
__device__ __forceinline__ float2 unpack2<__half>(uint32_t v) {
  return __half22float2(*reinterpret_cast<const __half2*>(&v));
}

// Programmatic dependent launch (sm_90+): wait until the grids this one depends on have finished
// and their writes are visible. A no-op when the launch was not programmatic or before sm_90.
__device__ __forceinline__ void wait_for_preceding_grids() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

// Programmatic dependent launch: lets the next kernel in the stream (the combine) be scheduled now.
// It still waits (griddepcontrol.wait) for this whole grid to finish before it reads anything, so
// calling this early only hides the dependent's launch latency.
__device__ __forceinline__ void allow_dependent_grids() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

// Sum / max over the 4 lanes of a quad (the lanes that share an accumulator row).
__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

}  // namespace openmla::kernels
