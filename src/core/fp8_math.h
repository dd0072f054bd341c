// FP8 math's query quantization (DecodeOptions::fp8_math), one definition for the host (fp8.cpp,
// the reference) and the GPU kernel (kernels/sm90/decode/fp8_math/kernel.cuh).
#pragma once

#include <cstdint>
#include <cstring>

#include "core/host_device.h"

namespace openmla::detail {

// The smallest e with amax <= 448 * 2^e, clamped to [-126, 126]; 0 for amax == 0 or not finite
// (fp8::fp8_math_query_exponent documents it).
OPENMLA_HOST_DEVICE inline int fp8_math_query_exponent(float amax) {
  uint32_t bits = 0;
  std::memcpy(&bits, &amax, sizeof(bits));
  const int biased = static_cast<int>((bits >> 23) & 0xFF);
  if (amax == 0.0f || biased == 0xFF) return 0;
  if (biased == 0) return -126;  // subnormal: far below any useful scale
  // amax = m * 2^E with m = 1.f / 2 in [0.5, 1), E = biased - 126; 448 = 0.875 * 2^9, so
  // e = E - 9, plus one when m > 0.875 (mantissa field above 0x600000).
  const int e = biased - 135 + ((bits & 0x7FFFFFu) > 0x600000u ? 1 : 0);
  return e < -126 ? -126 : (e > 126 ? 126 : e);
}

}  // namespace openmla::detail
