// The oracle on speculative query shapes (ragged query counts, tree masks), checked against independent facts:
// a ragged request equals its own uniform decode, a chain mask equals the causal mask, tree rows equal a naive
// two-pass softmax over exactly the keys their mask names, and the device guards of the new arguments.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "common/spec_data.h"
#include "openmla/error.h"
#include "openmla/fp8.h"
#include "openmla/reference.h"

namespace openmla {
namespace {

using testing::DecodeCase;
using testing::MaskRows;
using testing::ReferenceResult;
using testing::SpecCase;
using testing::SpecData;

DecodeCase base_case(int q_len, int h_q, std::vector<int> seqlens, uint64_t seed) {
  return testing::spec_base_case(q_len, h_q, std::move(seqlens), KVFormat::kBF16, seed);
}

// Request r's result as a uniform decode of one request: views into the spec data's buffers.
ReferenceResult single_request(const SpecData& d, int r, bool causal) {
  const int n = d.count(r), h_q = d.c.base.num_heads;
  DecodeArgs a = d.host_args();
  DecodeShape shape = d.data.shape;
  shape.batch_size = 1;
  shape.q_len = n;
  shape.causal = causal;
  a.q = make_tensor(const_cast<uint16_t*>(d.q.data()) + d.first_token(r) * h_q * kHeadDimQK, d.c.base.q_dtype,
                    {1, n, h_q, kHeadDimQK});
  a.q_indptr = TensorView{};
  a.mask = TensorView{};
  a.block_table = make_tensor(const_cast<int32_t*>(d.data.block_table.data()) + r * d.data.max_pages, DType::kInt32,
                              {1, d.data.max_pages});
  a.cache_seqlens = make_tensor(const_cast<int32_t*>(d.data.seqlens.data()) + r, DType::kInt32, {1});
  ReferenceResult res;
  res.out.resize(static_cast<size_t>(n) * h_q * kHeadDimV);
  res.lse.resize(static_cast<size_t>(n) * h_q);
  a.out = make_tensor(res.out.data(), DType::kFloat64, {1, n, h_q, kHeadDimV});
  a.lse = make_tensor(res.lse.data(), DType::kFloat64, {1, n, h_q});
  res.device_errors = reference::decode(a, shape);
  return res;
}

// Rows [row0, row0 + rows) of got equal want's first rows exactly (NaN equal to NaN).
void expect_rows_equal(const ReferenceResult& got, int64_t row0, const ReferenceResult& want, int64_t rows,
                       const char* what) {
  auto same = [](double a, double b) { return (std::isnan(a) && std::isnan(b)) || a == b; };
  for (int64_t k = 0; k < rows * kHeadDimV; ++k)
    ASSERT_TRUE(same(got.out[row0 * kHeadDimV + k], want.out[k]))
        << what << ": out row " << row0 + k / kHeadDimV << " col " << k % kHeadDimV << " = "
        << got.out[row0 * kHeadDimV + k] << ", expected " << want.out[k];
  for (int64_t k = 0; k < rows; ++k)
    ASSERT_TRUE(same(got.lse[row0 + k], want.lse[k]))
        << what << ": lse row " << row0 + k << " = " << got.lse[row0 + k] << ", expected " << want.lse[k];
}

TEST(SpecReference, RaggedRequestsEqualTheirOwnUniformDecodes) {
  for (bool causal : {true, false}) {
    SpecCase c;
    c.base = base_case(16, 8, {70, 1, 200, 16, 0, 130, 33}, 11 + causal);
    c.base.causal = causal;
    c.ragged = true;
    c.q_counts = {1, 1, 16, 16, 0, 7, 3};
    const SpecData d = testing::make_spec_data(c);
    const ReferenceResult all = testing::run_spec_reference(d);
    EXPECT_EQ(all.device_errors, 0u);
    for (int r = 0; r < c.base.batch_size; ++r) {
      if (d.count(r) == 0) continue;
      SCOPED_TRACE("request " + std::to_string(r));
      const ReferenceResult one = single_request(d, r, causal);
      expect_rows_equal(all, d.first_token(r) * c.base.num_heads, one, int64_t(d.count(r)) * c.base.num_heads,
                        "ragged vs uniform");
    }
    // Padding rows of q and the rows of the empty request belong to nobody: never written.
    for (int64_t row = d.q_indptr.back() * c.base.num_heads; row < d.total_q * c.base.num_heads; ++row)
      EXPECT_TRUE(std::isnan(all.lse[row])) << "padding row " << row << " written";
  }
}

TEST(SpecReference, RaggedLongRequestsUpTo128Tokens) {
  SpecCase c;
  c.base = base_case(128, 8, {128, 300, 64, 1000}, 5);
  c.ragged = true;
  c.q_counts = {128, 64, 1, 100};
  const SpecData d = testing::make_spec_data(c);
  const ReferenceResult all = testing::run_spec_reference(d);
  EXPECT_EQ(all.device_errors, 0u);
  for (int r = 0; r < c.base.batch_size; ++r) {
    SCOPED_TRACE("request " + std::to_string(r));
    expect_rows_equal(all, d.first_token(r) * 8, single_request(d, r, true), int64_t(d.count(r)) * 8, "ragged");
  }
}

TEST(SpecReference, ChainMaskEqualsCausal) {
  for (TreeMask kind : {TreeMask::kShared, TreeMask::kPerRequest}) {
    SpecCase c;
    c.base = base_case(8, 16, {8, 9, 64, 65, 500}, 3);
    c.tree = kind;
    std::vector<int> chain(8);
    for (int i = 0; i < 8; ++i) chain[i] = i - 1;
    c.parents = {chain};
    const SpecData d = testing::make_spec_data(c);
    const ReferenceResult tree = testing::run_spec_reference(d);
    const ReferenceResult causal = testing::run_reference(d.data);
    expect_rows_equal(tree, 0, causal, d.total_q * 16, tree_mask_name(kind));
  }
}

// Naive two-pass softmax in long double for one row over an explicit key set.
void naive_row(const SpecData& d, int r, int i, int h, const std::vector<int64_t>& keys, std::vector<double>& out,
               double& lse) {
  const DecodeArgs a = d.host_args();
  const int h_q = d.c.base.num_heads;
  const uint16_t* q = d.q.data() + ((d.first_token(r) + i) * h_q + h) * kHeadDimQK;
  auto qv = [&](int c) -> long double {
    return d.c.base.q_dtype == DType::kBFloat16 ? fp8::bf16_to_float(q[c]) : fp8::fp16_to_float(q[c]);
  };
  std::vector<std::vector<float>> kv(keys.size(), std::vector<float>(kHeadDimQK));
  std::vector<long double> s(keys.size());
  long double mx = -INFINITY;
  for (size_t k = 0; k < keys.size(); ++k) {
    const int64_t page = d.data.block_table[r * d.data.max_pages + keys[k] / kPageSize];
    reference::read_kv_token(a.kv, page, static_cast<int>(keys[k] % kPageSize), kv[k].data());
    long double dot = 0;
    for (int c = 0; c < kHeadDimQK; ++c) dot += qv(c) * kv[k][c];
    s[k] = dot * a.softmax_scale;
    mx = std::max(mx, s[k]);
  }
  out.assign(kHeadDimV, 0.0);
  if (keys.empty()) {
    lse = -INFINITY;
    return;
  }
  long double sum = 0;
  std::vector<long double> acc(kHeadDimV, 0);
  for (size_t k = 0; k < keys.size(); ++k) {
    const long double p = std::exp(s[k] - mx);
    sum += p;
    for (int c = 0; c < kHeadDimV; ++c) acc[c] += p * kv[k][c];
  }
  for (int c = 0; c < kHeadDimV; ++c) out[c] = static_cast<double>(acc[c] / sum);
  lse = static_cast<double>(mx + std::log(sum));
}

// Head counts other than 8..128 powers of two (e.g. 4 heads per rank at TP16, 12): each head of a row is the naive
// softmax of that head alone, i.e. independent of the other heads.
TEST(SpecReference, AnyHeadCountEqualsPerHeadDecodes) {
  for (int h_q : {1, 3, 12, 100}) {
    SpecCase c;
    c.base = base_case(3, h_q, {70, 200, 3}, 40 + h_q);
    const SpecData d = testing::make_spec_data(c);
    const ReferenceResult all = testing::run_spec_reference(d);
    EXPECT_EQ(all.device_errors, 0u);
    for (int r = 0; r < c.base.batch_size; ++r)
      for (int i = 0; i < 3; ++i) {
        std::vector<int64_t> keys;
        for (int64_t k = 0; k < d.data.seqlens[r] - 3 + i + 1; ++k) keys.push_back(k);
        for (int h = 0; h < h_q; h += 7) {
          std::vector<double> want;
          double want_lse;
          naive_row(d, r, i, h, keys, want, want_lse);
          const int64_t row = (d.first_token(r) + i) * h_q + h;
          for (int col = 0; col < kHeadDimV; col += 13)
            ASSERT_NEAR(all.out[row * kHeadDimV + col], want[col], 1e-9) << "h_q " << h_q << " row " << row;
          EXPECT_NEAR(all.lse[row], want_lse, 1e-9 * std::max(1.0, std::fabs(want_lse)));
        }
      }
  }
}

TEST(SpecReference, TreeRowsEqualNaiveSoftmaxOverTheirKeys) {
  struct Variant {
    bool ragged;
    TreeMask kind;
    MaskRows rows;
  };
  for (const Variant v : {Variant{false, TreeMask::kPerRequest, MaskRows::kTree},
                          Variant{false, TreeMask::kShared, MaskRows::kRandomBits},
                          Variant{true, TreeMask::kPacked, MaskRows::kTree},
                          Variant{true, TreeMask::kPacked, MaskRows::kRandomBits},
                          Variant{true, TreeMask::kShared, MaskRows::kTree}}) {
    SpecCase c;
    // Length 16 = count: a row with no mask bit sees nothing (no prefix).
    c.base = base_case(16, 8, {16, 17, 64, 100, 230}, 21 + static_cast<int>(v.kind) + 7 * v.ragged);
    c.ragged = v.ragged;
    c.q_counts = {16, 5, 16, 1, 9};
    c.tree = v.kind;
    c.mask_rows = v.rows;
    SCOPED_TRACE(c.describe());
    const SpecData d = testing::make_spec_data(c);
    const ReferenceResult got = testing::run_spec_reference(d);
    EXPECT_EQ(got.device_errors, 0u);
    const int h_q = c.base.num_heads;
    for (int r = 0; r < c.base.batch_size; ++r) {
      const int n = d.count(r);
      const int64_t len = d.data.seqlens[r];
      for (int i = 0; i < n; ++i) {
        const int64_t word_index = v.kind == TreeMask::kShared      ? i
                                   : v.kind == TreeMask::kPerRequest ? int64_t(r) * c.base.q_len + i
                                                                     : d.first_token(r) + i;
        const uint64_t word = static_cast<uint64_t>(d.mask[word_index]);
        std::vector<int64_t> keys;
        for (int64_t k = 0; k < len - n; ++k) keys.push_back(k);
        for (int j = 0; j < n; ++j)
          if ((word >> j) & 1u) keys.push_back(len - n + j);
        for (int h = 0; h < h_q; h += 5) {
          std::vector<double> want;
          double want_lse;
          naive_row(d, r, i, h, keys, want, want_lse);
          const int64_t row = (d.first_token(r) + i) * h_q + h;
          double ref_max = 0;
          for (double x : want) ref_max = std::max(ref_max, std::fabs(x));
          for (int col = 0; col < kHeadDimV; ++col)
            ASSERT_NEAR(got.out[row * kHeadDimV + col], want[col], 1e-9 * std::max(1.0, ref_max))
                << "request " << r << " token " << i << " head " << h << " col " << col << " keys " << keys.size();
          if (std::isinf(want_lse)) {
            EXPECT_EQ(got.lse[row], want_lse) << "request " << r << " token " << i;
          } else {
            EXPECT_NEAR(got.lse[row], want_lse, 1e-9 * std::max(1.0, std::fabs(want_lse)));
          }
        }
      }
    }
  }
}

TEST(SpecReference, MalformedOffsetsFlagTheirRequestsAndWriteNothingOfThem) {
  SpecCase c;
  c.base = base_case(4, 8, {10, 20, 30, 40}, 9);
  c.ragged = true;
  c.q_counts = {1, 2, 3, 4};
  SpecData d = testing::make_spec_data(c);
  const ReferenceResult good = testing::run_spec_reference(d);
  d.q_indptr[2] = 0;   // request 1: [3, 0) decreasing; request 2: [0, 6) over q_len 4
  const ReferenceResult bad = testing::run_spec_reference(d);
  EXPECT_EQ(bad.device_errors, unsigned(kDeviceErrorQueryOffsets));
  expect_rows_equal(bad, 0, good, 8, "request 0");
  expect_rows_equal(bad, 6 * 8, ReferenceResult{std::vector<double>(good.out.begin() + 6 * 8 * kHeadDimV, good.out.end()),
                                               std::vector<double>(good.lse.begin() + 6 * 8, good.lse.end()), 0},
                    4 * 8, "request 3");
  for (int64_t row = 8; row < 6 * 8; ++row) EXPECT_TRUE(std::isnan(bad.lse[row])) << "row " << row << " written";
  d.q_indptr[2] = 3;
  d.q_indptr[4] = static_cast<int32_t>(d.total_q) + 1;  // past q's rows
  EXPECT_EQ(testing::run_spec_reference(d).device_errors, unsigned(kDeviceErrorQueryOffsets));
  d.q_indptr[4] = 10;
  d.q_indptr[0] = -1;
  EXPECT_EQ(testing::run_spec_reference(d).device_errors, unsigned(kDeviceErrorQueryOffsets));
}

TEST(SpecReference, TreeRequestShorterThanItsDraftsGivesNanRows) {
  SpecCase c;
  c.base = base_case(8, 8, {5, 0, 100}, 4);
  c.tree = TreeMask::kPerRequest;
  const SpecData d = testing::make_spec_data(c);
  const ReferenceResult got = testing::run_spec_reference(d);
  EXPECT_EQ(got.device_errors, unsigned(kDeviceErrorSeqlenBelowQueryLen));
  for (int64_t row = 0; row < 64; ++row) EXPECT_TRUE(std::isnan(got.lse[row])) << row;
  for (int64_t row = 64; row < 128; ++row) EXPECT_EQ(got.lse[row], -INFINITY) << row;  // length 0: empty
  for (int64_t row = 128; row < 192; ++row) EXPECT_TRUE(std::isfinite(got.lse[row])) << row;
}

void expect_invalid(const SpecData& d, DecodeShape shape, DecodeArgs a, const char* needle) {
  std::vector<double> out(static_cast<size_t>(d.total_q) * d.c.base.num_heads * kHeadDimV), lse(out.size() / kHeadDimV);
  if (shape.query_layout == QueryLayout::kRagged) {
    a.out = make_tensor(out.data(), DType::kFloat64, {d.total_q, d.c.base.num_heads, kHeadDimV});
    a.lse = make_tensor(lse.data(), DType::kFloat64, {d.total_q, d.c.base.num_heads});
  } else {
    const int64_t b = d.c.base.batch_size, s = d.c.base.q_len, h = d.c.base.num_heads;
    a.out = make_tensor(out.data(), DType::kFloat64, {b, s, h, kHeadDimV});
    a.lse = make_tensor(lse.data(), DType::kFloat64, {b, s, h});
  }
  try {
    reference::decode(a, shape);
    ADD_FAILURE() << "expected an error mentioning " << needle;
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::kInvalidArgument) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(SpecReference, ArgumentsAreValidated) {
  SpecCase c;
  c.base = base_case(4, 8, {10, 20}, 2);
  c.ragged = true;
  c.q_counts = {1, 4};
  c.tree = TreeMask::kPacked;
  const SpecData d = testing::make_spec_data(c);
  DecodeArgs a = d.host_args();
  DecodeArgs no_indptr = a;
  no_indptr.q_indptr = TensorView{};
  expect_invalid(d, d.shape, no_indptr, "q_indptr");
  DecodeArgs short_indptr = a;
  short_indptr.q_indptr.shape[0] = 2;
  expect_invalid(d, d.shape, short_indptr, "q_indptr");
  DecodeArgs int32_mask = a;
  int32_mask.mask.dtype = DType::kInt32;
  expect_invalid(d, d.shape, int32_mask, "mask");
  DecodeArgs no_mask = a;
  no_mask.mask = TensorView{};
  expect_invalid(d, d.shape, no_mask, "mask");
  DecodeShape per_request = d.shape;
  per_request.tree_mask = TreeMask::kPerRequest;
  expect_invalid(d, per_request, a, "shape.tree_mask");
  DecodeShape long_tree = d.shape;
  long_tree.q_len = 65;
  expect_invalid(d, long_tree, a, "shape.q_len");
  DecodeShape uniform = d.shape;
  uniform.query_layout = QueryLayout::kUniform;
  uniform.tree_mask = TreeMask::kNone;
  DecodeArgs uniform_args = d.data.host_args();
  uniform_args.q_indptr = a.q_indptr;
  expect_invalid(d, uniform, uniform_args, "q_indptr");
  uniform_args.q_indptr = TensorView{};
  uniform_args.mask = a.mask;
  expect_invalid(d, uniform, uniform_args, "mask");
}

}  // namespace
}  // namespace openmla
