// The narrow kernel's shared vocabulary (kernel.cuh): named barriers, the wgmma shapes with the query rows as
// N, the operand descriptors, and where a thread's tokens and query rows sit in its fragments. The two data
// paths (fp8_operands.cuh: FP8 pages dequantized into registers; operands_16bit.cuh: 16-bit pages from
// shared memory), the softmax step (softmax.cuh) and the producer (producer.cuh) build on it.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "kernels/arch/sm90/ptx.cuh"
#include "kernels/arch/sm90/wgmma_ops.cuh"
#include "kernels/common/kv_kind.h"
#include "kernels/sm90/decode/narrow/config.h"

namespace openmla::kernels::sm90::narrow {

// Named barriers (0 is __syncthreads): all consumer threads, and one per consumer warpgroup.
inline constexpr int kBarNarrowConsumers = 1;
inline constexpr int kBarWarpgroup0 = 2;  // + the consumer index
inline constexpr int kTileTokens = 64;

// wgmma m64nNk16, A from registers, B K-major: N = the CTA's query rows.
template <typename T, int kRows>
__device__ __forceinline__ void wgmma_rows(float (&d)[kRows / 2], const uint32_t (&a)[4], uint64_t desc_b,
                                           bool accumulate) {
  if constexpr (kRows == 16) {
    wgmma_m64n16k16_rs<T>(d, a, desc_b, accumulate);
  } else {
    wgmma_m64n32k16_rs<T>(d, a, desc_b, accumulate);
  }
}

// wgmma m64nNk16, both operands from shared memory (16-bit pages); kTransA: A MN-major (V^T).
template <typename T, int kRows, bool kTransA>
__device__ __forceinline__ void wgmma_rows_ss(float (&d)[kRows / 2], uint64_t desc_a, uint64_t desc_b,
                                              bool accumulate) {
  if constexpr (kRows == 16) {
    if constexpr (kTransA) wgmma_m64n16k16_ss_ta<T>(d, desc_a, desc_b, accumulate);
    else wgmma_m64n16k16_ss<T>(d, desc_a, desc_b, accumulate);
  } else {
    if constexpr (kTransA) wgmma_m64n32k16_ss_ta<T>(d, desc_a, desc_b, accumulate);
    else wgmma_m64n32k16_ss<T>(d, desc_a, desc_b, accumulate);
  }
}

// The type P^T is stored in: the cache's own for 16-bit pages (both PV operands alike), fp16 for FP8.
template <typename T, int kKind>
using NarrowPType = std::conditional_t<kKind == kKv16Bit, T, __half>;

// ---- primitives --------------------------------------------------------------------------------

__device__ __forceinline__ void sts16(uint32_t addr, uint16_t v) {
  asm volatile("st.shared.b16 [%0], %1;" ::"r"(addr), "h"(v));
}

// Q^T (B of S^T, K-major: kRows rows x 64 dims per box) and P^T (B of O^T, K-major: kRows rows x 64
// tokens) descriptors: the k-step's is the first one plus a constant (the address field counts 16 B).
template <int kRows>
struct Descriptors {
  uint64_t q, p;
  __device__ uint64_t q_step(int ks) const {
    return desc_advance(q, (ks / 4) * NarrowConfig<kRows>::kQBoxBytes + (ks % 4) * 32);
  }
  // P^T buffer `buf` (NarrowSharedStorage::p), k-step kk.
  __device__ uint64_t p_step(int buf, int kk) const {
    return desc_advance(p, buf * kRows * 128 + kk * 32);
  }
};


// A thread's place in its consumer warpgroup's fragments.
struct Lane {
  int warp, g, c;  // warp inside the warpgroup
  int tok0, tok1;  // its two token rows of S^T: 16 warp + g, + 8
};


// ---- the fragments' query rows ---------------------------------------------------------------

// The thread's query rows (columns of S^T / O^T): n8 * 8 + 2c + e, index i = 2 n8 + e, and the
// position of row i's token-0 score in S^T (token 1's is 2 further).
__device__ __forceinline__ int row_of(int i, int c) { return (i / 2) * 8 + 2 * c + (i % 2); }
__device__ __forceinline__ int score_of(int i) { return (i / 2) * 4 + (i % 2); }

}  // namespace openmla::kernels::sm90::narrow
