// The CPU reference is the oracle of every GPU test, so it is checked here against independent
// facts: a naive two-pass softmax, closed forms (equal scores, one dominating key), the meaning of
// causal, format equivalences, layouts, and the device-guard emulation.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "common/decode_data.h"
#include "openmla/error.h"
#include "openmla/fp8.h"
#include "openmla/reference.h"

namespace openmla {
namespace {

using testing::DecodeCase;
using testing::DecodeData;
using testing::make_decode_data;
using testing::ReferenceResult;
using testing::run_reference;

double q_value(const DecodeData& d, int64_t flat) {
  return d.c.q_dtype == DType::kBFloat16 ? fp8::bf16_to_float(d.q[flat]) : fp8::fp16_to_float(d.q[flat]);
}

int64_t q_index(const DecodeData& d, int r, int i, int h, int c) {
  return ((static_cast<int64_t>(r) * d.c.q_len + i) * d.c.num_heads + h) * kHeadDimQK + c;
}

// The FP8-math query row (DecodeOptions::fp8_math): e4m3(q * 2^-e) * 2^e, spelled out here.
std::vector<long double> fp8_math_query(const DecodeData& d, int r, int i, int h) {
  float amax = 0.0f;
  for (int c = 0; c < kHeadDimQK; ++c) amax = std::max(amax, std::fabs(static_cast<float>(q_value(d, q_index(d, r, i, h, c)))));
  const int e = fp8::fp8_math_query_exponent(amax);
  std::vector<long double> q(kHeadDimQK);
  for (int c = 0; c < kHeadDimQK; ++c) {
    const float x = std::ldexp(static_cast<float>(q_value(d, q_index(d, r, i, h, c))), -e);
    q[c] = std::ldexp(static_cast<long double>(fp8::e4m3_to_float(fp8::e4m3_from_float(x))), e);
  }
  return q;
}

// Straightforward two-pass softmax in long double, one row at a time: shares nothing with the
// reference's online, page-blocked loop except read_kv_token (tested in test_write_kv_ref.cpp).
// fp8_math: the FP8-math arithmetic in its two-pass form (quantized query; base = ceil of the
// row's largest score in log2 units; weight e4m3(256 p) / 256 with p = 2^(x - base); sums and LSE
// from the unrounded p), against which the reference's running-base version must agree.
ReferenceResult naive_reference(const DecodeData& d, bool fp8_math = false) {
  const DecodeArgs args = d.host_args();
  const int b = d.c.batch_size, s_q = d.c.q_len, h_q = d.c.num_heads;
  ReferenceResult res;
  res.out.assign(static_cast<size_t>(b) * s_q * h_q * kHeadDimV, 0.0);
  res.lse.assign(static_cast<size_t>(b) * s_q * h_q, 0.0);
  std::vector<float> kv;
  float token[kHeadDimQK];
  for (int r = 0; r < b; ++r) {
    const int seqlen = d.seqlens[r];
    kv.assign(static_cast<size_t>(seqlen) * kHeadDimQK, 0.0f);
    for (int t = 0; t < seqlen; ++t) {
      reference::read_kv_token(args.kv, d.block_table[r * d.max_pages + t / kPageSize], t % kPageSize, token);
      std::copy(token, token + kHeadDimQK, &kv[static_cast<size_t>(t) * kHeadDimQK]);
    }
    for (int i = 0; i < s_q; ++i)
      for (int h = 0; h < h_q; ++h) {
        const int64_t row = (static_cast<int64_t>(r) * s_q + i) * h_q + h;
        const int visible = d.c.causal && s_q > 1 ? seqlen - s_q + i + 1 : seqlen;
        if (visible <= 0) {
          res.lse[row] = -std::numeric_limits<double>::infinity();
          continue;
        }
        std::vector<long double> scores(visible);
        long double max_score = -INFINITY;
        std::vector<long double> q(kHeadDimQK);
        for (int c = 0; c < kHeadDimQK; ++c) q[c] = q_value(d, q_index(d, r, i, h, c));
        if (fp8_math) q = fp8_math_query(d, r, i, h);
        for (int t = 0; t < visible; ++t) {
          long double dot = 0;
          for (int c = 0; c < kHeadDimQK; ++c) dot += q[c] * kv[t * kHeadDimQK + c];
          scores[t] = dot * args.softmax_scale;
          max_score = std::max(max_score, scores[t]);
        }
        if (fp8_math) {
          const long double log2e = 1.442695040888963407359924681001892137L;
          const long double base = std::ceil(max_score * log2e);
          long double sum = 0;
          std::vector<long double> weight(visible);
          for (int t = 0; t < visible; ++t) {
            const long double p = std::exp2(scores[t] * log2e - base);
            sum += p;
            weight[t] = fp8::e4m3_to_float(fp8::e4m3_from_float(static_cast<float>(256.0L * p))) / 256.0L;
          }
          for (int c = 0; c < kHeadDimV; ++c) {
            long double acc = 0;
            for (int t = 0; t < visible; ++t) acc += weight[t] * kv[t * kHeadDimQK + c];
            res.out[row * kHeadDimV + c] = static_cast<double>(acc / sum);
          }
          res.lse[row] = static_cast<double>(base * std::log(2.0L) + std::log(sum));
          continue;
        }
        long double sum = 0;
        for (int t = 0; t < visible; ++t) sum += std::exp(scores[t] - max_score);
        for (int c = 0; c < kHeadDimV; ++c) {
          long double acc = 0;
          for (int t = 0; t < visible; ++t) acc += std::exp(scores[t] - max_score) * kv[t * kHeadDimQK + c];
          res.out[row * kHeadDimV + c] = static_cast<double>(acc / sum);
        }
        res.lse[row] = static_cast<double>(max_score + std::log(sum));
      }
  }
  return res;
}

void expect_close(const ReferenceResult& got, const ReferenceResult& want, double rel_tol, const std::string& what) {
  ASSERT_EQ(got.out.size(), want.out.size()) << what;
  ASSERT_EQ(got.lse.size(), want.lse.size()) << what;
  double scale = 0;
  for (double v : want.out) scale = std::max(scale, std::fabs(v));
  for (size_t k = 0; k < want.out.size(); ++k)
    ASSERT_NEAR(got.out[k], want.out[k], rel_tol * std::max(scale, 1e-300)) << what << " out[" << k << "]";
  for (size_t k = 0; k < want.lse.size(); ++k) {
    if (std::isinf(want.lse[k])) {
      ASSERT_EQ(got.lse[k], want.lse[k]) << what << " lse[" << k << "]";
    } else {
      ASSERT_NEAR(got.lse[k], want.lse[k], rel_tol * std::max(1.0, std::fabs(want.lse[k]))) << what << " lse[" << k << "]";
    }
  }
}

TEST(Reference, MatchesNaiveTwoPassSoftmaxInEveryFormat) {
  for (KVFormat f : {KVFormat::kBF16, KVFormat::kFP16, KVFormat::kFP8E4M3, KVFormat::kFP8DsMla}) {
    for (int variant = 0; variant < 3; ++variant) {
      DecodeCase c;
      c.batch_size = 3;
      c.num_heads = 8;
      c.kv_format = f;
      c.q_len = variant == 0 ? 1 : 3;
      c.causal = variant != 2;
      c.seqlens = {1, 64 + 17, 128};
      c.extra_table_slots = variant;  // 0: seqlen 128 fills the table exactly
      c.page_pad_tokens = variant == 1 ? 1 : 0;
      c.q_dtype = variant == 1 ? DType::kFloat16 : DType::kBFloat16;
      c.softmax_scale = variant == 2 ? 5.0f : 0.0f;  // large scores: the running max must hold
      c.kv_fp8_scale = 0.3f;
      c.seed = 100 + variant;
      if (c.causal && c.q_len > 1) c.seqlens[0] = 3;
      const DecodeData d = make_decode_data(c);
      const ReferenceResult ref = run_reference(d);
      EXPECT_EQ(ref.device_errors, 0u) << c.describe();
      for (double v : ref.out) ASSERT_TRUE(std::isfinite(v)) << "NaN page tail leaked: " << c.describe();
      expect_close(ref, naive_reference(d), 1e-12, c.describe());
    }
  }
}

// Writes one token (576 floats, rounded by the cache format) at KV position t of request r.
void set_token(DecodeData& d, int r, int t, const float* values576) {
  DecodeArgs args = d.host_args();
  int64_t slot = static_cast<int64_t>(d.block_table[r * d.max_pages + t / kPageSize]) * kPageSize + t % kPageSize;
  WriteKVArgs w;
  w.kv_latent = make_tensor(const_cast<float*>(values576), DType::kFloat32, {1, kHeadDimV});
  w.k_rope = make_tensor(const_cast<float*>(values576 + kHeadDimV), DType::kFloat32, {1, kRopeDim});
  w.slots = make_tensor(&slot, DType::kInt64, {1});
  w.cache = args.kv;
  ASSERT_EQ(reference::write_kv(w), 0u);
}

float bf16_round(float x) { return fp8::bf16_to_float(fp8::float_to_bf16(x)); }

TEST(Reference, Fp8MathMatchesTwoPassQuantizedSoftmax) {
  // The reference's running base (a power of two per change) must round every weight as the
  // two-pass form with the final base does; across lengths (one page, partial, many), causal.
  for (int q_len : {1, 3}) {
    DecodeCase c;
    c.batch_size = 5;
    c.q_len = q_len;
    c.num_heads = 8;
    c.kv_format = KVFormat::kFP8E4M3;
    c.kv_fp8_scale = 0.05f;
    c.q_log2_scale = 7;  // a query far from 1: the per-row exponent matters
    c.softmax_scale = std::ldexp(1.0f / 24.0f, -7 + 4);  // peaky rows too
    c.seqlens = {3, 5, 64, 130, 700};
    c.seed = 11 + q_len;
    const DecodeData d = make_decode_data(c);
    const ReferenceResult fp8 = run_reference(d, Fp8Math::kQkAndPv);
    // Equal but for weights below 2^-14 of their base (e4m3 subnormals of 256 p, rounded on a grid
    // that depends on the base): each off by < 2^-18 of the largest weight.
    expect_close(fp8, naive_reference(d, true), 1e-4, "fp8 math vs two-pass");
    // And it is not the exact arithmetic (the test could not fail otherwise): the quantized query
    // and weights move the outputs (on these peaky rows, by up to ~30% of the largest output where
    // near-tied scores swap; docs/fp8-accuracy.md).
    const ReferenceResult exact = run_reference(d);
    double worst = 0, scale = 0;
    for (size_t k = 0; k < exact.out.size(); ++k) {
      worst = std::max(worst, std::fabs(fp8.out[k] - exact.out[k]));
      scale = std::max(scale, std::fabs(exact.out[k]));
    }
    EXPECT_GT(worst / scale, 1e-4);
    EXPECT_LT(worst / scale, 1.0);
  }
  // Only for per-tensor e4m3 caches.
  DecodeCase c;
  c.seqlens = {5};
  const DecodeData d = make_decode_data(c);
  EXPECT_THROW(run_reference(d, Fp8Math::kQkAndPv), Error);
}

TEST(Reference, EqualScoresGiveTheMeanOfValues) {
  DecodeCase c;
  c.num_heads = 8;
  c.seqlens = {100};
  DecodeData d = make_decode_data(c);
  // All keys share the rope part and q is zero on the latent part: every score is equal.
  std::vector<float> token(kHeadDimQK);
  std::vector<double> mean(kHeadDimV, 0.0);
  for (int t = 0; t < 100; ++t) {
    for (int j = 0; j < kHeadDimQK; ++j) token[j] = j < kHeadDimV ? std::sin(0.37f * t + j) * 3 : std::cos(0.11f * j);
    set_token(d, 0, t, token.data());
    for (int j = 0; j < kHeadDimV; ++j) mean[j] += bf16_round(token[j]) / 100.0;
  }
  for (int h = 0; h < c.num_heads; ++h)
    for (int j = 0; j < kHeadDimV; ++j) d.q[q_index(d, 0, 0, h, j)] = 0;
  const ReferenceResult ref = run_reference(d);
  const double sigma = d.host_args().softmax_scale;
  for (int h = 0; h < c.num_heads; ++h) {
    double score = 0;
    for (int j = kHeadDimV; j < kHeadDimQK; ++j)
      score += q_value(d, q_index(d, 0, 0, h, j)) * bf16_round(std::cos(0.11f * j));
    EXPECT_NEAR(ref.lse[h], std::log(100.0) + sigma * score, 1e-12);
    for (int j = 0; j < kHeadDimV; ++j) ASSERT_NEAR(ref.out[h * kHeadDimV + j], mean[j], 1e-12) << h << " " << j;
  }
}

TEST(Reference, OneDominatingKeyGivesItsValue) {
  DecodeCase c;
  c.num_heads = 8;
  c.seqlens = {150};
  DecodeData d = make_decode_data(c);
  const int hot = 97;
  std::vector<float> token(kHeadDimQK);
  for (int t = 0; t < 150; ++t) {  // rope part zero except for the hot token
    for (int j = 0; j < kHeadDimQK; ++j) token[j] = j < kHeadDimV ? std::cos(0.5f * t + 0.1f * j) : 0.0f;
    if (t == hot)
      for (int j = kHeadDimV; j < kHeadDimQK; ++j) token[j] = 1.0f;
    set_token(d, 0, t, token.data());
  }
  for (int h = 0; h < c.num_heads; ++h)
    for (int j = 0; j < kHeadDimQK; ++j)
      d.q[q_index(d, 0, 0, h, j)] = fp8::float_to_bf16(j < kHeadDimV ? 0.0f : 25.0f + h);  // score 64*(25+h)/24
  const ReferenceResult ref = run_reference(d);
  const double sigma = d.host_args().softmax_scale;
  for (int h = 0; h < c.num_heads; ++h) {
    const double s_hot = sigma * 64 * (25.0 + h);  // other scores are exactly 0
    const double w_hot = 1.0 / (1.0 + 149 * std::exp(-s_hot));
    EXPECT_NEAR(ref.lse[h], s_hot + std::log1p(149 * std::exp(-s_hot)), 1e-12);
    for (int j = 0; j < kHeadDimV; ++j) {
      double rest = 0;
      for (int t = 0; t < 150; ++t)
        if (t != hot) rest += bf16_round(std::cos(0.5f * t + 0.1f * j));
      const double want = w_hot * bf16_round(std::cos(0.5f * hot + 0.1f * j)) + (1 - w_hot) * rest / 149;
      ASSERT_NEAR(ref.out[h * kHeadDimV + j], want, 1e-12) << h << " " << j;
      ASSERT_NEAR(ref.out[h * kHeadDimV + j], bf16_round(std::cos(0.5f * hot + 0.1f * j)), 1e-9);
    }
  }
}

// Request r's data as a single-token decode of query token i with the given length.
DecodeData single_token_view(const DecodeData& d, int r, int i, int seqlen) {
  DecodeData one = d;
  one.c.batch_size = 1;
  one.c.q_len = 1;
  one.c.seqlens = {seqlen};
  one.shape.batch_size = 1;
  one.shape.q_len = 1;
  one.seqlens = {seqlen};
  one.q.assign(d.q.begin() + q_index(d, r, i, 0, 0), d.q.begin() + q_index(d, r, i, 0, 0) + d.c.num_heads * kHeadDimQK);
  one.block_table.assign(d.block_table.begin() + r * d.max_pages, d.block_table.begin() + (r + 1) * d.max_pages);
  return one;
}

TEST(Reference, CausalMultiTokenEqualsSingleTokenOnTruncatedLengths) {
  for (bool causal : {true, false}) {
    DecodeCase c;
    c.batch_size = 3;
    c.q_len = 4;
    c.num_heads = 16;
    c.causal = causal;
    c.seqlens = {4, 67, 129};
    c.kv_format = KVFormat::kFP8DsMla;
    const DecodeData d = make_decode_data(c);
    const ReferenceResult all = run_reference(d);
    for (int r = 0; r < c.batch_size; ++r)
      for (int i = 0; i < c.q_len; ++i) {
        // Causal: token i sits at position seqlen - s_q + i and sees positions up to it.
        const int len = causal ? c.seqlens[r] - c.q_len + i + 1 : c.seqlens[r];
        const ReferenceResult one = run_reference(single_token_view(d, r, i, len));
        for (int h = 0; h < c.num_heads; ++h) {
          const int64_t row = (static_cast<int64_t>(r) * c.q_len + i) * c.num_heads + h;
          ASSERT_EQ(all.lse[row], one.lse[h]) << c.describe() << " r=" << r << " i=" << i;
          for (int j = 0; j < kHeadDimV; ++j) ASSERT_EQ(all.out[row * kHeadDimV + j], one.out[h * kHeadDimV + j]);
        }
      }
  }
}

TEST(Reference, LengthZeroGivesZeroOutAndMinusInfLse) {
  for (int q_len : {1, 2}) {
    DecodeCase c;
    c.batch_size = 3;
    c.q_len = q_len;
    c.num_heads = 8;
    c.causal = q_len == 1;  // causal with s_q > 1 and length 0 is a guard case, tested below
    c.seqlens = {0, 1, 0};
    const DecodeData d = make_decode_data(c);
    const ReferenceResult ref = run_reference(d);
    EXPECT_EQ(ref.device_errors, 0u);
    const int64_t rows = static_cast<int64_t>(q_len) * c.num_heads;
    for (int r : {0, 2})
      for (int64_t k = 0; k < rows; ++k) {
        EXPECT_EQ(ref.lse[r * rows + k], -std::numeric_limits<double>::infinity());
        for (int j = 0; j < kHeadDimV; ++j) ASSERT_EQ(ref.out[(r * rows + k) * kHeadDimV + j], 0.0);
      }
    // Length 1: out is that token's value row exactly (weight 1), lse is its score.
    for (int64_t k = 0; k < rows; ++k) EXPECT_TRUE(std::isfinite(ref.lse[rows + k]));
  }
}

TEST(Reference, Fp8FormatsEqualBf16ReferenceOnTheDequantizedCache) {
  // ds_mla values are e4m3 * 2^c and fp8_e4m3 with a power-of-two scale are e4m3 * 2^c: both exact
  // in bf16, so a bf16 cache holding the dequantized values must give identical results.
  for (KVFormat f : {KVFormat::kFP8DsMla, KVFormat::kFP8E4M3}) {
    DecodeCase c;
    c.batch_size = 2;
    c.q_len = 2;
    c.num_heads = 16;
    c.seqlens = {70, 129};
    c.kv_format = f;
    c.kv_fp8_scale = 0.25f;
    const DecodeData fp8 = make_decode_data(c);
    DecodeCase cb = c;
    cb.kv_format = KVFormat::kBF16;
    DecodeData bf = make_decode_data(cb);
    bf.q = fp8.q;
    bf.block_table = fp8.block_table;
    const DecodeArgs fp8_args = fp8.host_args();
    float token[kHeadDimQK];
    for (int r = 0; r < c.batch_size; ++r)
      for (int t = 0; t < c.seqlens[r]; ++t) {
        reference::read_kv_token(fp8_args.kv, fp8.block_table[r * fp8.max_pages + t / kPageSize], t % kPageSize, token);
        for (float v : token) ASSERT_EQ(v, bf16_round(v));
        set_token(bf, r, t, token);
      }
    expect_close(run_reference(fp8), run_reference(bf), 0.0, kv_format_name(f));
  }
}

TEST(Reference, Fp8TensorScaleActsLinearly) {
  // value = e4m3 * s, so (scale s, softmax_scale a) equals s * (scale 1, softmax_scale a * s) on out.
  DecodeCase c;
  c.batch_size = 2;
  c.num_heads = 8;
  c.seqlens = {33, 100};
  c.kv_format = KVFormat::kFP8E4M3;
  c.kv_fp8_scale = 0.037f;
  c.softmax_scale = 0.05f;
  const DecodeData scaled = make_decode_data(c);
  DecodeData unit = scaled;
  unit.c.kv_fp8_scale = 1.0f;
  unit.c.softmax_scale = static_cast<float>(0.05 * 0.037);
  ReferenceResult a = run_reference(scaled);
  ReferenceResult b = run_reference(unit);
  for (double& v : b.out) v *= 0.037f;
  expect_close(a, b, 2e-6, "fp8 scale linearity");  // float products of scale and softmax_scale
}

TEST(Reference, LseLayoutAndOutputDtypesGiveTheSameNumbers) {
  DecodeCase c;
  c.batch_size = 2;
  c.q_len = 3;
  c.num_heads = 8;
  c.seqlens = {50, 90};
  const DecodeData d = make_decode_data(c);
  const ReferenceResult rowmajor = run_reference(d);
  DecodeData flash = d;
  flash.c.lse_flashmla_layout = true;
  expect_close(run_reference(flash), rowmajor, 0.0, "lse [b, h_q, s_q]");

  // float32 out with padded rows, float32 lse in FlashMLA's [b, h_q, s_q] storage.
  const int64_t b = 2, s_q = 3, h_q = 8, row_pitch = kHeadDimV + 16;
  std::vector<float> out(b * s_q * h_q * row_pitch, -1.0f), lse(b * s_q * h_q);
  std::vector<uint16_t> out_bf16(b * s_q * h_q * kHeadDimV);
  DecodeArgs args = d.host_args();
  args.out = make_tensor_strided(out.data(), DType::kFloat32, {b, s_q, h_q, kHeadDimV},
                                 {s_q * h_q * row_pitch, h_q * row_pitch, row_pitch, 1});
  args.lse = make_tensor_strided(lse.data(), DType::kFloat32, {b, s_q, h_q}, {h_q * s_q, 1, s_q});
  EXPECT_EQ(reference::decode(args, d.shape), 0u);
  args.out = make_tensor(out_bf16.data(), DType::kBFloat16, {b, s_q, h_q, kHeadDimV});
  EXPECT_EQ(reference::decode(args, d.shape), 0u);
  for (int64_t r = 0; r < b; ++r)
    for (int64_t i = 0; i < s_q; ++i)
      for (int64_t h = 0; h < h_q; ++h) {
        const int64_t row = (r * s_q + i) * h_q + h;
        EXPECT_EQ(lse[r * h_q * s_q + h * s_q + i], static_cast<float>(rowmajor.lse[row]));
        for (int64_t j = 0; j < kHeadDimV; ++j) {
          const float want = static_cast<float>(rowmajor.out[row * kHeadDimV + j]);
          ASSERT_EQ(out[row * row_pitch + j], want);
          ASSERT_EQ(out_bf16[row * kHeadDimV + j], fp8::float_to_bf16(want));
        }
        for (int64_t j = kHeadDimV; j < row_pitch; ++j) ASSERT_EQ(out[row * row_pitch + j], -1.0f);  // padding
      }
}

TEST(Reference, DeviceGuardsGiveNanRowsAndErrorBitsWithoutTouchingOtherRequests) {
  DecodeCase c;
  c.batch_size = 6;
  c.q_len = 2;
  c.num_heads = 8;
  c.causal = true;
  // 0: fine; 1: negative; 2: beyond the table; 3: below the query length (causal, s_q = 2);
  // 4 and 5: a page id out of range among the pages they use.
  c.seqlens = {70, -5, testing::kMaxBackedSeqlen + 1, 1, 40, 90};
  DecodeData d = make_decode_data(c);
  d.block_table[4 * d.max_pages + 0] = d.num_pages;
  d.block_table[5 * d.max_pages + 1] = -1;
  const ReferenceResult ref = run_reference(d);
  EXPECT_EQ(ref.device_errors, unsigned{kDeviceErrorNegativeSeqlen | kDeviceErrorSeqlenBeyondTable |
                                        kDeviceErrorSeqlenBelowQueryLen | kDeviceErrorPageIdOutOfRange})
      << describe_device_errors(ref.device_errors);
  const int64_t rows = static_cast<int64_t>(c.q_len) * c.num_heads;
  for (int r = 1; r < c.batch_size; ++r)
    for (int64_t k = r * rows; k < (r + 1) * rows; ++k) {
      ASSERT_TRUE(std::isnan(ref.lse[k])) << "request " << r;
      for (int j = 0; j < kHeadDimV; ++j) ASSERT_TRUE(std::isnan(ref.out[k * kHeadDimV + j])) << "request " << r;
    }
  // Request 0 alone gives the same rows: bad neighbours change nothing.
  DecodeData alone = d;
  alone.c.batch_size = alone.shape.batch_size = 1;
  alone.c.seqlens = alone.seqlens = {70};
  alone.q.resize(rows * kHeadDimQK);
  alone.block_table.resize(d.max_pages);
  const ReferenceResult ref0 = run_reference(alone);
  EXPECT_EQ(ref0.device_errors, 0u);
  for (int64_t k = 0; k < rows; ++k) {
    ASSERT_EQ(ref.lse[k], ref0.lse[k]);
    for (int j = 0; j < kHeadDimV; ++j) ASSERT_EQ(ref.out[k * kHeadDimV + j], ref0.out[k * kHeadDimV + j]);
  }

  // Each guard alone raises exactly its own bit.
  struct Single {
    int seqlen;
    int bad_page_column;  // -1: table untouched
    unsigned bit;
  };
  for (Single s : {Single{-1, -1, kDeviceErrorNegativeSeqlen}, Single{testing::kMaxBackedSeqlen + 64, -1, kDeviceErrorSeqlenBeyondTable},
                   Single{1, -1, kDeviceErrorSeqlenBelowQueryLen}, Single{65, 1, kDeviceErrorPageIdOutOfRange}}) {
    DecodeCase one = c;
    one.batch_size = 2;
    one.seqlens = {s.seqlen, 10};
    DecodeData od = make_decode_data(one);
    if (s.bad_page_column >= 0) od.block_table[s.bad_page_column] = 2147480000;
    EXPECT_EQ(run_reference(od).device_errors, s.bit) << one.describe();
  }
  // Not guards: non-causal lengths below s_q, table entries past the used pages, length 0 with s_q = 1.
  DecodeCase fine = c;
  fine.batch_size = 2;
  fine.causal = false;
  fine.seqlens = {1, 0};
  EXPECT_EQ(run_reference(make_decode_data(fine)).device_errors, 0u);
  // Length 0 under causal s_q > 1 is an empty request (batch padding): out 0, lse -inf, no error.
  DecodeCase padding = c;
  padding.batch_size = 2;
  padding.seqlens = {0, 10};
  const ReferenceResult pad = run_reference(make_decode_data(padding));
  EXPECT_EQ(pad.device_errors, 0u);
  for (int64_t k = 0; k < rows; ++k) {
    ASSERT_EQ(pad.lse[k], -std::numeric_limits<double>::infinity());
    for (int j = 0; j < kHeadDimV; ++j) ASSERT_EQ(pad.out[k * kHeadDimV + j], 0.0);
  }
}

TEST(Reference, PortableKernelsAgreeWithTheDefaultOnes) {
  DecodeCase c;
  c.batch_size = 2;
  c.q_len = 2;
  c.num_heads = 64;
  c.seqlens = {200, 77};
  c.kv_format = KVFormat::kFP16;
  const DecodeData d = make_decode_data(c);
  const ReferenceResult fast = run_reference(d);
  ASSERT_EQ(setenv("OPENMLA_REFERENCE_SIMD", "generic", 1), 0);
  const ReferenceResult portable = run_reference(d);
  unsetenv("OPENMLA_REFERENCE_SIMD");
  expect_close(portable, fast, 1e-13, "generic vs default kernels");
}

TEST(Reference, LargeCaseIsFast) {
  DecodeCase c;
  c.batch_size = 4;
  c.q_len = 4;
  c.num_heads = 128;
  c.seqlens = {4096, 4096, 4096, 4096};
  const DecodeData d = make_decode_data(c);
  // CPU time of all threads: stable on a shared machine, unlike wall time.
  const std::clock_t cpu_start = std::clock();
  const auto start = std::chrono::steady_clock::now();
  const ReferenceResult ref = run_reference(d);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double cpu_seconds = static_cast<double>(std::clock() - cpu_start) / CLOCKS_PER_SEC;
  std::printf("reference decode b=4 s_q=4 h_q=128 s_k=4096 (18 GFLOP in float64): %.3f s wall, %.3f s CPU\n",
              seconds, cpu_seconds);
  EXPECT_EQ(ref.device_errors, 0u);
  // About 1.3 s of one AVX2 core; the bound leaves room for older cores and the 2-wide path.
  EXPECT_LT(cpu_seconds, 5.0) << "the oracle became too slow for the GPU test sweeps";
}

// Device-held FP8 scales (DecodeShape::device_scales) read by the reference from host tensors: the cache scale as a
// tensor gives the host-float results bit for bit; an e4m3 query gives what its dequantized values give (exact in
// bf16 under a power-of-two query scale).
TEST(Reference, DeviceHeldScalesEqualHostScalesAndDequantizedQueries) {
  DecodeCase c;
  c.batch_size = 4;
  c.q_len = 2;
  c.num_heads = 16;
  c.kv_format = KVFormat::kFP8E4M3;
  c.kv_fp8_scale = 0.37f;
  c.seqlens = {0, 2, 65, 300};
  c.seed = 11;
  const ReferenceResult host = run_reference(make_decode_data(c));
  c.device_scales = true;
  const ReferenceResult device = run_reference(make_decode_data(c));
  ASSERT_EQ(host.out.size(), device.out.size());
  for (size_t k = 0; k < host.out.size(); ++k) ASSERT_EQ(std::memcmp(&host.out[k], &device.out[k], 8), 0) << k;
  for (size_t k = 0; k < host.lse.size(); ++k) ASSERT_EQ(std::memcmp(&host.lse[k], &device.lse[k], 8), 0) << k;

  c.fp8_query = true;
  c.q_fp8_scale = 0x1p-7f;  // every code * 2^-7 is a bf16 value
  const DecodeData fp8 = make_decode_data(c);
  DecodeCase plain = c;
  plain.fp8_query = false;
  DecodeData dequantized = make_decode_data(plain);
  for (size_t k = 0; k < fp8.q_fp8.size(); ++k) {
    const float v = fp8::e4m3_to_float(fp8.q_fp8[k]) * fp8.q_scale;
    dequantized.q[k] = fp8::float_to_bf16(v);
    ASSERT_EQ(fp8::bf16_to_float(dequantized.q[k]), v) << k;
  }
  const ReferenceResult a = run_reference(fp8), b = run_reference(dequantized);
  int64_t finite = 0;
  for (size_t k = 0; k < a.out.size(); ++k) {
    ASSERT_EQ(std::memcmp(&a.out[k], &b.out[k], 8), 0) << k;
    finite += std::isfinite(a.out[k]);
  }
  for (size_t k = 0; k < a.lse.size(); ++k) ASSERT_EQ(std::memcmp(&a.lse[k], &b.lse[k], 8), 0) << k;
  EXPECT_GT(finite, 0);
  // The query scale matters: another scale gives other scores.
  DecodeData rescaled = fp8;
  rescaled.q_scale *= 2.0f;
  EXPECT_NE(run_reference(rescaled).lse[2 * 16], a.lse[2 * 16]);
}

// A device-held scale that is not finite and > 0: kDeviceErrorScale, NaN rows for every request that sees a key,
// out 0 / lse -inf for empty ones (as the kernels: every score is NaN, an empty row weighs nothing).
TEST(Reference, BadDeviceScalesGiveNanRowsAndTheScaleBit) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  for (bool bad_query_scale : {false, true})
    for (float bad : {nan, 0.0f, -1.0f, inf}) {
      DecodeCase c;
      c.batch_size = 3;
      c.num_heads = 8;
      c.kv_format = KVFormat::kFP8E4M3;
      c.device_scales = true;
      c.fp8_query = bad_query_scale;
      c.seqlens = {0, 5, 70};
      DecodeData d = make_decode_data(c);
      (bad_query_scale ? d.q_scale : d.kv_scale) = bad;
      const ReferenceResult r = run_reference(d);
      SCOPED_TRACE(std::string(bad_query_scale ? "q_scale " : "kv scale ") + std::to_string(bad));
      EXPECT_EQ(r.device_errors, unsigned{kDeviceErrorScale});
      for (int h = 0; h < 8; ++h) {
        EXPECT_EQ(r.lse[h], -std::numeric_limits<double>::infinity());
        EXPECT_EQ(r.out[h * kHeadDimV], 0.0);
        EXPECT_TRUE(std::isnan(r.lse[8 + h]));
        EXPECT_TRUE(std::isnan(r.lse[16 + h]));
        EXPECT_TRUE(std::isnan(r.out[(16 + h) * kHeadDimV + 7]));
      }
    }
}

}  // namespace
}  // namespace openmla
