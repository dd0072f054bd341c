// Host codecs, bit for bit against CUDA's own host implementations (cuda_fp8.h, cuda_fp16.h,
// cuda_bf16.h compile as plain C++), plus the ds_mla scale rule and round-trip bounds.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "kernels/common/e4m3_overflow.h"
#include "openmla/fp8.h"
#include "openmla/kv_format.h"

namespace openmla::fp8 {
namespace {

float from_bits(uint32_t b) {
  float x;
  std::memcpy(&x, &b, sizeof(x));
  return x;
}
uint32_t to_bits(float x) {
  uint32_t b;
  std::memcpy(&b, &x, sizeof(b));
  return b;
}

uint8_t cuda_e4m3(float x) { return __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3); }
float cuda_e4m3_to_float(uint8_t v) {
  __half_raw raw = __nv_cvt_fp8_to_halfraw(v, __NV_E4M3);
  return __half2float(__half(raw));
}
uint16_t cuda_fp16_bits(float x) {
  __half_raw raw = __half(__float2half_rn(x));
  return raw.x;
}
float cuda_fp16_to_float(uint16_t bits) {
  __half_raw raw;
  raw.x = bits;
  return __half2float(__half(raw));
}
uint16_t cuda_bf16_bits(float x) {
  __nv_bfloat16_raw raw = __float2bfloat16_rn(x);
  return raw.x;
}

// Every float this sweep touches: a prime stride over all 2^32 patterns plus the rounding
// boundaries of each e4m3 code (midpoints to the next code and their float neighbours).
std::vector<float> sweep_floats() {
  std::vector<float> xs;
  for (uint64_t b = 0; b < (uint64_t{1} << 32); b += 1021) xs.push_back(from_bits(static_cast<uint32_t>(b)));
  for (int v = 0; v < 0x7E; ++v) {
    const double lo = cuda_e4m3_to_float(static_cast<uint8_t>(v));
    const double hi = cuda_e4m3_to_float(static_cast<uint8_t>(v + 1));
    const float mid = static_cast<float>((lo + hi) / 2);  // exact: 5 significant bits
    for (float m : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e9f), static_cast<float>(lo)})
      for (float s : {m, -m}) xs.push_back(s);
  }
  for (float x : {448.0f, 464.0f, 465.0f, 480.0f, 1e30f, std::numeric_limits<float>::infinity(),
                  std::numeric_limits<float>::max(), std::numeric_limits<float>::denorm_min(), 0x1p-10f, 0x1p-9f,
                  0x1.8p-10f, 0x1p-6f, 0x1.ep-7f})
    for (float s : {x, -x}) xs.push_back(s);
  return xs;
}

TEST(E4M3, FromFloatMatchesCudaForAllBf16Patterns) {
  int mismatches = 0;
  for (uint32_t b = 0; b < 65536; ++b) {
    const float x = from_bits(b << 16);
    if (e4m3_from_float(x) != cuda_e4m3(x) && mismatches++ < 10)
      ADD_FAILURE() << "bf16 0x" << std::hex << b << " (" << x << "): ours 0x" << int(e4m3_from_float(x))
                    << ", cuda 0x" << int(cuda_e4m3(x));
  }
  EXPECT_EQ(mismatches, 0);
}

TEST(E4M3, FromFloatMatchesCudaForAllFp16Patterns) {
  int mismatches = 0;
  for (uint32_t b = 0; b < 65536; ++b) {
    const float x = cuda_fp16_to_float(static_cast<uint16_t>(b));
    if (e4m3_from_float(x) != cuda_e4m3(x) && mismatches++ < 10)
      ADD_FAILURE() << "fp16 0x" << std::hex << b << " (" << x << "): ours 0x" << int(e4m3_from_float(x))
                    << ", cuda 0x" << int(cuda_e4m3(x));
  }
  EXPECT_EQ(mismatches, 0);
}

TEST(E4M3, FromFloatMatchesCudaOnFloatSweepAndBoundaries) {
  int mismatches = 0;
  for (float x : sweep_floats())
    if (e4m3_from_float(x) != cuda_e4m3(x) && mismatches++ < 10)
      ADD_FAILURE() << "float 0x" << std::hex << to_bits(x) << " (" << x << "): ours 0x"
                    << int(e4m3_from_float(x)) << ", cuda 0x" << int(cuda_e4m3(x));
  EXPECT_EQ(mismatches, 0);
}

TEST(E4M3, ToFloatMatchesCudaForAll256Codes) {
  for (int v = 0; v < 256; ++v) {
    const float ours = e4m3_to_float(static_cast<uint8_t>(v));
    const float cuda = cuda_e4m3_to_float(static_cast<uint8_t>(v));
    if (std::isnan(cuda)) {
      EXPECT_TRUE(std::isnan(ours)) << "code 0x" << std::hex << v;
      EXPECT_TRUE((v & 0x7F) == 0x7F) << "code 0x" << std::hex << v;
    } else {
      EXPECT_EQ(to_bits(ours), to_bits(cuda)) << "code 0x" << std::hex << v << ": " << ours << " vs " << cuda;
      EXPECT_EQ(e4m3_from_float(ours), v) << "round trip of code 0x" << std::hex << v;
    }
  }
}

TEST(E4M3, NamedValues) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(e4m3_from_float(448.0f), 0x7E);
  EXPECT_EQ(e4m3_from_float(464.0f), 0x7E);  // tie between 448 and (NaN-coded) 480: even, and saturated
  EXPECT_EQ(e4m3_from_float(1e6f), 0x7E);
  EXPECT_EQ(e4m3_from_float(inf), 0x7E);
  EXPECT_EQ(e4m3_from_float(-inf), 0xFE);
  EXPECT_EQ(e4m3_from_float(std::nanf("")), 0x7F);
  EXPECT_EQ(e4m3_from_float(-std::nanf("")), 0x7F);
  EXPECT_EQ(e4m3_from_float(0x1p-9f), 0x01);  // smallest subnormal
  EXPECT_EQ(e4m3_from_float(0x1p-10f), 0x00);  // tie -> even 0
  EXPECT_EQ(e4m3_from_float(0x1.8p-9f), 0x02);  // tie 1.5 -> 2
  EXPECT_EQ(e4m3_from_float(-0.0f), 0x80);
  EXPECT_EQ(e4m3_from_float(1.0f), 0x38);
  EXPECT_FLOAT_EQ(e4m3_to_float(0x7E), 448.0f);
  EXPECT_FLOAT_EQ(e4m3_to_float(0x01), 0x1p-9f);
  EXPECT_TRUE(std::isnan(e4m3_to_float(0x7F)));
  EXPECT_TRUE(std::isnan(e4m3_to_float(0xFF)));
}

TEST(HalfTypes, Fp16AndBf16MatchCuda) {
  std::vector<float> xs = sweep_floats();
  // fp16 / bf16 rounding boundaries: midpoints of consecutive finite values and their neighbours.
  for (uint32_t b = 0; b < 0x7C00; ++b) {
    const double lo = cuda_fp16_to_float(static_cast<uint16_t>(b));
    const double hi = cuda_fp16_to_float(static_cast<uint16_t>(b + 1));
    const float mid = static_cast<float>((lo + hi) / 2);
    for (float m : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e9f)}) {
      xs.push_back(m);
      xs.push_back(-m);
    }
  }
  for (uint32_t b = 0; b < 0x7F80; ++b) {
    const float mid = from_bits((b << 16) | 0x8000u);  // exactly between bf16 b and b + 1
    for (float m : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e38f)}) {
      xs.push_back(m);
      xs.push_back(-m);
    }
  }
  int mismatches = 0;
  for (float x : xs) {
    if (std::isnan(x)) {
      EXPECT_TRUE(std::isnan(fp16_to_float(float_to_fp16(x))));
      EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(x))));
      continue;
    }
    if (float_to_fp16(x) != cuda_fp16_bits(x) && mismatches++ < 10)
      ADD_FAILURE() << "fp16 of 0x" << std::hex << to_bits(x) << ": ours 0x" << float_to_fp16(x) << ", cuda 0x"
                    << cuda_fp16_bits(x);
    if (float_to_bf16(x) != cuda_bf16_bits(x) && mismatches++ < 10)
      ADD_FAILURE() << "bf16 of 0x" << std::hex << to_bits(x) << ": ours 0x" << float_to_bf16(x) << ", cuda 0x"
                    << cuda_bf16_bits(x);
  }
  EXPECT_EQ(mismatches, 0);
  for (uint32_t b = 0; b < 65536; ++b) {
    const float cuda = cuda_fp16_to_float(static_cast<uint16_t>(b));
    const float ours = fp16_to_float(static_cast<uint16_t>(b));
    if (std::isnan(cuda)) {
      EXPECT_TRUE(std::isnan(ours));
    } else {
      EXPECT_EQ(to_bits(ours), to_bits(cuda)) << "fp16 0x" << std::hex << b;
      EXPECT_EQ(float_to_fp16(ours), b) << "fp16 round trip 0x" << std::hex << b;
    }
    EXPECT_EQ(to_bits(bf16_to_float(static_cast<uint16_t>(b))), b << 16);
  }
}

// The ds_mla rule: the smallest power of two 2^c with 448 * 2^c >= amax, and c >= -13 (FlashMLA's
// clamp of amax / 448 to >= 1e-4 lands on 2^-13). All comparisons below are exact in double.
void expect_scale_rule(float amax) {
  const float scale = ds_mla_tile_scale(amax);
  int e = 0;
  ASSERT_EQ(std::frexp(scale, &e), 0.5f) << "scale " << scale << " for amax " << amax << " is not a power of two";
  const double c = e - 1;
  EXPECT_GE(448.0 * scale, static_cast<double>(amax)) << "amax " << amax;
  if (c > -13) {
    EXPECT_LT(448.0 * scale / 2, static_cast<double>(amax)) << "amax " << amax << " scale " << scale;
  }
  EXPECT_GE(c, -13);
}

TEST(DsMla, TileScaleRule) {
  EXPECT_EQ(ds_mla_tile_scale(448.0f), 1.0f);
  EXPECT_EQ(ds_mla_tile_scale(std::nextafter(448.0f, 1e9f)), 2.0f);
  EXPECT_EQ(ds_mla_tile_scale(896.0f), 2.0f);
  EXPECT_EQ(ds_mla_tile_scale(1.0f), 0x1p-8f);  // 1/448 = 2^-8.8
  EXPECT_EQ(ds_mla_tile_scale(0.0f), 0x1p-13f);
  EXPECT_EQ(ds_mla_tile_scale(448.0f * 0x1p-13f), 0x1p-13f);
  EXPECT_EQ(ds_mla_tile_scale(448.0f * 0x1p-12f), 0x1p-12f);
  EXPECT_EQ(ds_mla_tile_scale(std::numeric_limits<float>::denorm_min()), 0x1p-13f);
  EXPECT_EQ(ds_mla_tile_scale(std::numeric_limits<float>::infinity()), std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(ds_mla_tile_scale(std::nanf(""))));
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<uint32_t> bits(0, 0x7F7FFFFFu);
  for (int i = 0; i < 20000; ++i) expect_scale_rule(from_bits(bits(rng)));
  for (int c = -20; c < 100; ++c) {  // the power-of-two boundaries themselves and their neighbours
    const float edge = std::ldexp(448.0f, c);
    for (float a : {edge, std::nextafter(edge, 0.0f), std::nextafter(edge, 1e38f)}) expect_scale_rule(a);
  }
}

TEST(DsMla, RoundTripBoundsAndByteLayout) {
  std::mt19937_64 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const float tile_gain[4] = {1.0f, 1e-3f, 250.0f, 3e4f};  // tiles of very different magnitudes
  for (int trial = 0; trial < 200; ++trial) {
    float latent[kHeadDimV], rope[kRopeDim], decoded[kHeadDimQK];
    for (int i = 0; i < kHeadDimV; ++i) latent[i] = normal(rng) * tile_gain[(i / kDsMlaTile + trial) % 4];
    for (float& r : rope) r = normal(rng) * 10.0f;
    uint8_t token[kDsMlaBytesPerToken];
    std::memset(token, 0xAB, sizeof(token));
    ds_mla_encode_token(latent, rope, token);
    ds_mla_decode_token(token, decoded);
    for (int tile = 0; tile < kHeadDimV / kDsMlaTile; ++tile) {
      float amax = 0.0f;
      for (int i = 0; i < kDsMlaTile; ++i) amax = std::max(amax, std::fabs(latent[tile * kDsMlaTile + i]));
      float stored_scale;
      std::memcpy(&stored_scale, token + kDsMlaScalesOffset + 4 * tile, 4);
      ASSERT_EQ(stored_scale, ds_mla_tile_scale(amax));
      for (int i = 0; i < kDsMlaTile; ++i) {
        const int k = tile * kDsMlaTile + i;
        ASSERT_EQ(token[k], e4m3_from_float(latent[k] / stored_scale));  // x / 2^c is exact
        // 3 mantissa bits: half an ulp is 2^-4 relative for normals, 2^-10 * scale for subnormals.
        const double bound = std::max(std::fabs(latent[k]) * 0x1p-4, stored_scale * 0x1p-10);
        ASSERT_LE(std::fabs(decoded[k] - latent[k]), bound) << "element " << k << " scale " << stored_scale;
      }
    }
    for (int i = 0; i < kRopeDim; ++i) {
      uint16_t bits;
      std::memcpy(&bits, token + kDsMlaRopeOffset + 2 * i, 2);
      ASSERT_EQ(bits, float_to_bf16(rope[i]));
      ASSERT_EQ(decoded[kHeadDimV + i], bf16_to_float(bits));
    }
  }
}

TEST(DsMla, ZeroAndNonFiniteTiles) {
  float latent[kHeadDimV] = {}, rope[kRopeDim] = {}, decoded[kHeadDimQK];
  for (int i = kDsMlaTile; i < kHeadDimV; ++i) latent[i] = 0.5f;  // tile 0 stays all zero
  latent[2 * kDsMlaTile + 5] = std::numeric_limits<float>::infinity();
  latent[3 * kDsMlaTile + 7] = std::nanf("");
  uint8_t token[kDsMlaBytesPerToken];
  ds_mla_encode_token(latent, rope, token);
  ds_mla_decode_token(token, decoded);
  float scales[4];
  std::memcpy(scales, token + kDsMlaScalesOffset, sizeof(scales));
  EXPECT_EQ(scales[0], 0x1p-13f);  // amax == 0: FlashMLA's clamped scale, all codes zero
  for (int i = 0; i < kDsMlaTile; ++i) {
    EXPECT_EQ(token[i], 0);
    EXPECT_EQ(decoded[i], 0.0f);
  }
  EXPECT_EQ(scales[1], 0x1p-9f);  // 0.5 / 448 -> 2^-9.8 -> 2^-9
  for (int i = kDsMlaTile; i < 2 * kDsMlaTile; ++i) EXPECT_EQ(decoded[i], 0.5f);
  EXPECT_TRUE(std::isinf(scales[2]));  // a non-finite value poisons its whole tile: every value NaN
  EXPECT_TRUE(std::isnan(scales[3]));
  for (int i = 2 * kDsMlaTile; i < kHeadDimV; ++i) EXPECT_TRUE(std::isnan(decoded[i])) << i;
  for (int i = kHeadDimV; i < kHeadDimQK; ++i) EXPECT_EQ(decoded[i], 0.0f);
}

TEST(Fp8Math, QueryExponentIsTheSmallestThatFits) {
  EXPECT_EQ(fp8_math_query_exponent(448.0f), 0);
  EXPECT_EQ(fp8_math_query_exponent(std::nextafter(448.0f, 1e9f)), 1);
  EXPECT_EQ(fp8_math_query_exponent(224.0f), -1);
  EXPECT_EQ(fp8_math_query_exponent(std::nextafter(224.0f, 1e9f)), 0);
  EXPECT_EQ(fp8_math_query_exponent(1.0f), -8);  // 1 <= 448 * 2^-8 = 1.75
  EXPECT_EQ(fp8_math_query_exponent(1.75f), -8);
  EXPECT_EQ(fp8_math_query_exponent(1.76f), -7);
  EXPECT_EQ(fp8_math_query_exponent(0.0f), 0);
  EXPECT_EQ(fp8_math_query_exponent(std::numeric_limits<float>::infinity()), 0);
  EXPECT_EQ(fp8_math_query_exponent(std::numeric_limits<float>::quiet_NaN()), 0);
  EXPECT_EQ(fp8_math_query_exponent(1e-40f), -126);  // subnormal amax: clamped
  EXPECT_EQ(fp8_math_query_exponent(3e38f), 120);
  // Against the definition on random magnitudes: amax <= 448 * 2^e < 2 * amax.
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> log_mag(-30.0, 30.0);
  for (int i = 0; i < 10000; ++i) {
    const float amax = static_cast<float>(std::exp2(log_mag(rng)));
    const int e = fp8_math_query_exponent(amax);
    EXPECT_LE(static_cast<double>(amax), std::ldexp(448.0, e)) << amax;
    EXPECT_GT(2.0 * amax, std::ldexp(448.0, e)) << amax;
  }
}

TEST(E4M3, ScaledEncoding) {
  const float scale = 0.037f;
  std::mt19937_64 rng(3);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  for (int i = 0; i < 10000; ++i) {
    const float x = normal(rng);
    const uint8_t code = e4m3_encode_scaled(x, scale);
    EXPECT_EQ(code, e4m3_from_float(x / scale));
    const double back = static_cast<double>(e4m3_to_float(code)) * scale;
    EXPECT_LE(std::fabs(back - x), std::max(std::fabs(x) * 0x1p-4, scale * 0x1p-10) * 1.0001) << x;
  }
  EXPECT_EQ(e4m3_encode_scaled(1e9f, scale), 0x7E);  // saturates, never NaN
}

// ---- E4M3Overflow::kNaN (PyTorch's float -> float8_e4m3fn cast) -----------------------------------

// Expected bytes measured with PyTorch 2.11 (torch.tensor([x], dtype=torch.float32)
// .to(torch.float8_e4m3fn).view(torch.uint8)); the saturating column is CUDA's __NV_SATFINITE.
struct BoundaryRow {
  uint32_t bits;       // the float32 input
  uint8_t saturating;  // e4m3_from_float
  uint8_t torch_cast;  // e4m3_from_float_nan_overflow
};
constexpr BoundaryRow kTorchBoundaries[] = {
    {0x43E00000u, 0x7E, 0x7E},  // 448
    {0x43E3FEB8u, 0x7E, 0x7E},  // 455.99
    {0x43E40000u, 0x7E, 0x7E},  // 456
    {0x43E60000u, 0x7E, 0x7E},  // 460
    {0x43E7FEB8u, 0x7E, 0x7E},  // 463.99
    {0x43E7FFFFu, 0x7E, 0x7E},  // 464 - 1 ulp
    {0x43E80000u, 0x7E, 0x7E},  // 464: the tie rounds to even 448
    {0x43E80001u, 0x7E, 0x7F},  // 464 + 1 ulp
    {0x43E80148u, 0x7E, 0x7F},  // 464.01
    {0x43EFFEB8u, 0x7E, 0x7F},  // 479.99
    {0x43F00000u, 0x7E, 0x7F},  // 480
    {0x49742400u, 0x7E, 0x7F},  // 1e6
    {0x7F7FFFFFu, 0x7E, 0x7F},  // FLT_MAX
    {0x7F800000u, 0x7E, 0x7F},  // inf
    {0xFF800000u, 0xFE, 0xFF},  // -inf
    {0x7FC00000u, 0x7F, 0x7F},  // NaN
    {0x7F800001u, 0x7F, 0x7F},  // signalling NaN
    {0xFFC00000u, 0x7F, 0xFF},  // -NaN: torch keeps the sign
    {0x00000000u, 0x00, 0x00},  // 0
    {0x80000000u, 0x80, 0x80},  // -0
    {0x3B000000u, 0x01, 0x01},  // 2^-9, the smallest subnormal
    {0x3A800000u, 0x00, 0x00},  // 2^-10: the tie rounds to even 0
    {0x3A800001u, 0x01, 0x01},  // 2^-10 + 1 ulp
    {0x3AC00000u, 0x01, 0x01},  // 0.75 * 2^-9
    {0x3B400000u, 0x02, 0x02},  // 1.5 * 2^-9: tie to even 2
    {0x3A000000u, 0x00, 0x00},  // 2^-11
    {0x3C800000u, 0x08, 0x08},  // 2^-6, the smallest normal
    {0x3C700000u, 0x08, 0x08},  // 7.5 * 2^-9: tie to even (the normal 8)
    {0x3C600000u, 0x07, 0x07},  // 7 * 2^-9
    {0x43700000u, 0x77, 0x77},  // 240
    {0x43780000u, 0x78, 0x78},  // 248: tie to even
    {0x43D80000u, 0x7E, 0x7E},  // 432: tie to even 448
    {0x43DC0000u, 0x7E, 0x7E},  // 440
};

TEST(E4M3NaNOverflow, TorchBoundaryTable) {
  for (const BoundaryRow& row : kTorchBoundaries) {
    const float x = from_bits(row.bits);
    EXPECT_EQ(e4m3_from_float(x), row.saturating) << std::hex << "0x" << row.bits << " (" << x << ")";
    EXPECT_EQ(e4m3_from_float_nan_overflow(x), row.torch_cast) << std::hex << "0x" << row.bits << " (" << x << ")";
    // Negative twins: the sign bit and nothing else changes (NaN included, as torch keeps it).
    const float neg = from_bits(row.bits ^ 0x80000000u);
    EXPECT_EQ(e4m3_from_float_nan_overflow(neg), row.torch_cast ^ 0x80) << std::hex << "0x" << (row.bits ^ 0x80000000u);
  }
}

// Every float within 2^16 ulps of the points where the rules change, and a dense stride over all 2^32.
std::vector<uint32_t> overflow_sweep_bits() {
  std::vector<uint32_t> bits;
  for (uint64_t b = 0; b < (uint64_t{1} << 32); b += 257) bits.push_back(static_cast<uint32_t>(b));
  for (uint32_t center : {0x43E00000u, 0x43E80000u, 0x43F00000u, 0x7F800000u, 0x3A800000u, 0x3B000000u, 0x3C800000u}) {
    for (int64_t d = -(1 << 16); d <= (1 << 16); ++d) {
      const int64_t b = static_cast<int64_t>(center) + d;
      if (b < 0 || b > 0x7FFFFFFF) continue;
      bits.push_back(static_cast<uint32_t>(b));
      bits.push_back(static_cast<uint32_t>(b) | 0x80000000u);
    }
  }
  return bits;
}

TEST(E4M3NaNOverflow, DeviceCompositionEqualsHostCodec) {
  // The GPU writer builds kNaN from the saturating intrinsic plus a magnitude test
  // (kernels/common/e4m3_overflow.h); cuda_fp8.h's host build of that intrinsic stands in for it.
  int mismatches = 0;
  for (uint32_t b : overflow_sweep_bits()) {
    const float x = from_bits(b);
    const uint8_t composed = kernels::e4m3_nan_overflow_from_saturated(cuda_e4m3(x), b, b);
    if (composed != e4m3_from_float_nan_overflow(x) && mismatches++ < 10)
      ADD_FAILURE() << std::hex << "0x" << b << ": composed 0x" << int(composed) << ", host 0x"
                    << int(e4m3_from_float_nan_overflow(x));
  }
  EXPECT_EQ(mismatches, 0);
}

TEST(E4M3NaNOverflow, DiffersFromSaturatingOnlyAbove464) {
  int mismatches = 0;
  for (uint32_t b : overflow_sweep_bits()) {
    const float x = from_bits(b);
    const bool above = (b & 0x7FFFFFFFu) > 0x43E80000u;  // |x| > 464, inf and NaN included
    const uint8_t got = e4m3_from_float_nan_overflow(x);
    const uint8_t want = above ? static_cast<uint8_t>(((b >> 24) & 0x80u) | 0x7Fu) : e4m3_from_float(x);
    if (got != want && mismatches++ < 10) ADD_FAILURE() << std::hex << "0x" << b << ": 0x" << int(got);
  }
  EXPECT_EQ(mismatches, 0);
}

TEST(E4M3NaNOverflow, ScaledEncodingKeepsTheSignOfNaN) {
  const float scale = 0.37f;
  std::mt19937_64 rng(4);
  std::normal_distribution<float> normal(0.0f, 200.0f);
  for (int i = 0; i < 10000; ++i) {
    const float x = normal(rng);
    EXPECT_EQ(e4m3_encode_scaled_nan_overflow(x, scale), e4m3_from_float_nan_overflow(x / scale)) << x;
  }
  EXPECT_EQ(e4m3_encode_scaled_nan_overflow(1e9f, scale), 0x7F);
  EXPECT_EQ(e4m3_encode_scaled_nan_overflow(-1e9f, scale), 0xFF);
  EXPECT_EQ(e4m3_encode_scaled_nan_overflow(from_bits(0xFFC00000u), scale), 0xFF);
  EXPECT_EQ(e4m3_encode_scaled_nan_overflow(from_bits(0x7FC00001u), scale), 0x7F);
  EXPECT_EQ(e4m3_encode_scaled_nan_overflow(464.0f * scale, scale), e4m3_from_float_nan_overflow(464.0f * scale / scale));
}

}  // namespace
}  // namespace openmla::fp8
