// Which keys the rows of a 64 x 64 score tile may see, for the kernels whose CTA is one 64-row m-tile
// (grid x) and whose S accumulators are wgmma m64n64 fragments: the wide kernel and the FP8-math kernel.
#pragma once

#include "kernels/arch/sm90/ptx.cuh"
#include "kernels/common/decode_params.h"
#include "kernels/common/segment.cuh"

namespace openmla::kernels::sm90 {

inline constexpr int kMaskTileRows = 64;    // query rows of an m-tile: the wgmma M
inline constexpr int kMaskTileTokens = 64;  // keys of a tile: one page

// The CTA's m-tile: grid x (wide/instantiate.cuh, fp8_math/instantiate.cuh).
__device__ __forceinline__ int wide_m_tile() { return static_cast<int>(blockIdx.x); }

// Keys a row may see: < limit (seqlen, or the causal limit of the row's query token).
struct TileMask {
  int seqlen;
  int tile_min_limit;  // the m-tile's smallest limit (its first row's): tiles entirely below it need no mask

  __device__ __forceinline__ static TileMask of_segment(const DecodeParams& p, int seqlen, int m_tile) {
    TileMask m{seqlen, 0};
    m.tile_min_limit = m.limit(p, m_tile, 0);
    return m;
  }
  // Uniform: only a segment's last tile or two.
  __device__ __forceinline__ bool needs_mask(int first_token) const {
    return first_token + kMaskTileTokens > tile_min_limit;
  }
  // Row `row` of m-tile `m_tile`'s limit.
  __device__ __forceinline__ int limit(const DecodeParams& p, int m_tile, int row) const {
    return key_limit(p, seqlen, m_tile * kMaskTileRows + row);
  }
  // The same, computed where a tile needs it from values at hand there (the wide kernel: two rows' limits held
  // through its tile loop cost a spill around every softmax step, docs/hopper-kernel.md). The FP8-math kernel
  // holds them instead (limit above, once per segment): on its long compute-bound rows the recomputation costs
  // more than the registers.
  __device__ __forceinline__ int limit_here(const DecodeParams& p, int row) const {
    return limit(p, opaque(wide_m_tile()), row);
  }
};

// Scores of keys at or past their row's limit to -inf, in the m64n64 accumulator layout: this thread holds
// rows row0 (s[4 n + 0..1]) and row0 + 8 (s[4 n + 2..3]) at keys first_token + 8 n + 2 c + {0, 1}.
__device__ __forceinline__ void mask_scores(float (&s)[32], int first_token, int c, int limit0, int limit1) {
#pragma unroll
  for (int n8 = 0; n8 < 8; ++n8) {
    const int k = first_token + n8 * 8 + 2 * c;
    s[4 * n8 + 0] = k >= limit0 ? -INFINITY : s[4 * n8 + 0];
    s[4 * n8 + 1] = k + 1 >= limit0 ? -INFINITY : s[4 * n8 + 1];
    s[4 * n8 + 2] = k >= limit1 ? -INFINITY : s[4 * n8 + 2];
    s[4 * n8 + 3] = k + 1 >= limit1 ? -INFINITY : s[4 * n8 + 3];
  }
}

}  // namespace openmla::kernels::sm90
