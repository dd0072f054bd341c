// The FP8 accuracy study's core (tools/fp8_accuracy) at a reduced size: its errors are in the range
// quantization must give (not 0, which would mean the FP8 path was skipped; not large, which would
// mean a broken codec or harness), and its float64 baseline agrees with the library's reference.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "fp8_accuracy/fp8_accuracy.h"

namespace openmla::fp8_accuracy {
namespace {

StudyCase small_case(Distribution d, QueryKind q) {
  StudyCase c;
  c.dist = d;
  c.query = q;
  c.num_heads = 16;
  c.seqlen = 300;  // not a multiple of 64: a partial last page
  c.batch = 2;
  c.seed = 7;
  return c;
}

const LayoutRow& row_of(const CaseResult& r, const std::string& layout) {
  for (const LayoutRow& row : r.rows)
    if (row.layout == layout) return row;
  throw std::runtime_error("no row " + layout);
}

TEST(Fp8Accuracy, BaselineAgreesWithReferenceOnBf16Cache) {
  const StudyData data = make_study_data(small_case(Distribution::kChannelOutliers, QueryKind::kPeaky));
  const AttentionResult mine = attention_f64(data, round_to_bf16(data.kv));
  const AttentionResult ref = reference_on_cache(data, KVFormat::kBF16);
  const ErrorStats e = compare(mine, ref);
  EXPECT_LT(e.max_rel_l2, 1e-12);
  EXPECT_LT(e.max_lse_abs, 1e-12);
}

TEST(Fp8Accuracy, GaussianErrorsAreThoseOfQuantization) {
  for (QueryKind q : {QueryKind::kFlat, QueryKind::kPeaky}) {
    SCOPED_TRACE(query_name(q));
    const CaseResult r = run_case(small_case(Distribution::kGaussian, q), /*with_unit_scale_e4m3=*/false);
    ASSERT_EQ(r.rows.size(), 3u);
    const LayoutRow& bf16 = row_of(r, "bf16");
    EXPECT_GT(bf16.err.median_rel_l2, 0.0);
    EXPECT_LT(bf16.err.max_rel_l2, 1e-2);
    EXPECT_GT(bf16.kv_err.median, 1e-3);  // bf16: unit roundoff 2^-9, rms relative error ~1.7e-3
    EXPECT_LT(bf16.kv_err.max, 2.5e-3);
    for (const char* layout : {"fp8_e4m3", "fp8_ds_mla"}) {
      SCOPED_TRACE(layout);
      const LayoutRow& row = row_of(r, layout);
      EXPECT_EQ(row.reference, "bf16 cache");
      // Quantized (not skipped), and not broken: e4m3 keeps 3 mantissa bits, ~2.6% rms per value.
      EXPECT_GT(row.err.median_rel_l2, 5e-3);
      EXPECT_LT(row.err.max_rel_l2, 5e-2 * (q == QueryKind::kPeaky ? 2 : 1));
      EXPECT_GT(row.err.max_lse_abs, 0.0);
      EXPECT_LT(row.err.max_lse_abs, 0.2);
      EXPECT_GT(row.kv_err.median, 2e-2);
      EXPECT_LT(row.kv_err.max, 3.5e-2);
    }
    EXPECT_GT(r.e4m3_scale, 0.0f);
  }
}

TEST(Fp8Accuracy, DsMlaTileScalesKeepSmallChannelsNextToMassiveOnes) {
  // Channels 1000x the others: one per-tensor scale pushes the small channels into e4m3's
  // subnormals; ds_mla's per-128 scales lose precision only in the tiles holding a massive channel.
  const StudyData data = make_study_data(small_case(Distribution::kMassiveChannels, QueryKind::kFlat));
  const ChannelError e4m3 = channel_error(data, KVFormat::kFP8E4M3);
  const ChannelError ds_mla = channel_error(data, KVFormat::kFP8DsMla);
  EXPECT_GT(e4m3.max, 1.5 * ds_mla.max);
  EXPECT_LT(ds_mla.max, 0.1);
  EXPECT_LT(ds_mla.median, 3.5e-2);
  EXPECT_LT(e4m3.median, 3.5e-2);  // only the smallest channels fall below e4m3's normal range
  // Scale 1.0 with values above 448: saturation.
  const ChannelError unit = channel_error(data, KVFormat::kFP8E4M3, 1.0f);
  EXPECT_GT(unit.max, 0.5);
}

TEST(Fp8Accuracy, DataIsDeterministicAndQueryIndependent) {
  StudyCase c = small_case(Distribution::kTokenOutliers, QueryKind::kFlat);
  const StudyData a = make_study_data(c);
  c.query = QueryKind::kPeaky;
  const StudyData b = make_study_data(c);
  EXPECT_EQ(a.kv, b.kv);    // flat and peaky queries attend the same cache
  EXPECT_NE(a.q, b.q);
  EXPECT_EQ(make_study_data(c).q, b.q);
  EXPECT_FLOAT_EQ(static_cast<float>(a.softmax_scale), 1.0f / 24.0f);
}

// The FP8-math emulation: its e4m3 cache equals what the per-tensor cache decodes to; rounding q or
// P to e4m3 adds an error in the range e4m3's 3 mantissa bits give (not 0, not large); an e4m3 P
// leaves the lse untouched (the row sum stays exact).
TEST(Fp8Accuracy, Fp8MathEmulationAddsBoundedError) {
  const StudyData data = make_study_data(small_case(Distribution::kGaussian, QueryKind::kFlat));
  const std::vector<double> e4m3_kv = round_to_e4m3(data.kv);
  const AttentionResult on_cache = reference_on_cache(data, KVFormat::kFP8E4M3);
  const ErrorStats same = compare(attention_emulated(data, e4m3_kv, MathOptions{}), on_cache);
  EXPECT_LT(same.max_rel_l2, 1e-6);  // the reference applies the float32 scale in float; e4m3 steps are ~6e-2
  const AttentionResult storage = attention_emulated(data, e4m3_kv, MathOptions{false, PFormat::kBf16});
  const ErrorStats qk = compare(attention_emulated(data, e4m3_kv, MathOptions{true, PFormat::kBf16}), storage);
  EXPECT_GT(qk.median_rel_l2, 1e-4);
  EXPECT_LT(qk.max_rel_l2, 1e-1);
  EXPECT_GT(qk.max_lse_abs, 0.0);
  const ErrorStats pv = compare(attention_emulated(data, e4m3_kv, MathOptions{false, PFormat::kE4m3}), storage);
  EXPECT_GT(pv.median_rel_l2, 1e-5);
  EXPECT_LT(pv.max_rel_l2, 5e-2);
  EXPECT_EQ(pv.max_lse_abs, 0.0);
}

}  // namespace
}  // namespace openmla::fp8_accuracy
