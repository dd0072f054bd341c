// E4M3Overflow::kNaN built from the saturating e4m3 conversion (CUDA has no intrinsic for it). Shared
// by the GPU writer and the CPU test that proves it equal to fp8::e4m3_from_float_nan_overflow.
#pragma once

#include <cstdint>

#include "core/host_device.h"

namespace openmla::kernels {

// The two conversions differ only where |y| > 464: there RNE rounds past 448 (the saturating one gives
// +-448, or 0x7F for NaN) and the cast gives NaN. +-inf and NaN have larger magnitude bits than 464,
// so one unsigned compare covers them. The NaN takes the sign of sign_bits: y's own bits for a plain
// cast; the unscaled input's for x / scale (scale > 0 keeps the sign; a GPU division returns NaN
// unsigned).
OPENMLA_HOST_DEVICE inline uint8_t e4m3_nan_overflow_from_saturated(uint8_t saturated, uint32_t y_bits,
                                                                   uint32_t sign_bits) {
  return (y_bits & 0x7FFFFFFFu) > 0x43E80000u ? static_cast<uint8_t>(((sign_bits >> 24) & 0x80u) | 0x7Fu)
                                               : saturated;
}

}  // namespace openmla::kernels
