// The shared GPU-test data generator and comparison (tests/common/decode_data.h).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <set>
#include <vector>

#include "common/decode_data.h"
#include "openmla/error.h"
#include "openmla/fp8.h"

namespace openmla {
namespace {

using testing::DecodeCase;
using testing::DecodeData;

bool token_bytes_all_ff(const DecodeData& d, int64_t page, int offset) {
  const int bytes = kv_bytes_per_token(d.c.kv_format);
  const uint8_t* p = d.cache.data() + page * d.page_stride_bytes + static_cast<int64_t>(offset) * bytes;
  for (int i = 0; i < bytes; ++i)
    if (p[i] != 0xFF) return false;
  return true;
}

TEST(DecodeData, ShuffledTableNaNPoisonAndBadSeqlens) {
  DecodeCase c;
  c.batch_size = 4;
  c.q_len = 2;
  c.num_heads = 8;
  c.seqlens = {65, -3, 0, testing::kMaxBackedSeqlen + 5};
  c.extra_pages = 2;
  c.extra_table_slots = 2;
  c.page_pad_tokens = 1;
  c.kv_format = KVFormat::kFP8DsMla;
  const DecodeData d = make_decode_data(c);
  EXPECT_EQ(d.max_pages, 2 + 2);                  // the longest backed request (65 -> 2 pages) + 2
  EXPECT_EQ(d.num_pages, 2 + 0 + 0 + 4 + 2);     // the unbacked request gets a full row of 4
  EXPECT_EQ(d.page_stride_bytes, 65 * 656);
  EXPECT_EQ(d.cache.size(), static_cast<size_t>(d.num_pages * d.page_stride_bytes));
  EXPECT_EQ(d.q.size(), static_cast<size_t>(4 * 2 * 8 * 576));
  const int32_t kFiller = 2147480000;
  const std::vector<int> used = {2, 0, 0, 4};
  std::set<int32_t> ids;
  for (int r = 0; r < 4; ++r)
    for (int j = 0; j < d.max_pages; ++j) {
      const int32_t id = d.block_table[r * d.max_pages + j];
      if (j < used[r]) {
        ASSERT_GE(id, 0);
        ASSERT_LT(id, d.num_pages);
        EXPECT_TRUE(ids.insert(id).second) << "page " << id << " used twice";
      } else {
        EXPECT_EQ(id, kFiller);
      }
    }
  // Request 0: 65 tokens -> page 0 full, page 1 holds 1 token then NaN bytes, and the pad token.
  const int32_t last = d.block_table[1];
  EXPECT_FALSE(token_bytes_all_ff(d, last, 0));
  for (int offset = 1; offset < 65; ++offset) EXPECT_TRUE(token_bytes_all_ff(d, last, offset)) << offset;
  EXPECT_TRUE(token_bytes_all_ff(d, d.block_table[0], 64));  // page padding
  // Unused pages are NaN throughout.
  for (int32_t page = 0; page < d.num_pages; ++page) {
    if (ids.count(page)) continue;
    for (int offset = 0; offset < 65; ++offset) ASSERT_TRUE(token_bytes_all_ff(d, page, offset));
  }
  EXPECT_EQ(ids.size(), 6u);
  // The views describe the same buffers.
  const DecodeArgs args = d.host_args();
  EXPECT_EQ(args.kv.data.strides[0], 65 * 656);
  EXPECT_EQ(args.kv.data.dtype, DType::kUInt8);
  EXPECT_EQ(args.block_table.shape[1], d.max_pages);
  EXPECT_FLOAT_EQ(args.softmax_scale, 1.0f / 24.0f);
  EXPECT_EQ(c.describe(), "b=4 s_q=2 h_q=8 fp8_ds_mla causal lens=[65,-3,0,1048581] page_pad=1 seed=1");
}

TEST(DecodeData, DescribeAndDeterminism) {
  DecodeCase c;
  c.batch_size = 3;
  c.q_len = 2;
  c.num_heads = 16;
  c.seqlens = {0, 1, 65};
  EXPECT_EQ(c.describe(), "b=3 s_q=2 h_q=16 bf16 causal lens=[0,1,65] seed=1");
  const DecodeData a = make_decode_data(c), b = make_decode_data(c);
  EXPECT_EQ(a.q, b.q);
  EXPECT_EQ(a.cache, b.cache);
  EXPECT_EQ(a.block_table, b.block_table);
  c.seed = 2;
  EXPECT_NE(make_decode_data(c).q, a.q);
  c.batch_size = 2;
  EXPECT_THROW(make_decode_data(c), Error);  // 3 seqlens for 2 requests
}

TEST(CompareDecode, AcceptsRoundedOracleAndReportsFaults) {
  DecodeCase c;
  c.batch_size = 2;
  c.num_heads = 8;
  c.seqlens = {40, 0};
  const DecodeData d = make_decode_data(c);
  const testing::ReferenceResult ref = testing::run_reference(d);
  std::vector<uint16_t> out(ref.out.size());
  std::vector<float> lse(ref.lse.size());
  for (size_t k = 0; k < out.size(); ++k) out[k] = fp8::float_to_bf16(static_cast<float>(ref.out[k]));
  for (size_t k = 0; k < lse.size(); ++k) lse[k] = static_cast<float>(ref.lse[k]);
  testing::CompareResult ok = testing::compare_decode(d, ref, out, lse);
  EXPECT_TRUE(ok.ok) << ok.message;
  EXPECT_LE(ok.max_out_rel_err, 1.0 / 256);

  // A value off by 10% of the request's largest value: named with its index.
  std::vector<uint16_t> bad = out;
  double ref_max = 0;
  for (int k = 0; k < 8 * 512; ++k) ref_max = std::max(ref_max, std::fabs(ref.out[k]));
  bad[3 * 512 + 7] = fp8::float_to_bf16(static_cast<float>(ref.out[3 * 512 + 7] + 0.1 * ref_max));
  testing::CompareResult off = testing::compare_decode(d, ref, bad, lse);
  EXPECT_FALSE(off.ok);
  EXPECT_NEAR(off.max_out_rel_err, 0.1, 0.01);
  EXPECT_NE(off.message.find("out[0, 0, 3, 7]"), std::string::npos) << off.message;

  // A NaN where the oracle has a number, and a finite lse where it has -inf (length 0).
  bad = out;
  bad[5] = 0x7FC0;
  std::vector<float> bad_lse = lse;
  bad_lse[8] = 0.0f;
  testing::CompareResult nan = testing::compare_decode(d, ref, bad, bad_lse);
  EXPECT_FALSE(nan.ok);
  EXPECT_NE(nan.message.find("2 NaN/inf position mismatch"), std::string::npos) << nan.message;

  // lse tolerance.
  bad_lse = lse;
  bad_lse[2] += 0.01f * std::max(1.0f, std::fabs(bad_lse[2]));
  testing::CompareResult lse_off = testing::compare_decode(d, ref, out, bad_lse);
  EXPECT_FALSE(lse_off.ok);
  EXPECT_NE(lse_off.message.find("lse[0, 0, 2]"), std::string::npos) << lse_off.message;

  EXPECT_FALSE(testing::compare_decode(d, ref, std::vector<uint16_t>(3), lse).ok);
}

}  // namespace
}  // namespace openmla
