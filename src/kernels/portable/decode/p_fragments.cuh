// P (the softmax numerators, M rows x N tokens in shared memory) as mma.sync A fragments: shared
// by both PV products (16-bit V by ldmatrix, quantized V converted in registers).
#pragma once

#include <cstdint>

#include "kernels/arch/sm80.cuh"
#include "kernels/portable/decode/layout.cuh"

namespace openmla::kernels::portable {

// A fragments of k-step ks (16 tokens) for a warp's kPvRows / 16 row tiles.
template <class Cfg>
__device__ __forceinline__ void load_p_fragments(const void* sp, int warp_m, int lane, int ks,
                                                 uint32_t (&a)[Cfg::kPvRows / 16][4]) {
  const char* p_base = static_cast<const char*>(sp);
  const int p_row = warp_m * Cfg::kPvRows + (lane % 8) + ((lane / 8) % 2) * 8;
#pragma unroll
  for (int i = 0; i < Cfg::kPvRows / 16; ++i)
    ldmatrix_x4(a[i], p_base + p_chunk_offset<Cfg>(p_row + i * 16, 2 * ks + lane / 16));
}

}  // namespace openmla::kernels::portable
