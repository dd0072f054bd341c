// Synchronisation and addressing shared by every kernel, whatever its architecture: shared-memory
// addresses, named barriers, and programmatic dependent launch (griddepcontrol, a no-op before sm_90).
#pragma once

#include <cstdint>

namespace openmla::kernels {

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
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

// A barrier the two sides reach at different instructions. Not `.aligned` (bar.arrive / bar.sync are):
// synccheck reports the aligned forms when the sides' instructions differ. The kernels wait on both
// sides (named_barrier_wait); a one-way handoff (one side only arrives) is ordered just as well by the
// PTX memory model, but racecheck does not model it (docs/sanitizers.md, tests/sanitizer).
__device__ __forceinline__ void named_barrier_arrive(int id, int threads) {
  asm volatile("barrier.arrive %0, %1;" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_barrier_wait(int id, int threads) {
  asm volatile("barrier.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
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

}  // namespace openmla::kernels
