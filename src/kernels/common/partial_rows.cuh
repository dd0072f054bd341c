// Device helpers of the partial rows' stores (the format: partial_rows.h).
#pragma once

#include <cstdint>

#include "kernels/common/partial_rows.h"

namespace openmla::kernels {

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

}  // namespace openmla::kernels
