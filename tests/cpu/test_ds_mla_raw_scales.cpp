// fp8_ds_mla caches written with raw tile scales (amax / 448, not a power of two): the reference
// reads every value as a plain float product e4m3 * scale, and its decode equals float64 attention
// over those values. (What each GPU kernel makes of such scales: docs/kv-formats.md.)
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "common/decode_data.h"
#include "openmla/fp8.h"
#include "openmla/reference.h"

namespace openmla::testing {
namespace {

DecodeData raw_scale_case() {
  DecodeCase c;
  c.batch_size = 2;
  c.q_len = 1;
  c.num_heads = 16;
  c.kv_format = KVFormat::kFP8DsMla;
  c.latent_log2_spread = 4;
  c.seqlens = {70, 200};
  c.seed = 31;
  DecodeData d = make_decode_data(c);
  EXPECT_GT(requantize_ds_mla_raw_scales(d), 500);  // of 4 x (270 used + unused finite) tokens
  return d;
}

TEST(DsMlaRawScales, ReadAsPlainFloatProducts) {
  const DecodeData d = raw_scale_case();
  const DecodeArgs args = d.host_args();
  int64_t checked = 0;
  for (int r = 0; r < d.c.batch_size; ++r) {
    for (int j = 0; j < d.seqlens[r]; ++j) {
      const int page = d.block_table[r * d.max_pages + j / kPageSize];
      const uint8_t* token = d.cache.data() + page * d.page_stride_bytes + int64_t{j % kPageSize} * kDsMlaBytesPerToken;
      float scales[4];
      std::memcpy(scales, token + kDsMlaScalesOffset, sizeof(scales));
      float got[kHeadDimQK];
      reference::read_kv_token(args.kv, page, j % kPageSize, got);
      for (int i = 0; i < kHeadDimV; ++i, ++checked)
        ASSERT_EQ(got[i], fp8::e4m3_to_float(token[i]) * scales[i / kDsMlaTile]) << "request " << r << " token " << j;
    }
  }
  EXPECT_EQ(checked, int64_t{270} * kHeadDimV);
}

TEST(DsMlaRawScales, ReferenceDecodeIsFloat64Attention) {
  const DecodeData d = raw_scale_case();
  const ReferenceResult ref = run_reference(d);
  ASSERT_EQ(ref.device_errors, 0u);
  const double softmax_scale = d.host_args().softmax_scale;
  const int h_q = d.c.num_heads;
  for (int r = 0; r < d.c.batch_size; ++r) {
    const int n = d.seqlens[r];
    // The values in float64: e4m3 * scale is exact there.
    std::vector<double> kv(static_cast<size_t>(n) * kHeadDimQK);
    for (int j = 0; j < n; ++j) {
      const int page = d.block_table[r * d.max_pages + j / kPageSize];
      const uint8_t* token = d.cache.data() + page * d.page_stride_bytes + int64_t{j % kPageSize} * kDsMlaBytesPerToken;
      float scales[4];
      std::memcpy(scales, token + kDsMlaScalesOffset, sizeof(scales));
      for (int i = 0; i < kHeadDimV; ++i)
        kv[size_t(j) * kHeadDimQK + i] = double(fp8::e4m3_to_float(token[i])) * double(scales[i / kDsMlaTile]);
      for (int i = 0; i < kRopeDim; ++i) {
        uint16_t bits;
        std::memcpy(&bits, token + kDsMlaRopeOffset + 2 * i, 2);
        kv[size_t(j) * kHeadDimQK + kHeadDimV + i] = fp8::bf16_to_float(bits);
      }
    }
    for (int h = 0; h < h_q; ++h) {
      const uint16_t* q = d.q.data() + (size_t(r) * h_q + h) * kHeadDimQK;
      std::vector<double> s(n);
      double mx = -INFINITY;
      for (int j = 0; j < n; ++j) {
        double dot = 0.0;
        for (int i = 0; i < kHeadDimQK; ++i) dot += double(fp8::bf16_to_float(q[i])) * kv[size_t(j) * kHeadDimQK + i];
        s[j] = dot * softmax_scale;
        mx = std::max(mx, s[j]);
      }
      double sum = 0.0;
      for (int j = 0; j < n; ++j) sum += std::exp(s[j] - mx);
      const size_t row = size_t(r) * h_q + h;
      // The reference dequantizes in float (e4m3 * scale rounded to float, 2^-24): a few ulps of float.
      EXPECT_NEAR(ref.lse[row], mx + std::log(sum), 1e-5 * std::max(1.0, std::fabs(ref.lse[row])));
      double max_ref = 0.0, max_err = 0.0;
      for (int i = 0; i < kHeadDimV; ++i) {
        double o = 0.0;
        for (int j = 0; j < n; ++j) o += std::exp(s[j] - mx) / sum * kv[size_t(j) * kHeadDimQK + i];
        max_ref = std::max(max_ref, std::fabs(o));
        max_err = std::max(max_err, std::fabs(o - ref.out[row * kHeadDimV + i]));
      }
      EXPECT_LE(max_err, 1e-5 * max_ref) << "request " << r << " head " << h;
    }
  }
}

}  // namespace
}  // namespace openmla::testing
