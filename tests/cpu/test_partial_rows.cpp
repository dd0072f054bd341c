// The split-KV partial rows' format (kernels/common/partial_rows.h): fp16 values with a power-of-two scale per
// 64-column block. Checks the scale rule on its whole input range, and the round trip through fp16 (the host's
// RNE conversion, as the kernels' cvt.rn) against the precision the format promises.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/common/partial_rows.h"
#include "openmla/fp8.h"

namespace openmla::kernels {
namespace {

int biased_exponent(float x) {
  uint32_t bits = 0;
  std::memcpy(&bits, &x, sizeof(bits));
  return static_cast<int>((bits >> 23) & 0xffu);
}

bool is_power_of_two(float x) {
  int e = 0;
  return std::isnormal(x) && std::frexp(x, &e) == 0.5f;
}

TEST(PartialRows, ScaleMapsTheBlockMaximumIntoTheTopOfFp16) {
  // Every normal float from 2^-112 to FLT_MAX (and the exponents below, and zero, subnormals, inf, NaN).
  std::vector<float> amaxes = {0.f, std::numeric_limits<float>::denorm_min(), 1e-40f,
                               std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()};
  for (int e = -149; e <= 127; ++e) {
    amaxes.push_back(std::ldexp(1.f, e));
    amaxes.push_back(std::ldexp(1.999f, e));
  }
  for (const float amax : amaxes) {
    const PartialBlockScale s = partial_block_scale(amax);
    ASSERT_TRUE(is_power_of_two(s.encode)) << amax;
    ASSERT_TRUE(is_power_of_two(s.decode)) << amax;
    EXPECT_EQ(s.encode * s.decode, 1.f) << amax;  // exact reciprocals: decoding adds no error
    if (std::isnan(amax) || std::isinf(amax)) {
      EXPECT_EQ(s.encode, std::ldexp(1.f, -113)) << amax;
    } else if (biased_exponent(amax) >= 15) {  // amax >= 2^-112
      const double scaled = static_cast<double>(amax) * s.encode;
      EXPECT_GE(scaled, 16384.0) << amax;  // [2^14, 2^15): under fp16's 65504 after rounding too
      EXPECT_LT(scaled, 32768.0) << amax;
    } else {
      EXPECT_EQ(s.encode, std::ldexp(1.f, 126)) << amax;
      EXPECT_LT(static_cast<double>(amax) * s.encode, 16384.0) << amax;
    }
  }
}

TEST(PartialRows, Fp16RoundTripKeepsElevenBitsOfEveryValueThatMatters) {
  // Blocks of 64 values spread over many binades, at magnitudes from far below fp16's range to far above it
  // (a bf16 cache's values are not bounded by 65504).
  std::mt19937 rng(20261203);
  std::uniform_real_distribution<float> mantissa(-1.f, 1.f);
  std::uniform_int_distribution<int> spread(-40, 0);
  for (int center = -120; center <= 120; center += 8) {
    for (int trial = 0; trial < 20; ++trial) {
      float block[kPartialBlockCols];
      float amax = 0.f;
      for (float& v : block) {
        v = std::ldexp(mantissa(rng), center + spread(rng));
        amax = std::max(amax, std::fabs(v));
      }
      const PartialBlockScale s = partial_block_scale(amax);
      for (const float v : block) {
        const float back = fp8::fp16_to_float(fp8::float_to_fp16(v * s.encode)) * s.decode;
        ASSERT_TRUE(std::isfinite(back)) << v << " amax " << amax;
        const double err = std::fabs(static_cast<double>(back) - v);
        // 2^-11 relative down to 2^-28 of the block's largest value (fp16's normal range), and below that an
        // absolute error under 2^-39 of it (half fp16's subnormal step, 2^-25, times a decode scale of at most
        // 2^-14 of it); blocks under 2^-112 (encode clamped at 2^126) keep an absolute error under 2^-151.
        const double bound = std::max({std::fabs(static_cast<double>(v)) * std::ldexp(1.0, -11),
                                       static_cast<double>(amax) * std::ldexp(1.0, -39), std::ldexp(1.0, -151)});
        ASSERT_LE(err, bound) << v << " amax " << amax << " back " << back;
      }
    }
  }
}

TEST(PartialRows, NanStaysNanAndZeroStaysZero) {
  const PartialBlockScale nan_scale = partial_block_scale(std::numeric_limits<float>::quiet_NaN());
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isnan(fp8::fp16_to_float(fp8::float_to_fp16(nan * nan_scale.encode)) * nan_scale.decode));
  const PartialBlockScale zero_scale = partial_block_scale(0.f);
  EXPECT_EQ(fp8::fp16_to_float(fp8::float_to_fp16(0.f * zero_scale.encode)) * zero_scale.decode, 0.f);
}

TEST(PartialRows, RowIndexIsSlotMajor) {
  EXPECT_EQ(partial_row_index(0, 256, 5), 5u);
  EXPECT_EQ(partial_row_index(3, 256, 5), 3u * 256u + 5u);
  EXPECT_EQ(partial_row_index(70000, 2048, 2047), 70000ull * 2048ull + 2047ull);  // past 2^31: size_t math
}

}  // namespace
}  // namespace openmla::kernels
