// Stores whose every instruction writes whole 32-byte sectors, for rows that a warp's lanes hold in pieces: the
// output rows and the partial rows (partial_rows.h). A store of part of a sector costs more than its bytes: fp16
// partial rows written 16 bytes of a sector per instruction are slower than fp32 rows in whole sectors.
#pragma once

#include <cstdint>

namespace openmla::kernels {

// Lanes c and c ^ 1 of a quad hold one column pair each of two adjacent 8-column blocks of a row (w0: the pair in
// the first block, w1: in the second; 4 bytes each, 2-byte elements). They swap one word so that each lane stores 8
// bytes and the quad one whole sector per instruction (half the stores of 4-byte words): even c takes columns
// 2c..2c+3 of the first block, odd c those of the second. `at`: the first block's start plus odd * 8 + 2 * (c & 2)
// elements, added to the row's pointer before the caller's loop, so that each store is one predicated STG at a
// constant offset (added per store, the compiler makes each store a branch that recomputes the row's 64-bit offset:
// 30+ instructions per store, and the epilogue runs at instruction-fetch speed).
// Every lane of the warp calls it (a full-warp shuffle); `store`: whether this lane's row is written.
template <typename E>
__device__ __forceinline__ void store_swapped_words(E* at, uint32_t w0, uint32_t w1, bool odd, bool store) {
  static_assert(sizeof(E) == 2, "2-byte elements");
  const uint32_t got = __shfl_xor_sync(0xffffffffu, odd ? w0 : w1, 1);
  if (store) *reinterpret_cast<uint2*>(at) = odd ? make_uint2(got, w1) : make_uint2(w0, got);
}

// Two lanes (this one and its partner) hold 32 bytes each of one row, the even lane's right before the odd
// lane's (`mine` points at this lane's). Each lane's bytes are lo | hi (16 each); each lane sends its partner the
// half that the partner stores (the even lane its hi, the odd lane its lo: `exchange_halves`), and
// `store_sector_pair_halves` then stores so that each of its two store instructions writes one whole 32-byte
// sector: first the even lane's (its lo by the even lane, its hi by the odd), then the odd lane's. The exchange
// and the stores are apart so that a caller can shuffle with every lane and store under a condition.
__device__ __forceinline__ uint4 exchange_halves(const uint4& lo, const uint4& hi, bool odd, int partner,
                                                 unsigned mask) {
  const uint4 send = odd ? lo : hi;
  uint4 got;
  got.x = __shfl_xor_sync(mask, send.x, partner);
  got.y = __shfl_xor_sync(mask, send.y, partner);
  got.z = __shfl_xor_sync(mask, send.z, partner);
  got.w = __shfl_xor_sync(mask, send.w, partner);
  return got;
}
__device__ __forceinline__ void store_sector_pair_halves(uint8_t* mine, const uint4& lo, const uint4& hi,
                                                         const uint4& got, bool odd) {
  *reinterpret_cast<uint4*>(mine + (odd ? -16 : 0)) = odd ? got : lo;
  *reinterpret_cast<uint4*>(mine + (odd ? 16 : 32)) = odd ? hi : got;
}

// The same 32 bytes per lane (lo | hi at `mine`, lanes c and c ^ 1 adjacent): whole sectors per store instruction
// through the exchange (kWholeSectors), or each lane's own two 16-byte stores, half a sector each per instruction
// (kept where that is faster: the portable kernel's 16-row tiles, kPortableWholeSectorOutput). Every lane of
// the warp calls it; `store`: whether this lane's row is written.
template <bool kWholeSectors>
__device__ __forceinline__ void store_lane_pair_32(uint8_t* mine, const uint4& lo, const uint4& hi, bool odd,
                                                   bool store) {
  if constexpr (kWholeSectors) {
    const uint4 got = exchange_halves(lo, hi, odd, 1, 0xffffffffu);
    if (store) store_sector_pair_halves(mine, lo, hi, got, odd);
  } else if (store) {
    reinterpret_cast<uint4*>(mine)[0] = lo;
    reinterpret_cast<uint4*>(mine)[1] = hi;
  }
}

}  // namespace openmla::kernels
