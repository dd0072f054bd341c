// reference::sparse_decode against a naive long-double softmax written here, over random and adversarial index
// sets: all -1, duplicates, lengths below and above topk, negative lengths, out-of-range indices, sinks (+inf
// included), an extra cache of another page block size, every format.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "common/sparse_data.h"
#include "openmla/error.h"
#include "openmla/fp8.h"
#include "openmla/reference.h"

namespace openmla {
namespace {

using testing::SparseCache;

constexpr double kInf = std::numeric_limits<double>::infinity();

// How indices are drawn.
enum class Indices {
  kRandom,      // valid slots, about 1 in 8 -1
  kAllSkipped,  // every index -1
  kDuplicates,  // valid slots from a pool of 3
  kBad,         // random, with out-of-range ones (>= num_slots, < -1) at some query tokens
};

struct SparseCase {
  explicit SparseCase(const char* case_name) : name(case_name) {}
  const char* name;
  int b = 2, s_q = 1, h_q = 16;
  KVFormat format = KVFormat::kBF16;
  DType q_dtype = DType::kBFloat16;
  int topk = 64;
  int pages = 3, page_block_size = 64, page_pad = 0;
  int extra_topk = 0;
  int extra_pages = 4, extra_page_block_size = 2;
  std::vector<int> topk_length;        // empty: none
  std::vector<int> extra_topk_length;  // empty: none
  std::vector<float> sink;             // empty: none; else h_q values (cycled)
  Indices indices = Indices::kRandom;
  bool device_scale = false;
  float device_scale_value = 0.0f;     // with device_scale: 0 = the cache's scale, else this (a bad one)
  uint64_t seed = 1;
};

struct Expected {
  std::vector<double> out;  // [b, s_q, h_q, 512]
  std::vector<double> lse;  // [b, s_q, h_q]
  unsigned errors = 0;
};

struct Built {
  SparseCase c{""};
  SparseCache kv, extra;
  std::vector<uint16_t> q;
  std::vector<int32_t> indices, extra_indices, topk_length, extra_topk_length;
  std::vector<float> sink;
  SparseDecodeShape shape;
};

std::vector<int32_t> draw_indices(const SparseCase& c, int k, int64_t num_slots, std::mt19937_64& rng, bool bad_ok) {
  std::vector<int32_t> idx(static_cast<size_t>(c.b) * c.s_q * k);
  std::uniform_int_distribution<int64_t> slot(0, num_slots - 1);
  std::uniform_int_distribution<int> pool(0, 2), eighth(0, 7);
  for (int t = 0; t < c.b * c.s_q; ++t)
    for (int j = 0; j < k; ++j) {
      int32_t& v = idx[static_cast<size_t>(t) * k + j];
      switch (c.indices) {
        case Indices::kAllSkipped: v = -1; break;
        case Indices::kDuplicates: v = static_cast<int32_t>(pool(rng) * (num_slots / 3)); break;
        case Indices::kRandom:
        case Indices::kBad: v = eighth(rng) == 0 ? -1 : static_cast<int32_t>(slot(rng)); break;
      }
    }
  if (c.indices == Indices::kBad && bad_ok) {
    // Token 0: one index at num_slots; the last token: one at -2; both early in the list (inside any length >= 4).
    idx[3] = static_cast<int32_t>(num_slots);
    idx[(static_cast<size_t>(c.b) * c.s_q - 1) * k + 1] = -2;
  }
  return idx;
}

Built build(const SparseCase& c) {
  Built d;
  d.c = c;
  d.kv = testing::make_sparse_cache(c.format, c.pages, c.page_block_size, c.seed, c.page_pad, 0.03125f, c.device_scale);
  if (c.extra_topk > 0)
    d.extra = testing::make_sparse_cache(c.format, c.extra_pages, c.extra_page_block_size, c.seed + 7, 0, 0.03125f,
                                         c.device_scale);  // one per-tensor scale for both caches
  std::mt19937_64 rng(c.seed * 31 + 5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  d.q.resize(static_cast<size_t>(c.b) * c.s_q * c.h_q * kHeadDimQK);
  for (uint16_t& v : d.q)
    v = c.q_dtype == DType::kBFloat16 ? fp8::float_to_bf16(normal(rng)) : fp8::float_to_fp16(normal(rng));
  d.indices = draw_indices(c, c.topk, d.kv.num_slots(), rng, true);
  if (c.extra_topk > 0) d.extra_indices = draw_indices(c, c.extra_topk, d.extra.num_slots(), rng, false);
  d.topk_length.assign(c.topk_length.begin(), c.topk_length.end());
  d.extra_topk_length.assign(c.extra_topk_length.begin(), c.extra_topk_length.end());
  for (int h = 0; h < c.h_q && !c.sink.empty(); ++h) d.sink.push_back(c.sink[h % c.sink.size()]);
  d.shape.batch_size = c.b;
  d.shape.q_len = c.s_q;
  d.shape.num_heads = c.h_q;
  d.shape.q_dtype = c.q_dtype;
  d.shape.kv_format = c.format;
  d.shape.topk = c.topk;
  d.shape.extra_topk = c.extra_topk;
  d.shape.topk_length = !c.topk_length.empty();
  d.shape.extra_topk_length = !c.extra_topk_length.empty();
  d.shape.attn_sink = !c.sink.empty();
  if (c.device_scale && c.device_scale_value != 0.0f) d.kv.scale = c.device_scale_value;
  return d;
}

double q_value(const Built& d, int r, int i, int h, int j) {
  const uint16_t bits = d.q[((static_cast<size_t>(r) * d.c.s_q + i) * d.c.h_q + h) * kHeadDimQK + j];
  return d.c.q_dtype == DType::kBFloat16 ? fp8::bf16_to_float(bits) : fp8::fp16_to_float(bits);
}

// FlashMLA's semantics (tests/ref.py, ref_sparse_attn_decode) with OpenMLA's guards, one row at a time in long double.
Expected naive(const Built& d) {
  const SparseCase& c = d.c;
  Expected e;
  const size_t rows = static_cast<size_t>(c.b) * c.s_q * c.h_q;
  e.out.assign(rows * kHeadDimV, 0.0);
  e.lse.assign(rows, 0.0);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const bool bad_scale = c.device_scale && c.device_scale_value != 0.0f &&
                         !(std::isfinite(c.device_scale_value) && c.device_scale_value > 0.0f);
  if (bad_scale) e.errors |= kDeviceErrorScale;
  for (int r = 0; r < c.b; ++r) {
    const int64_t n = d.topk_length.empty() ? c.topk : std::min(d.topk_length[r], c.topk);
    const int64_t m = c.extra_topk == 0 ? 0 : d.extra_topk_length.empty() ? c.extra_topk
                                                                            : std::min(d.extra_topk_length[r], c.extra_topk);
    for (int i = 0; i < c.s_q; ++i) {
      const size_t token = static_cast<size_t>(r) * c.s_q + i;
      // Gather: (values of the slot, or null for a bad index).
      std::vector<const float*> keys;
      bool bad = false, touches_main = false;
      if (n >= 0 && m >= 0) {
        for (int64_t k = 0; k < n; ++k) {
          const int64_t s = d.indices[token * c.topk + k];
          if (s == -1) continue;
          if (s < 0 || s >= d.kv.num_slots()) bad = true;
          else keys.push_back(&d.kv.values[static_cast<size_t>(s) * kHeadDimQK]), touches_main = true;
        }
        for (int64_t k = 0; k < m; ++k) {
          const int64_t s = d.extra_indices[token * c.extra_topk + k];
          if (s == -1) continue;
          if (s < 0 || s >= d.extra.num_slots()) bad = true;
          else keys.push_back(&d.extra.values[static_cast<size_t>(s) * kHeadDimQK]);
        }
      }
      if (n < 0 || m < 0) e.errors |= kDeviceErrorNegativeSeqlen;
      if (n >= 0 && m >= 0 && bad) e.errors |= kDeviceErrorSparseIndex;
      const bool nan_rows = n < 0 || m < 0 || bad || (bad_scale && touches_main);
      for (int h = 0; h < c.h_q; ++h) {
        const size_t row = token * c.h_q + h;
        double* out = &e.out[row * kHeadDimV];
        if (nan_rows) {
          std::fill(out, out + kHeadDimV, nan);
          e.lse[row] = nan;
          continue;
        }
        if (keys.empty()) {
          e.lse[row] = -kInf;
          continue;
        }
        std::vector<long double> score(keys.size());
        long double max = -INFINITY;
        for (size_t k = 0; k < keys.size(); ++k) {
          long double dot = 0;
          for (int j = 0; j < kHeadDimQK; ++j) dot += static_cast<long double>(q_value(d, r, i, h, j)) * keys[k][j];
          score[k] = dot * static_cast<long double>(static_cast<double>(0.0625f));
          max = std::max(max, score[k]);
        }
        long double sum = 0;
        for (long double& s : score) sum += (s = std::exp(s - max));
        const long double lse = max + std::log(sum);
        const long double factor = d.sink.empty() ? 1.0L : 1.0L / (1.0L + std::exp(static_cast<long double>(d.sink[h]) - lse));
        for (int j = 0; j < kHeadDimV; ++j) {
          long double v = 0;
          for (size_t k = 0; k < keys.size(); ++k) v += score[k] * keys[k][j];
          out[j] = static_cast<double>(v / sum * factor);
        }
        e.lse[row] = static_cast<double>(lse);
      }
    }
  }
  return e;
}

struct Outputs {
  std::vector<double> out, lse;
  unsigned errors = 0;
};

Outputs run_reference(Built& d) {
  const SparseCase& c = d.c;
  Outputs o;
  o.out.assign(static_cast<size_t>(c.b) * c.s_q * c.h_q * kHeadDimV, -7.0);
  o.lse.assign(static_cast<size_t>(c.b) * c.s_q * c.h_q, -7.0);
  SparseDecodeArgs a;
  a.q = make_tensor(d.q.data(), c.q_dtype, {c.b, c.s_q, c.h_q, kHeadDimQK});
  a.kv = d.kv.view();
  a.indices = make_tensor(d.indices.data(), DType::kInt32, {c.b, c.s_q, c.topk});
  if (c.extra_topk > 0) {
    a.extra_kv = d.extra.view();
    a.extra_kv.scale = a.kv.scale;
    a.extra_kv.device_scale = a.kv.device_scale;  // the main cache's (validated: one scale for both)
    a.extra_indices = make_tensor(d.extra_indices.data(), DType::kInt32, {c.b, c.s_q, c.extra_topk});
  }
  if (!d.sink.empty()) a.attn_sink = make_tensor(d.sink.data(), DType::kFloat32, {c.h_q});
  a.softmax_scale = 0.0625f;
  a.out = make_tensor(o.out.data(), DType::kFloat64, {c.b, c.s_q, c.h_q, kHeadDimV});
  a.lse = make_tensor(o.lse.data(), DType::kFloat64, {c.b, c.s_q, c.h_q});
  TensorView lengths, extra_lengths;
  if (!d.topk_length.empty()) lengths = make_tensor(d.topk_length.data(), DType::kInt32, {c.b});
  if (!d.extra_topk_length.empty()) extra_lengths = make_tensor(d.extra_topk_length.data(), DType::kInt32, {c.b});
  o.errors = reference::sparse_decode(a, d.shape, lengths, extra_lengths);
  return o;
}

// NaN and infinite positions equal; finite values within 1e-12 of max|ref| per row (lse: of max(1, |ref|)).
void expect_close(const Expected& e, const Outputs& o, const std::string& name) {
  ASSERT_EQ(e.out.size(), o.out.size());
  int reported = 0;
  for (size_t row = 0; row < e.lse.size(); ++row) {
    const double* eo = &e.out[row * kHeadDimV];
    const double* oo = &o.out[row * kHeadDimV];
    double scale = 0;
    for (int j = 0; j < kHeadDimV; ++j) scale = std::max(scale, std::fabs(eo[j]));
    for (int j = 0; j < kHeadDimV && reported < 5; ++j) {
      const bool ok = std::isnan(eo[j]) ? std::isnan(oo[j]) : std::fabs(eo[j] - oo[j]) <= 1e-12 * std::max(scale, 1e-30);
      if (!ok) {
        ADD_FAILURE() << name << ": out row " << row << " col " << j << ": " << oo[j] << " vs naive " << eo[j];
        ++reported;
      }
    }
    const double el = e.lse[row], ol = o.lse[row];
    const bool ok = std::isnan(el) ? std::isnan(ol)
                    : std::isinf(el) ? el == ol
                                     : std::fabs(el - ol) <= 1e-12 * std::max(1.0, std::fabs(el));
    if (!ok && reported < 5) {
      ADD_FAILURE() << name << ": lse row " << row << ": " << ol << " vs naive " << el;
      ++reported;
    }
  }
}

std::vector<SparseCase> cases() {
  std::vector<SparseCase> v;
  auto add = [&](SparseCase c) { v.push_back(c); };
  {
    SparseCase c{"bf16_random"};
    add(c);
  }
  {
    SparseCase c{"fp16_h1_s2"};
    c.format = KVFormat::kFP16, c.q_dtype = DType::kFloat16, c.h_q = 1, c.s_q = 2, c.topk = 100;
    add(c);
  }
  {
    SparseCase c{"ds_mla_h128_lengths_sink"};
    c.format = KVFormat::kFP8DsMla, c.h_q = 128, c.b = 3, c.s_q = 2, c.topk = 130, c.pages = 5;
    c.topk_length = {0, 77, 1000};  // empty, shorter, clamped to topk
    c.sink = {0.5f, -3.0f, 8.0f};
    add(c);
  }
  {
    SparseCase c{"e4m3_duplicates"};
    c.format = KVFormat::kFP8E4M3, c.indices = Indices::kDuplicates, c.topk = 90;
    add(c);
  }
  {
    SparseCase c{"e4m3_device_scale_extra_page2"};
    c.format = KVFormat::kFP8E4M3, c.device_scale = true, c.extra_topk = 30, c.extra_topk_length = {30, 5};
    c.s_q = 2;
    add(c);
  }
  {
    SparseCase c{"all_skipped"};
    c.indices = Indices::kAllSkipped, c.sink = {1.0f};
    add(c);
  }
  {
    SparseCase c{"all_skipped_extra"};
    c.indices = Indices::kAllSkipped, c.extra_topk = 8, c.format = KVFormat::kFP8DsMla;
    add(c);
  }
  {
    SparseCase c{"negative_topk_length"};
    c.b = 3, c.topk_length = {10, -1, 64};
    add(c);
  }
  {
    SparseCase c{"negative_extra_topk_length"};
    c.extra_topk = 16, c.extra_topk_length = {-5, 16}, c.extra_page_block_size = 64, c.extra_pages = 1;
    add(c);
  }
  {
    SparseCase c{"out_of_range_indices"};
    c.indices = Indices::kBad, c.s_q = 2, c.h_q = 16;
    add(c);
  }
  {
    SparseCase c{"out_of_range_past_topk_length"};  // the bad indices sit at positions >= the lengths: not read
    c.indices = Indices::kBad, c.topk_length = {3, 1};
    add(c);
  }
  {
    SparseCase c{"sink_inf"};
    c.sink = {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(), 0.0f};
    c.format = KVFormat::kFP8DsMla;
    add(c);
  }
  {
    SparseCase c{"page_block_1_extra_64"};
    c.page_block_size = 1, c.pages = 150, c.extra_topk = 70, c.extra_page_block_size = 64, c.extra_pages = 2;
    c.sink = {2.0f};
    add(c);
  }
  {
    SparseCase c{"padded_page_stride_topk_2048"};
    c.page_pad = 3, c.pages = 40, c.topk = 2048, c.b = 1, c.h_q = 8, c.topk_length = {1500};
    add(c);
  }
  {
    SparseCase c{"bad_device_scale"};
    c.format = KVFormat::kFP8E4M3, c.device_scale = true, c.device_scale_value = -1.0f, c.b = 3;
    c.topk_length = {0, 5, 64};  // request 0 attends nothing: out 0, lse -inf
    add(c);
  }
  return v;
}

class SparseReferenceTest : public ::testing::TestWithParam<SparseCase> {};

TEST_P(SparseReferenceTest, MatchesNaiveSoftmax) {
  Built d = build(GetParam());
  const Expected e = naive(d);
  const Outputs o = run_reference(d);
  EXPECT_EQ(o.errors, e.errors) << describe_device_errors(o.errors) << " vs naive " << describe_device_errors(e.errors);
  expect_close(e, o, GetParam().name);
}

INSTANTIATE_TEST_SUITE_P(Sparse, SparseReferenceTest, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<SparseCase>& info) { return std::string(info.param.name); });

// The cases above exercise what they claim: guards fire, rows are empty, the sink changes rows.
TEST(SparseReference, CasesReachTheirGuards) {
  for (const SparseCase& c : cases()) {
    Built d = build(c);
    const Expected e = naive(d);
    const std::string n = c.name;
    if (n == "negative_topk_length" || n == "negative_extra_topk_length") {
      EXPECT_EQ(e.errors, unsigned{kDeviceErrorNegativeSeqlen}) << n;
    } else if (n == "out_of_range_indices") {
      EXPECT_EQ(e.errors, unsigned{kDeviceErrorSparseIndex}) << n;
    } else if (n == "out_of_range_past_topk_length") {
      EXPECT_EQ(e.errors, 0u) << n;
    } else if (n == "all_skipped" || n == "all_skipped_extra") {
      for (double l : e.lse) EXPECT_EQ(l, -kInf) << n;
    } else if (n == "bad_device_scale") {
      EXPECT_EQ(e.lse[0], -kInf) << n;
      EXPECT_TRUE(std::isnan(e.lse[e.lse.size() - 1])) << n;
    }
  }
}

// +inf sink: out 0 and lse unchanged (finite); -inf: out as without a sink.
TEST(SparseReference, SinkLimits) {
  SparseCase c{"sink"};
  c.h_q = 2;
  c.sink = {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity()};
  Built with = build(c);
  const Outputs o = run_reference(with);
  c.sink.clear();
  Built without = build(c);
  const Outputs p = run_reference(without);
  for (int t = 0; t < c.b * c.s_q; ++t) {
    const size_t row0 = static_cast<size_t>(t) * 2, row1 = row0 + 1;
    EXPECT_TRUE(std::isfinite(o.lse[row0]));
    EXPECT_EQ(o.lse[row0], p.lse[row0]);
    for (int j = 0; j < kHeadDimV; ++j) {
      EXPECT_EQ(o.out[row0 * kHeadDimV + j], 0.0);
      EXPECT_EQ(o.out[row1 * kHeadDimV + j], p.out[row1 * kHeadDimV + j]);
    }
  }
}

// Narrow outputs and FlashMLA's lse layout: the same values, rounded.
TEST(SparseReference, Float32OutputsAndStridedLse) {
  SparseCase c{"narrow"};
  c.s_q = 2, c.format = KVFormat::kFP8DsMla, c.sink = {0.25f};
  Built d = build(c);
  const Outputs wide = run_reference(d);
  std::vector<float> out(wide.out.size()), lse(wide.lse.size());
  SparseDecodeArgs a;
  a.q = make_tensor(d.q.data(), c.q_dtype, {c.b, c.s_q, c.h_q, kHeadDimQK});
  a.kv = d.kv.view();
  a.indices = make_tensor(d.indices.data(), DType::kInt32, {c.b, c.s_q, c.topk});
  a.attn_sink = make_tensor(d.sink.data(), DType::kFloat32, {c.h_q});
  a.softmax_scale = 0.0625f;
  a.out = make_tensor(out.data(), DType::kFloat32, {c.b, c.s_q, c.h_q, kHeadDimV});
  // [b, h_q, s_q] memory seen as [b, s_q, h_q]
  a.lse = make_tensor_strided(lse.data(), DType::kFloat32, {c.b, c.s_q, c.h_q}, {c.h_q * c.s_q, 1, c.s_q});
  EXPECT_EQ(reference::sparse_decode(a, d.shape, TensorView(), TensorView()), 0u);
  for (size_t k = 0; k < out.size(); ++k) ASSERT_EQ(out[k], static_cast<float>(wide.out[k])) << k;
  for (int r = 0; r < c.b; ++r)
    for (int i = 0; i < c.s_q; ++i)
      for (int h = 0; h < c.h_q; ++h)
        EXPECT_EQ(lse[(static_cast<size_t>(r) * c.h_q + h) * c.s_q + i],
                  static_cast<float>(wide.lse[(static_cast<size_t>(r) * c.s_q + i) * c.h_q + h]));
}

// Lengths given where the shape has none (and the reverse) are argument errors, as for plan().
TEST(SparseReference, LengthTensorsFollowTheShape) {
  SparseCase c{"lengths"};
  Built d = build(c);
  std::vector<int32_t> lengths = {1, 2};
  std::vector<double> out(static_cast<size_t>(c.b) * c.s_q * c.h_q * kHeadDimV), lse(static_cast<size_t>(c.b) * c.h_q);
  SparseDecodeArgs a;
  a.q = make_tensor(d.q.data(), c.q_dtype, {c.b, c.s_q, c.h_q, kHeadDimQK});
  a.kv = d.kv.view();
  a.indices = make_tensor(d.indices.data(), DType::kInt32, {c.b, c.s_q, c.topk});
  a.softmax_scale = 0.0625f;
  a.out = make_tensor(out.data(), DType::kFloat64, {c.b, c.s_q, c.h_q, kHeadDimV});
  a.lse = make_tensor(lse.data(), DType::kFloat64, {c.b, c.s_q, c.h_q});
  const TensorView given = make_tensor(lengths.data(), DType::kInt32, {c.b});
  try {
    reference::sparse_decode(a, d.shape, given, TensorView());
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("topk_length: expected an undefined view"), std::string::npos) << e.what();
  }
  d.shape.topk_length = true;
  EXPECT_THROW(reference::sparse_decode(a, d.shape, TensorView(), TensorView()), Error);
  EXPECT_EQ(reference::sparse_decode(a, d.shape, given, TensorView()), 0u);
}

}  // namespace
}  // namespace openmla
