// The online softmax's vocabulary, shared by the decode kernels: 2^x on the MUFU unit, the exp2 base of a
// row, the lazy-rescaling rule, reductions over the four lanes of an accumulator quad, and the running state
// of the rows a thread holds in a 64-row wgmma accumulator.
#pragma once

namespace openmla::kernels {

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

// Sum / max over the 4 lanes of a quad (the lanes that share an accumulator row).
__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

// Online-softmax state of the two accumulator rows a thread holds in an m64 wgmma fragment (rows g and g + 8
// of its warp's 16), in the sm90 wide and FP8-math kernels: m, the running max in raw score units (the same in
// both consumers; FP8 math: the running exponent base in log2 units, an integer), -inf until a key was seen;
// l, this consumer's share of the row's sum of weights, unreduced over the quad (the epilogue reduces it).
// The other kernels' fragments hold rows otherwise, so their state is their own: the portable kernel spreads a
// row's keys over several warps and keeps the state in shared memory; the sm90 narrow kernel's query rows are
// the wgmma's columns (kRows / 4 of them per thread), with ds_mla's scale beside them (narrow/softmax.cuh).
struct RowPairState {
  float m0 = -INFINITY, m1 = -INFINITY;
  float l0 = 0.f, l1 = 0.f;
};

}  // namespace openmla::kernels
