#include "common/spec_data.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <sstream>

#include "openmla/fp8.h"
#include "openmla/reference.h"
#include "openmla/tree_mask.h"

namespace openmla::testing {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

double half_to_double(uint16_t bits, DType t) {
  return t == DType::kBFloat16 ? fp8::bf16_to_float(bits) : fp8::fp16_to_float(bits);
}

bool same_class(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  if (std::isinf(a) || std::isinf(b)) return a == b;
  return true;
}

}  // namespace

std::string SpecCase::describe() const {
  std::ostringstream os;
  os << base.describe() << (ragged ? " ragged counts=[" : " uniform");
  if (ragged)
    for (size_t i = 0; i < q_counts.size(); ++i) os << (i ? "," : "") << q_counts[i] << (i + 1 == q_counts.size() ? "]" : "");
  if (tree != TreeMask::kNone)
    os << " tree=" << tree_mask_name(tree) << (mask_rows == MaskRows::kRandomBits ? " (random bits)" : "");
  return os.str();
}

DecodeCase spec_base_case(int q_len, int h_q, std::vector<int> seqlens, KVFormat format, uint64_t seed, DType q_dtype) {
  DecodeCase c;
  c.q_len = q_len;
  c.num_heads = h_q;
  c.seqlens = std::move(seqlens);
  c.batch_size = static_cast<int>(c.seqlens.size());
  c.kv_format = format;
  c.q_dtype = q_dtype;
  c.kv_fp8_scale = format == KVFormat::kFP8E4M3 ? 0.05f : 1.0f;
  c.seed = seed;
  return c;
}

std::vector<int> random_parents(int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int> parents(n);
  for (int i = 0; i < n; ++i) parents[i] = std::uniform_int_distribution<int>(-1, i - 1)(rng);
  return parents;
}

int SpecData::count(int r) const { return c.ragged ? q_indptr[r + 1] - q_indptr[r] : c.base.q_len; }
int64_t SpecData::first_token(int r) const {
  return c.ragged ? q_indptr[r] : static_cast<int64_t>(r) * c.base.q_len;
}

SpecData make_spec_data(const SpecCase& c) {
  SpecData d;
  d.c = c;
  d.data = make_decode_data(c.base);
  d.shape = d.data.shape;
  d.shape.query_layout = c.ragged ? QueryLayout::kRagged : QueryLayout::kUniform;
  d.shape.tree_mask = c.tree;
  const int b = c.base.batch_size, s_q = c.base.q_len, h_q = c.base.num_heads;
  const size_t row_elems = static_cast<size_t>(h_q) * kHeadDimQK;
  if (c.ragged) {
    d.q_indptr.assign(1, 0);
    for (int r = 0; r < b; ++r) d.q_indptr.push_back(d.q_indptr.back() + c.q_counts.at(r));
    d.total_q = d.q_indptr.back() + c.total_q_padding;
    d.q.assign(static_cast<size_t>(d.total_q) * row_elems, 0);
    // Request r's tokens: the first count rows of its uniform rows; padding rows keep random values.
    for (int r = 0; r < b; ++r)
      std::copy_n(d.data.q.begin() + static_cast<int64_t>(r) * s_q * row_elems, c.q_counts[r] * row_elems,
                  d.q.begin() + d.q_indptr[r] * row_elems);
    for (int64_t t = d.q_indptr.back(); t < d.total_q; ++t)
      std::copy_n(d.data.q.begin(), row_elems, d.q.begin() + t * row_elems);
  } else {
    d.total_q = static_cast<int64_t>(b) * s_q;
    d.q = d.data.q;
  }
  if (c.tree != TreeMask::kNone) {
    std::mt19937_64 rng(c.base.seed ^ 0x7265656d61736bULL);
    auto rows_for = [&](int index) {
      if (c.mask_rows == MaskRows::kRandomBits) {
        std::vector<int64_t> rows(s_q);
        for (int64_t& w : rows) w = static_cast<int64_t>(rng());
        return rows;
      }
      const std::vector<int> parents =
          c.parents.empty() ? random_parents(s_q, rng()) : c.parents.at(std::min<size_t>(index, c.parents.size() - 1));
      std::vector<int64_t> rows(parents.size());
      tree_mask_from_parents(parents.data(), static_cast<int>(parents.size()), rows.data());
      return rows;
    };
    if (c.tree == TreeMask::kShared) {
      d.mask = rows_for(0);
    } else if (c.tree == TreeMask::kPerRequest) {
      for (int r = 0; r < b; ++r) {
        const std::vector<int64_t> rows = rows_for(r);
        d.mask.insert(d.mask.end(), rows.begin(), rows.end());
      }
    } else {  // packed: request r's rows at its tokens; padding rows get random words (never read)
      d.mask.assign(d.total_q, static_cast<int64_t>(rng()));
      for (int r = 0; r < b; ++r) {
        const std::vector<int64_t> rows = rows_for(r);
        std::copy_n(rows.begin(), d.count(r), d.mask.begin() + d.first_token(r));
      }
    }
  }
  return d;
}

DecodeArgs SpecData::host_args() const {
  DecodeArgs a = data.host_args();
  const int64_t b = c.base.batch_size, s_q = c.base.q_len, h_q = c.base.num_heads;
  if (c.ragged) {
    a.q = make_tensor(const_cast<uint16_t*>(q.data()), c.base.q_dtype, {total_q, h_q, kHeadDimQK});
    a.q_indptr = make_tensor(const_cast<int32_t*>(q_indptr.data()), DType::kInt32, {b + 1});
  }
  if (c.tree != TreeMask::kNone) {
    int64_t n = static_cast<int64_t>(mask.size());
    if (c.tree == TreeMask::kPerRequest) {
      a.mask = make_tensor(const_cast<int64_t*>(mask.data()), DType::kInt64, {b, s_q});
    } else {
      a.mask = make_tensor(const_cast<int64_t*>(mask.data()), DType::kInt64, {n});
    }
  }
  return a;
}

ReferenceResult run_spec_reference(const SpecData& d) {
  const int64_t h_q = d.c.base.num_heads, b = d.c.base.batch_size, s_q = d.c.base.q_len;
  ReferenceResult result;
  result.out.assign(static_cast<size_t>(d.total_q * h_q) * kHeadDimV, kNaN);
  result.lse.assign(static_cast<size_t>(d.total_q * h_q), kNaN);
  DecodeArgs a = d.host_args();
  if (d.c.ragged) {
    a.out = make_tensor(result.out.data(), DType::kFloat64, {d.total_q, h_q, kHeadDimV});
    a.lse = make_tensor(result.lse.data(), DType::kFloat64, {d.total_q, h_q});
  } else {
    a.out = make_tensor(result.out.data(), DType::kFloat64, {b, s_q, h_q, kHeadDimV});
    a.lse = make_tensor(result.lse.data(), DType::kFloat64, {b, s_q, h_q});
  }
  result.device_errors = reference::decode(a, d.shape);
  return result;
}

CompareResult compare_spec(const SpecData& d, const ReferenceResult& ref, const std::vector<uint16_t>& out_bits,
                           const std::vector<float>& lse, double out_tol, double lse_tol) {
  CompareResult result;
  std::ostringstream msg;
  const int64_t h_q = d.c.base.num_heads;
  const DType t = d.c.base.q_dtype;
  if (out_bits.size() != ref.out.size() || lse.size() != ref.lse.size()) {
    result.ok = false;
    msg << "size mismatch: out " << out_bits.size() << " vs " << ref.out.size() << ", lse " << lse.size() << " vs "
        << ref.lse.size();
    result.message = msg.str();
    return result;
  }
  int64_t mismatches = 0;
  for (size_t k = 0; k < ref.out.size(); ++k) {
    if (same_class(half_to_double(out_bits[k], t), ref.out[k])) continue;
    if (mismatches++ == 0)
      msg << "first NaN/inf mismatch: out row " << k / kHeadDimV / h_q << " head " << (k / kHeadDimV) % h_q
          << " col " << k % kHeadDimV << " = " << half_to_double(out_bits[k], t) << ", reference " << ref.out[k]
          << "; ";
  }
  for (size_t k = 0; k < ref.lse.size(); ++k) {
    if (same_class(lse[k], ref.lse[k])) continue;
    if (mismatches++ == 0)
      msg << "first NaN/inf mismatch: lse row " << k / h_q << " head " << k % h_q << " = " << lse[k]
          << ", reference " << ref.lse[k] << "; ";
  }
  if (mismatches) {
    result.ok = false;
    msg << mismatches << " NaN/inf mismatches; ";
  }
  for (int r = 0; r < d.c.base.batch_size; ++r) {
    const int64_t row0 = d.first_token(r) * h_q, rows = static_cast<int64_t>(d.count(r)) * h_q;
    double ref_max = 0.0;
    for (int64_t k = row0 * kHeadDimV; k < (row0 + rows) * kHeadDimV; ++k)
      if (std::isfinite(ref.out[k])) ref_max = std::max(ref_max, std::fabs(ref.out[k]));
    const double denom = ref_max > 0.0 ? ref_max : 1.0;
    for (int64_t k = row0 * kHeadDimV; k < (row0 + rows) * kHeadDimV; ++k) {
      const double got = half_to_double(out_bits[k], t);
      if (!std::isfinite(got) || !std::isfinite(ref.out[k])) continue;
      const double err = std::fabs(got - ref.out[k]) / denom;
      if (err > result.max_out_rel_err) result.max_out_rel_err = err;
      if (err > out_tol && result.ok) {
        result.ok = false;
        msg << "request " << r << ": out row " << k / kHeadDimV / h_q << " head " << (k / kHeadDimV) % h_q
            << " col " << k % kHeadDimV << " = " << got << ", reference " << ref.out[k] << "; ";
      }
    }
    for (int64_t k = row0; k < row0 + rows; ++k) {
      if (!std::isfinite(lse[k]) || !std::isfinite(ref.lse[k])) continue;
      const double err = std::fabs(lse[k] - ref.lse[k]) / std::max(1.0, std::fabs(ref.lse[k]));
      if (err > result.max_lse_rel_err) result.max_lse_rel_err = err;
      if (err > lse_tol && result.ok) {
        result.ok = false;
        msg << "request " << r << ": lse row " << k / h_q << " head " << k % h_q << " = " << lse[k]
            << ", reference " << ref.lse[k] << "; ";
      }
    }
  }
  msg << "max rel err out " << result.max_out_rel_err << " (tol " << out_tol << "), lse " << result.max_lse_rel_err
      << " (tol " << lse_tol << ") [" << d.c.describe() << "]";
  result.message = msg.str();
  return result;
}

}  // namespace openmla::testing
