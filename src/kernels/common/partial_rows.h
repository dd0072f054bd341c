// The partial rows of a split request: what each decode kernel's epilogue writes for a segment that does not end
// its request, and what the combine (combine.cu) merges. A row's 512 normalized output values are stored as fp16,
// with one power-of-two scale per 64-column block ([slots, rows, 512] fp16 and [slots, rows, 8] fp32).
//
// Why fp16 and not fp32: at small batches every CTA ends its part with a split segment, and its 64 fp32 rows
// (128 KB) take about a sixth of the call to store (b=1, h_q=128, 32K). These rows are half the bytes, written as
// whole 32-byte sectors (sector_stores.cuh: stores of part of a sector would cost more than fp32's bytes).
//
// Precision: a block's values are multiplied by 2^k so that its largest magnitude lands in [2^14, 2^15), under
// fp16's 65504 whatever the cache's range, so a value keeps fp16's 11 significant bits: a relative error of at
// most 2^-11 (down to 2^-28 of the block's largest; below that an absolute error under 2^-39 of it; blocks whose
// largest is under 2^-112 an absolute error under 2^-151), a quarter of the final output's own bf16 rounding
// (2^-9). Decoding multiplies by 2^-k, exactly. The LSEs stay fp32.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/host_device.h"

namespace openmla::kernels {

inline constexpr int kPartialBlockCols = 64;                     // columns that share a scale
inline constexpr int kPartialBlocks = 512 / kPartialBlockCols;  // scales per partial row

struct PartialBlockScale {
  float encode;  // multiplies the values before their conversion to fp16
  float decode;  // 1 / encode: what the combine multiplies the fp16 values by
};

// The scale of a block whose largest magnitude is amax (>= 0). With amax's biased exponent e, amax lies in
// [2^(e-127), 2^(e-126)) and encode = 2^(141-e) maps it into [2^14, 2^15). e is clamped to [15, 254] so that both
// scales are normal floats: a zero or tiny block gets 2^126 (its values stay below 2^14); an infinite or NaN amax
// the smallest encode (the values stay inf / NaN, as the unsplit path would write them).
OPENMLA_HOST_DEVICE inline PartialBlockScale partial_block_scale(float amax) {
  uint32_t bits = 0;
  std::memcpy(&bits, &amax, sizeof(bits));
  int e = static_cast<int>((bits >> 23) & 0xffu);
  e = e < 15 ? 15 : (e > 254 ? 254 : e);
  const uint32_t encode_bits = static_cast<uint32_t>(268 - e) << 23;
  const uint32_t decode_bits = static_cast<uint32_t>(e - 14) << 23;
  PartialBlockScale s{};
  std::memcpy(&s.encode, &encode_bits, sizeof(float));
  std::memcpy(&s.decode, &decode_bits, sizeof(float));
  return s;
}

// Index of row `row` of partial slot `slot` (times 512 for its first value, times kPartialBlocks for its first
// scale).
OPENMLA_HOST_DEVICE inline size_t partial_row_index(int slot, int rows, int row) {
  return static_cast<size_t>(slot) * static_cast<size_t>(rows) + static_cast<size_t>(row);
}

}  // namespace openmla::kernels
