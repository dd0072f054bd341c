#include "common/decode_data.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <sstream>

#include "openmla/error.h"
#include "openmla/fp8.h"
#include "openmla/reference.h"

namespace openmla::testing {
namespace {

// Block-table filler for columns past a request's pages: out of range on purpose (FlashMLA's tests
// use the same value), so a kernel that reads past a request's pages faults or flags it.
constexpr int32_t kUnusedTableEntry = 2147480000;

int64_t ceil_pages(int64_t tokens) { return (tokens + kPageSize - 1) / kPageSize; }

DType cache_dtype(KVFormat f) {
  switch (f) {
    case KVFormat::kBF16: return DType::kBFloat16;
    case KVFormat::kFP16: return DType::kFloat16;
    case KVFormat::kFP8E4M3: return DType::kFloat8E4M3;
    case KVFormat::kFP8DsMla: return DType::kUInt8;
  }
  return DType::kUndefined;
}

// Elements per token row in the cache dtype (W of kv_format.h).
int64_t row_elements(KVFormat f) { return f == KVFormat::kFP8DsMla ? kDsMlaBytesPerToken : kHeadDimQK; }

double half_bits_to_double(uint16_t bits, DType t) {
  return t == DType::kBFloat16 ? fp8::bf16_to_float(bits) : fp8::fp16_to_float(bits);
}

enum class ValueClass { kFinite, kNaN, kPosInf, kNegInf };
ValueClass classify(double v) {
  if (std::isnan(v)) return ValueClass::kNaN;
  if (std::isinf(v)) return v > 0 ? ValueClass::kPosInf : ValueClass::kNegInf;
  return ValueClass::kFinite;
}

}  // namespace

std::string DecodeCase::describe() const {
  std::ostringstream os;
  os << "b=" << batch_size << " s_q=" << q_len << " h_q=" << num_heads << ' ' << kv_format_name(kv_format);
  if (q_dtype != DType::kBFloat16) os << " q=" << dtype_name(q_dtype);
  os << (causal ? " causal" : " noncausal") << " lens=[";
  for (size_t i = 0; i < seqlens.size(); ++i) os << (i ? "," : "") << seqlens[i];
  os << ']';
  if (kv_format == KVFormat::kFP8E4M3 && kv_fp8_scale != 1.0f) os << " fp8_scale=" << kv_fp8_scale;
  if (page_pad_tokens != 0) os << " page_pad=" << page_pad_tokens;
  if (latent_log2_spread != 0) os << " latent_spread=2^" << latent_log2_spread;
  if (q_log2_scale != 0) os << " q_scale=2^" << q_log2_scale;
  if (kv_log2_scale != 0) os << " kv_scale=2^" << kv_log2_scale;
  if (lse_flashmla_layout) os << " lse=[b,h_q,s_q]";
  if (device_scales) os << " device_scales";
  if (fp8_query) os << " q=e4m3";
  if (softmax_scale != 0.0f) os << " softmax_scale=" << softmax_scale;
  os << " seed=" << seed;
  return os.str();
}

DecodeArgs DecodeData::host_args() const {
  const int64_t b = c.batch_size, s_q = c.q_len, h_q = c.num_heads;
  const DType kv_dtype = cache_dtype(c.kv_format);
  const int64_t w = row_elements(c.kv_format);
  DecodeArgs args;
  args.q = make_tensor(const_cast<uint16_t*>(q.data()), c.q_dtype, {b, s_q, h_q, kHeadDimQK});
  args.kv.format = c.kv_format;
  args.kv.scale = c.kv_fp8_scale;
  if (c.device_scales) args.kv.device_scale = make_tensor(const_cast<float*>(&kv_scale), DType::kFloat32, {1});
  if (c.fp8_query) {
    args.q = make_tensor(const_cast<uint8_t*>(q_fp8.data()), DType::kFloat8E4M3, {b, s_q, h_q, kHeadDimQK});
    args.q_scale = make_tensor(const_cast<float*>(&q_scale), DType::kFloat32, {1});
  }
  args.kv.data = make_tensor_strided(const_cast<uint8_t*>(cache.data()), kv_dtype, {num_pages, kPageSize, 1, w},
                                     {page_stride_bytes / dtype_size(kv_dtype), w, w, 1});
  args.block_table = make_tensor(const_cast<int32_t*>(block_table.data()), DType::kInt32, {b, max_pages});
  args.cache_seqlens = make_tensor(const_cast<int32_t*>(seqlens.data()), DType::kInt32, {b});
  args.softmax_scale = c.softmax_scale != 0.0f ? c.softmax_scale : 1.0f / std::sqrt(float(kHeadDimQK));
  return args;
}

int64_t requantize_ds_mla_raw_scales(DecodeData& data) {
  if (data.c.kv_format != KVFormat::kFP8DsMla) throw Error(Status::kInvalidArgument, "not a ds_mla case");
  int64_t raw = 0;
  for (int page = 0; page < data.num_pages; ++page) {
    for (int t = 0; t < kPageSize; ++t) {
      uint8_t* token = data.cache.data() + page * data.page_stride_bytes + int64_t{t} * kDsMlaBytesPerToken;
      float values[kHeadDimQK];
      fp8::ds_mla_decode_token(token, values);
      bool finite = true;
      for (float v : values) finite = finite && std::isfinite(v);
      if (!finite) continue;  // poisoned (unused) tokens stay as they are
      for (int tile = 0; tile < kHeadDimV / kDsMlaTile; ++tile) {
        float amax = 0.0f;
        for (int i = 0; i < kDsMlaTile; ++i) amax = std::max(amax, std::fabs(values[tile * kDsMlaTile + i]));
        const float scale = amax > 0.0f ? amax / fp8::kE4M3Max : 0x1p-13f;
        int e = 0;
        raw += std::frexp(scale, &e) != 0.5f;
        for (int i = 0; i < kDsMlaTile; ++i)
          token[kDsMlaLatentOffset + tile * kDsMlaTile + i] = fp8::e4m3_from_float(values[tile * kDsMlaTile + i] / scale);
        std::memcpy(token + kDsMlaScalesOffset + tile * sizeof(float), &scale, sizeof(float));
      }
    }
  }
  return raw;
}

DecodeData make_decode_data(const DecodeCase& c) {
  if (static_cast<int>(c.seqlens.size()) != c.batch_size)
    throw Error(Status::kInvalidArgument, "DecodeCase.seqlens: expected batch_size = " +
                                              std::to_string(c.batch_size) + " entries, got " +
                                              std::to_string(c.seqlens.size()));
  DecodeData d;
  d.c = c;
  d.shape.batch_size = c.batch_size;
  d.shape.q_len = c.q_len;
  d.shape.num_heads = c.num_heads;
  d.shape.q_dtype = c.q_dtype;
  d.shape.kv_format = c.kv_format;
  d.shape.causal = c.causal;
  d.shape.device_scales = c.device_scales;
  if (c.fp8_query) d.shape.q_dtype = DType::kFloat8E4M3;
  d.kv_scale = c.kv_fp8_scale;
  d.seqlens = c.seqlens;

  std::mt19937_64 rng(c.seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);

  // Block-table width: the longest backed request plus extra (out-of-range) columns.
  int64_t longest_backed = 0;
  for (int s : c.seqlens)
    if (s >= 0 && s <= kMaxBackedSeqlen) longest_backed = std::max(longest_backed, ceil_pages(s));
  d.max_pages = static_cast<int>(std::max<int64_t>(1, longest_backed + c.extra_table_slots));

  std::vector<int64_t> request_pages(c.batch_size);
  int64_t total_pages = c.extra_pages;
  for (int r = 0; r < c.batch_size; ++r) {
    const int s = c.seqlens[r];
    request_pages[r] = s < 0 ? 0 : std::min<int64_t>(ceil_pages(s), d.max_pages);
    total_pages += request_pages[r];
  }
  d.num_pages = static_cast<int>(std::max<int64_t>(1, total_pages));

  std::vector<int32_t> page_ids(d.num_pages);
  std::iota(page_ids.begin(), page_ids.end(), 0);
  std::shuffle(page_ids.begin(), page_ids.end(), rng);
  d.block_table.assign(static_cast<size_t>(c.batch_size) * d.max_pages, kUnusedTableEntry);
  size_t next_page = 0;
  for (int r = 0; r < c.batch_size; ++r)
    for (int64_t j = 0; j < request_pages[r]; ++j)
      d.block_table[static_cast<size_t>(r) * d.max_pages + j] = page_ids[next_page++];

  // Query: N(0, 1) rounded to the query dtype.
  d.q.resize(static_cast<size_t>(c.batch_size) * c.q_len * c.num_heads * kHeadDimQK);
  for (uint16_t& bits : d.q) {
    const float x = std::ldexp(normal(rng), c.q_log2_scale);
    bits = c.q_dtype == DType::kFloat16 ? fp8::float_to_fp16(x) : fp8::float_to_bf16(x);
  }
  if (c.fp8_query) {  // per-tensor e4m3 as engines quantize a query: code = e4m3(q / scale)
    auto value = [&](uint16_t bits) {
      return c.q_dtype == DType::kFloat16 ? fp8::fp16_to_float(bits) : fp8::bf16_to_float(bits);
    };
    float amax = 0.0f;
    for (uint16_t bits : d.q) amax = std::max(amax, std::fabs(value(bits)));
    d.q_scale = c.q_fp8_scale != 0.0f ? c.q_fp8_scale : std::max(amax, 1e-6f) / fp8::kE4M3Max;
    d.q_fp8.resize(d.q.size());
    for (size_t i = 0; i < d.q.size(); ++i) d.q_fp8[i] = fp8::e4m3_from_float(value(d.q[i]) / d.q_scale);
  }

  // Cache: all bytes 0xFF first, which is NaN in every format (bf16/fp16 0xFFFF, e4m3 0xFF, float
  // scale 0xFFFFFFFF), so unused pages and the tail of each last page are NaN; then the tokens.
  d.page_stride_bytes = static_cast<int64_t>(kPageSize + c.page_pad_tokens) * kv_bytes_per_token(c.kv_format);
  d.cache.assign(static_cast<size_t>(d.num_pages) * d.page_stride_bytes, 0xFF);
  std::vector<float> latent, rope;
  std::vector<int64_t> slots;
  for (int r = 0; r < c.batch_size; ++r) {
    const int64_t tokens = c.seqlens[r] < 0 ? 0 : std::min<int64_t>(c.seqlens[r], request_pages[r] * kPageSize);
    for (int64_t t = 0; t < tokens; ++t) {
      const int32_t page = d.block_table[static_cast<size_t>(r) * d.max_pages + t / kPageSize];
      slots.push_back(static_cast<int64_t>(page) * kPageSize + t % kPageSize);
      const size_t first = latent.size();
      for (int j = 0; j < kHeadDimV; ++j) latent.push_back(std::ldexp(normal(rng), c.kv_log2_scale));
      for (int j = 0; j < kRopeDim; ++j) rope.push_back(std::ldexp(normal(rng), c.kv_log2_scale));
      if (c.latent_log2_spread > 0) {
        const int spread = c.latent_log2_spread;
        const int token_exp = static_cast<int>(rng() % (2 * spread + 1)) - spread;
        for (int tile = 0; tile < kHeadDimV / kDsMlaTile; ++tile) {
          const int tile_exp = static_cast<int>(rng() % (spread + 1)) - spread / 2;
          const bool zero = tile == 1 && slots.size() % 7 == 0;
          for (int j = 0; j < kDsMlaTile; ++j) {
            float& x = latent[first + tile * kDsMlaTile + j];
            x = zero ? 0.0f : std::ldexp(x, token_exp + tile_exp);
          }
        }
      }
    }
  }
  const int64_t n = static_cast<int64_t>(slots.size());
  WriteKVArgs write;
  write.kv_latent = make_tensor(latent.data(), DType::kFloat32, {n, kHeadDimV});
  write.k_rope = make_tensor(rope.data(), DType::kFloat32, {n, kRopeDim});
  write.slots = make_tensor(slots.data(), DType::kInt64, {n});
  DecodeArgs views = d.host_args();
  write.cache = views.kv;
  reference::write_kv(write);
  return d;
}

ReferenceResult run_reference(const DecodeData& data, Fp8Math math) {
  const int64_t b = data.c.batch_size, s_q = data.c.q_len, h_q = data.c.num_heads;
  ReferenceResult result;
  result.out.resize(static_cast<size_t>(b * s_q * h_q) * kHeadDimV);
  result.lse.resize(static_cast<size_t>(b * s_q * h_q));
  std::vector<double> lse_transposed;  // FlashMLA's [b, h_q, s_q] storage, when asked for
  DecodeArgs args = data.host_args();
  args.out = make_tensor(result.out.data(), DType::kFloat64, {b, s_q, h_q, kHeadDimV});
  if (data.c.lse_flashmla_layout) {
    lse_transposed.resize(result.lse.size());
    args.lse = make_tensor_strided(lse_transposed.data(), DType::kFloat64, {b, s_q, h_q}, {h_q * s_q, 1, s_q});
  } else {
    args.lse = make_tensor(result.lse.data(), DType::kFloat64, {b, s_q, h_q});
  }
  result.device_errors = reference::decode(args, data.shape, math);
  if (data.c.lse_flashmla_layout)
    for (int64_t r = 0; r < b; ++r)
      for (int64_t i = 0; i < s_q; ++i)
        for (int64_t h = 0; h < h_q; ++h)
          result.lse[(r * s_q + i) * h_q + h] = lse_transposed[r * h_q * s_q + h * s_q + i];
  return result;
}

CompareResult compare_decode(const DecodeData& data, const ReferenceResult& ref,
                             const std::vector<uint16_t>& out_bits, const std::vector<float>& lse,
                             double out_tol, double lse_tol, OutSlack slack) {
  CompareResult result;
  const int64_t b = data.c.batch_size;
  const int64_t rows_per_request = static_cast<int64_t>(data.c.q_len) * data.c.num_heads;
  const int64_t out_per_request = rows_per_request * kHeadDimV;
  std::ostringstream msg;
  if (out_bits.size() != ref.out.size() || lse.size() != ref.lse.size()) {
    result.ok = false;
    msg << "size mismatch: out " << out_bits.size() << " (expected " << ref.out.size() << "), lse " << lse.size()
        << " (expected " << ref.lse.size() << ")";
    result.message = msg.str();
    return result;
  }
  // [b, s_q, h_q, c] index text of a flat row-major position.
  auto index_str = [&](int64_t flat, bool is_out) {
    const int64_t c = is_out ? flat % kHeadDimV : -1;
    const int64_t row = is_out ? flat / kHeadDimV : flat;
    std::ostringstream os;
    os << '[' << row / rows_per_request << ", " << (row % rows_per_request) / data.c.num_heads << ", "
       << row % data.c.num_heads;
    if (is_out) os << ", " << c;
    os << ']';
    return os.str();
  };

  // 1. Special values must sit exactly where the oracle has them.
  int64_t class_mismatches = 0;
  std::string first_mismatch;
  auto check_class = [&](double got, double want, int64_t flat, bool is_out) {
    if (classify(got) == classify(want)) return;
    if (class_mismatches++ == 0) {
      std::ostringstream os;
      os << (is_out ? "out" : "lse") << index_str(flat, is_out) << " = " << got << ", reference " << want;
      first_mismatch = os.str();
    }
  };
  const DType out_dtype = data.out_dtype();
  for (size_t k = 0; k < ref.out.size(); ++k)
    check_class(half_bits_to_double(out_bits[k], out_dtype), ref.out[k], static_cast<int64_t>(k), true);
  for (size_t k = 0; k < ref.lse.size(); ++k) check_class(lse[k], ref.lse[k], static_cast<int64_t>(k), false);
  if (class_mismatches > 0) {
    result.ok = false;
    msg << class_mismatches << " NaN/inf position mismatch(es), first: " << first_mismatch << "; ";
  }

  // 2. Finite values: per-request relative error of out, per-element of lse.
  int64_t out_pass = 0, out_total = 0, lse_pass = 0, lse_total = 0;
  int64_t worst_out = -1, worst_lse = -1;
  for (int64_t r = 0; r < b; ++r) {
    double ref_max = 0.0;
    for (int64_t k = r * out_per_request; k < (r + 1) * out_per_request; ++k)
      if (std::isfinite(ref.out[k])) ref_max = std::max(ref_max, std::fabs(ref.out[k]));
    const double denom = ref_max > 0.0 ? ref_max : 1.0;
    for (int64_t k = r * out_per_request; k < (r + 1) * out_per_request; ++k) {
      const double got = half_bits_to_double(out_bits[k], out_dtype);
      if (!std::isfinite(ref.out[k]) || !std::isfinite(got)) continue;
      const double err = std::fabs(got - ref.out[k]) / denom;
      ++out_total;
      if (err <= out_tol) ++out_pass;
      if (worst_out < 0 || err > result.max_out_rel_err) {
        result.max_out_rel_err = err;
        worst_out = k;
      }
    }
    for (int64_t k = r * rows_per_request; k < (r + 1) * rows_per_request; ++k) {
      if (!std::isfinite(ref.lse[k]) || !std::isfinite(lse[k])) continue;
      const double err = std::fabs(lse[k] - ref.lse[k]) / std::max(1.0, std::fabs(ref.lse[k]));
      ++lse_total;
      if (err <= lse_tol) ++lse_pass;
      if (worst_lse < 0 || err > result.max_lse_rel_err) {
        result.max_lse_rel_err = err;
        worst_lse = k;
      }
    }
  }
  result.out_within = out_pass;
  result.out_total = out_total;
  const bool out_ok = slack.fraction >= 1.0
                          ? result.max_out_rel_err <= out_tol
                          : out_pass >= slack.fraction * static_cast<double>(out_total) && result.max_out_rel_err <= slack.cap;
  if (!out_ok || result.max_lse_rel_err > lse_tol) result.ok = false;
  msg << "out: max rel err " << result.max_out_rel_err << " (tol " << out_tol;
  if (slack.fraction < 1.0) msg << " for " << slack.fraction * 100 << "%, " << slack.cap << " for all";
  msg << ")";
  if (worst_out >= 0)
    msg << " at out" << index_str(worst_out, true) << " = " << half_bits_to_double(out_bits[worst_out], out_dtype)
        << ", reference " << ref.out[worst_out];
  msg << ", " << out_pass << "/" << out_total << " within tol; lse: max rel err " << result.max_lse_rel_err
      << " (tol " << lse_tol << ")";
  if (worst_lse >= 0) msg << " at lse" << index_str(worst_lse, false) << " = " << lse[worst_lse] << ", reference "
                          << ref.lse[worst_lse];
  msg << ", " << lse_pass << "/" << lse_total << " within tol";
  if (!result.ok) msg << " [" << data.c.describe() << "]";
  result.message = msg.str();
  return result;
}

}  // namespace openmla::testing
