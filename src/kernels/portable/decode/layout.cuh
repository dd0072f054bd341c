// Shared-memory layouts of the portable decode kernel, as functions from (row, column) to a byte
// offset or a position: every address in kernel.cuh and fp8_fragments.cuh comes from one of these.
#pragma once

#include "kernels/portable/decode/config.h"

namespace openmla::kernels::portable {

// Byte offset of (row, chunk) in a swizzled 72-chunk row.
__host__ __device__ constexpr int swizzled_chunk_offset(int row, int chunk) {
  return (row * kRowChunks + (chunk ^ (row & 7))) * kChunkBytes;
}

template <class Cfg>
__host__ __device__ constexpr int p_chunk_offset(int row, int chunk) {
  const int phys = Cfg::kPSwizzled ? (chunk ^ (row & 7)) : chunk;
  return (row * Cfg::kPRowChunks + phys) * kChunkBytes;
}

// Byte offset of 16-byte chunk `chunk` of token `row` in a quantized stage. e4m3 rows are 36 chunks
// (consecutive rows 4 bank groups apart): chunk bits 1-2 are XORed with row bits 1-2 (bit 1 alone in
// the last, 4-chunk group) so that a quarter-warp's QK loads (2 rows x 4 chunks) and a half-warp's PV
// loads (rows 2c of one k-step x 2 chunks) each hit 8 different bank groups. ds_mla rows (41
// chunks, one bank group apart) spread the PV loads as stored.
template <int kKind>
__host__ __device__ constexpr int raw_chunk_offset(int row, int chunk) {
  if constexpr (kKind == kKvE4M3) {
    return row * KvLayout<kKind>::kTokenBytes + (chunk ^ (row & (chunk < 32 ? 6 : 2))) * kChunkBytes;
  } else {
    return row * KvLayout<kKind>::kTokenBytes + chunk * kChunkBytes;
  }
}

// The address shortcuts of fp8_fragments.cuh: a key row's chunk 4 grp + c (grp < 8, c < 4) is its
// chunk 4 (grp % 2) + c plus 128 (grp / 2) bytes; rows 2c + 16 ks + {0, 1, 8, 9} are row 2c plus
// whole rows at any chunk.
template <int kKind>
constexpr bool raw_address_shortcuts_hold() {
  constexpr int kRow = KvLayout<kKind>::kTokenBytes;
  for (int row = 0; row < kPageTokens; ++row)
    for (int grp = 0; grp < 8; ++grp)
      for (int c = 0; c < 4; ++c)
        if (raw_chunk_offset<kKind>(row, 4 * grp + c) != raw_chunk_offset<kKind>(row, 4 * (grp % 2) + c) + (grp / 2) * 128)
          return false;
  for (int c = 0; c < 4; ++c)
    for (int ks = 0; ks < kPageTokens / 16; ++ks)
      for (int extra : {0, 1, 8, 9})
        for (int chunk = 0; chunk < 32; ++chunk)
          if (raw_chunk_offset<kKind>(2 * c + 16 * ks + extra, chunk) !=
              raw_chunk_offset<kKind>(2 * c, chunk) + (16 * ks + extra) * kRow)
            return false;
  return true;
}
static_assert(raw_address_shortcuts_hold<kKvE4M3>() && raw_address_shortcuts_hold<kKvDsMla>(),
              "fp8_fragments.cuh's address shortcuts");

// Position of dim d in QK's k order (pairs d, d+1 with d even stay together).
__host__ __device__ constexpr int qk_k_position(int d) {
  const int r = d % 64, c = r / 16, kk = (r % 16) / 4, q = r % 4;
  return (d / 64) * 64 + kk * 16 + (q < 2 ? 2 * c + q : 8 + 2 * c + (q - 2));
}

// Every pair of dims lands on its own pair of positions.
constexpr bool qk_k_order_is_a_permutation() {
  bool taken[kHeadDimQK] = {};
  for (int d = 0; d < kHeadDimQK; d += 2) {
    const int pos = qk_k_position(d);
    if (pos < 0 || pos + 1 >= kHeadDimQK || pos % 2 != 0 || taken[pos]) return false;
    taken[pos] = taken[pos + 1] = true;
  }
  return true;
}
static_assert(qk_k_order_is_a_permutation(), "QK's k order");

// Output dim of accumulator o[.][j][2h + e] (for either row half h) in the quantized column order.
template <class Cfg>
__host__ __device__ constexpr int quantized_output_dim(int warp_n, int c, int j, int e) {
  return warp_n * Cfg::kPvCols + (j / 8) * 64 + 16 * c + 8 * e + j % 8;
}

}  // namespace openmla::kernels::portable
