// Host codecs for the KV formats. Conversions work on IEEE bit patterns so that they are exact and
// independent of the FPU rounding mode; tests/cpu/test_fp8_codec.cpp checks them bit for bit against
// CUDA's own host implementations (cuda_fp8.h, cuda_fp16.h, cuda_bf16.h).
#include "openmla/fp8.h"

#include <cmath>
#include <limits>
#include <cstring>

#include "core/fp8_math.h"
#include "openmla/kv_format.h"

namespace openmla::fp8 {
namespace {

uint32_t float_bits(float x) noexcept {
  uint32_t b;
  std::memcpy(&b, &x, sizeof(b));
  return b;
}

float bits_float(uint32_t b) noexcept {
  float x;
  std::memcpy(&x, &b, sizeof(x));
  return x;
}

// Rounds sig >> shift to nearest, ties to even (1 <= shift <= 31).
uint32_t shift_right_rne(uint32_t sig, uint32_t shift) noexcept {
  uint32_t kept = sig >> shift;
  uint32_t rem = sig & ((1u << shift) - 1u);
  uint32_t half = 1u << (shift - 1u);
  if (rem > half || (rem == half && (kept & 1u))) ++kept;
  return kept;
}

constexpr uint32_t kFloatAbsMask = 0x7FFFFFFFu;
constexpr uint32_t kFloatInfBits = 0x7F800000u;

// Smallest ds_mla tile scale. FlashMLA's quantizer clamps amax / 448 to at least 1e-4 before taking
// 2^ceil(log2(.)), which makes every tile with amax / 448 <= 2^-13 (amax == 0 included) use 2^-13.
constexpr float kDsMlaMinScale = 0x1p-13f;

}  // namespace

uint8_t e4m3_from_float(float x) noexcept {
  const uint32_t b = float_bits(x);
  const uint32_t a = b & kFloatAbsMask;
  const uint8_t sign = static_cast<uint8_t>((b >> 24) & 0x80u);
  if (a > kFloatInfBits) return 0x7F;  // NaN -> the canonical (positive) e4m3 NaN, as CUDA does
  // Above 448 + half an ulp (464), and +-inf: saturate to +-448 (RNE would give the NaN code).
  if (a > 0x43E80000u) return static_cast<uint8_t>(sign | 0x7Eu);
  if (a >= 0x3C800000u) {  // >= 2^-6: normal e4m3. Re-bias the exponent (127 -> 7), keep 3 bits.
    const uint32_t rounded = a + 0x7FFFFu + ((a >> 20) & 1u);  // RNE on the 20 dropped bits
    return static_cast<uint8_t>(sign | ((rounded - (120u << 23)) >> 20));
  }
  if (a <= 0x3A800000u) return sign;  // <= 2^-10 (half the smallest subnormal): +-0, ties to even
  // Subnormal: count units of 2^-9. a's value is sig * 2^(e - 150); in units of 2^-9 that is
  // sig >> (141 - e). A result of 8 is the smallest normal (0x08), which the encoding gives for free.
  const uint32_t e = a >> 23;
  const uint32_t sig = (a & 0x7FFFFFu) | 0x800000u;
  return static_cast<uint8_t>(sign | shift_right_rne(sig, 141u - e));
}

uint8_t e4m3_from_float_nan_overflow(float x) noexcept {
  const uint32_t a = float_bits(x) & kFloatAbsMask;
  // Above 464 every magnitude rounds past 448 (464 itself is a tie that goes to even 448); inf and
  // NaN have larger bit patterns still.
  if (a > 0x43E80000u) return static_cast<uint8_t>(((float_bits(x) >> 24) & 0x80u) | 0x7Fu);
  return e4m3_from_float(x);
}

float e4m3_to_float(uint8_t v) noexcept {
  const uint32_t sign = static_cast<uint32_t>(v & 0x80u) << 24;
  const uint32_t exponent = (v >> 3) & 0xFu;
  const uint32_t mantissa = v & 0x7u;
  if (exponent == 0xFu && mantissa == 0x7u) return bits_float(sign | 0x7FC00000u);  // the only NaN
  if (exponent == 0) {
    const float magnitude = static_cast<float>(mantissa) * 0x1p-9f;  // exact
    return sign ? -magnitude : magnitude;
  }
  return bits_float(sign | ((exponent + 120u) << 23) | (mantissa << 20));
}

float bf16_to_float(uint16_t bits) noexcept { return bits_float(static_cast<uint32_t>(bits) << 16); }

uint16_t float_to_bf16(float x) noexcept {
  const uint32_t b = float_bits(x);
  if ((b & kFloatAbsMask) > kFloatInfBits)  // NaN: keep sign and top payload, force quiet
    return static_cast<uint16_t>((b >> 16) | 0x0040u);
  // RNE on the 16 dropped bits; overflow carries into the exponent and ends at inf, as it should.
  return static_cast<uint16_t>((b + 0x7FFFu + ((b >> 16) & 1u)) >> 16);
}

float fp16_to_float(uint16_t bits) noexcept {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t exponent = (bits >> 10) & 0x1Fu;
  const uint32_t mantissa = bits & 0x3FFu;
  if (exponent == 0x1Fu) return bits_float(sign | kFloatInfBits | (mantissa << 13));
  if (exponent == 0) {
    const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;  // exact
    return sign ? -magnitude : magnitude;
  }
  return bits_float(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

uint16_t float_to_fp16(float x) noexcept {
  const uint32_t b = float_bits(x);
  const uint32_t a = b & kFloatAbsMask;
  const uint16_t sign = static_cast<uint16_t>((b >> 16) & 0x8000u);
  if (a > kFloatInfBits)  // NaN: quiet, keep the top payload bits
    return static_cast<uint16_t>(sign | 0x7E00u | ((a >> 13) & 0x1FFu));
  if (a >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);  // >= 65520 rounds to inf
  if (a >= 0x38800000u) {  // >= 2^-14: normal fp16; re-bias 127 -> 15, RNE on 13 dropped bits
    const uint32_t rounded = a + 0xFFFu + ((a >> 13) & 1u);
    return static_cast<uint16_t>(sign | ((rounded - (112u << 23)) >> 13));
  }
  if (a <= 0x33000000u) return sign;  // <= 2^-25: +-0 (the tie at 2^-25 goes to even 0)
  // Subnormal: units of 2^-24 are sig >> (126 - e); 1024 becomes the smallest normal (0x400).
  const uint32_t e = a >> 23;
  const uint32_t sig = (a & 0x7FFFFFu) | 0x800000u;
  return static_cast<uint16_t>(sign | shift_right_rne(sig, 126u - e));
}

float ds_mla_tile_scale(float amax) noexcept {
  amax = std::fabs(amax);
  // Non-finite amax: 2^ceil(log2(.)) of inf is inf, of NaN is NaN, as in FlashMLA's quantizer.
  // Either way every value of the tile then decodes to NaN (docs/kv-formats.md).
  // A NaN scale is the canonical quiet NaN (0x7FC00000) whatever NaN the tile held, so host and
  // GPU writers agree byte for byte.
  if (std::isnan(amax)) return std::numeric_limits<float>::quiet_NaN();
  if (!std::isfinite(amax)) return amax;
  float ratio = amax / kE4M3Max;
  if (ratio <= kDsMlaMinScale) return kDsMlaMinScale;
  // Exact ceil(log2(ratio)): ratio = f * 2^e with f in [0.5, 1); f == 0.5 means ratio = 2^(e-1).
  int e = 0;
  const float f = std::frexp(ratio, &e);
  return std::ldexp(1.0f, f == 0.5f ? e - 1 : e);
}

int fp8_math_query_exponent(float amax) noexcept { return detail::fp8_math_query_exponent(amax); }

void ds_mla_encode_token(const float* latent512, const float* rope64, uint8_t* token656) noexcept {
  constexpr int kTiles = kHeadDimV / kDsMlaTile;
  for (int tile = 0; tile < kTiles; ++tile) {
    const float* x = latent512 + tile * kDsMlaTile;
    float amax = 0.0f;
    for (int i = 0; i < kDsMlaTile; ++i) {
      const float mag = std::fabs(x[i]);
      if (std::isnan(mag)) {
        amax = mag;
        break;
      }
      if (mag > amax) amax = mag;
    }
    const float scale = ds_mla_tile_scale(amax);
    // scale is a power of two (>= 2^-13), so x / scale is exact and |x / scale| <= 448.
    for (int i = 0; i < kDsMlaTile; ++i)
      token656[kDsMlaLatentOffset + tile * kDsMlaTile + i] = e4m3_from_float(x[i] / scale);
    std::memcpy(token656 + kDsMlaScalesOffset + tile * sizeof(float), &scale, sizeof(float));
  }
  for (int i = 0; i < kRopeDim; ++i) {
    const uint16_t bits = float_to_bf16(rope64[i]);
    std::memcpy(token656 + kDsMlaRopeOffset + i * sizeof(uint16_t), &bits, sizeof(bits));
  }
}

void ds_mla_decode_token(const uint8_t* token656, float* out576) noexcept {
  float scales[kHeadDimV / kDsMlaTile];
  std::memcpy(scales, token656 + kDsMlaScalesOffset, sizeof(scales));
  for (int i = 0; i < kHeadDimV; ++i)
    out576[i] = e4m3_to_float(token656[kDsMlaLatentOffset + i]) * scales[i / kDsMlaTile];
  for (int i = 0; i < kRopeDim; ++i) {
    uint16_t bits;
    std::memcpy(&bits, token656 + kDsMlaRopeOffset + i * sizeof(uint16_t), sizeof(bits));
    out576[kHeadDimV + i] = bf16_to_float(bits);
  }
}

uint8_t e4m3_encode_scaled(float x, float scale) noexcept { return e4m3_from_float(x / scale); }

uint8_t e4m3_encode_scaled_nan_overflow(float x, float scale) noexcept {
  if (std::isnan(x)) return static_cast<uint8_t>(((float_bits(x) >> 24) & 0x80u) | 0x7Fu);
  return e4m3_from_float_nan_overflow(x / scale);
}

}  // namespace openmla::fp8
