// CPU oracle for decode: float64 softmax attention over the dequantized paged cache, with the
// device-side guards of docs/validation.md emulated (bad requests get NaN rows, not an exception).
//
// Loop order (for speed): per request, per page of KV tokens: dequantize the page once, then run
// every query row over it with an online softmax (running max, denominator, accumulator), all in
// float64: scores of all rows x the page's tokens, then weights, then weights x values.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/validate.h"
#include "openmla/error.h"
#include "openmla/fp8.h"
#include "openmla/reference.h"

namespace openmla::reference {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

double load_half(const TensorView& t, int64_t offset) {
  const uint16_t bits = static_cast<const uint16_t*>(t.data)[offset];
  return t.dtype == DType::kBFloat16 ? fp8::bf16_to_float(bits) : fp8::fp16_to_float(bits);
}

void store_value(const TensorView& t, int64_t offset, double v) {
  switch (t.dtype) {
    case DType::kFloat64: static_cast<double*>(t.data)[offset] = v; break;
    case DType::kFloat32: static_cast<float*>(t.data)[offset] = static_cast<float>(v); break;
    // Via float: a double -> float -> 16-bit double rounding can differ from a direct rounding in
    // rare ties; half-precision reference outputs are a convenience, tests compare in float64.
    case DType::kBFloat16:
      static_cast<uint16_t*>(t.data)[offset] = fp8::float_to_bf16(static_cast<float>(v));
      break;
    case DType::kFloat16:
      static_cast<uint16_t*>(t.data)[offset] = fp8::float_to_fp16(static_cast<float>(v));
      break;
    default: throw Error(Status::kInternal, "decode reference: unexpected output dtype after validation");
  }
}

// The two products of a page, as register-blocked micro-kernels (4 query rows x 8 tokens or 8
// value columns, accumulators in registers, no reductions across SIMD lanes) so that the compiler
// vectorizes them without reassociating sums: each score and each output element is still summed
// in a fixed order in float64. x86-64 builds also get an AVX2/FMA clone picked at load time.
#if defined(__x86_64__) && defined(__GNUC__) && defined(__linux__)
#define OPENMLA_REFERENCE_KERNEL __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define OPENMLA_REFERENCE_KERNEL
#endif

constexpr int kRowBlock = 4;  // divides every s_q * h_q (h_q is a multiple of 8)
constexpr int kColBlock = 8;

// scores[rows][64] = q[rows][576] . k_t[576][64] (k_t: the page's keys transposed, zero past its tokens).
OPENMLA_REFERENCE_KERNEL
void page_scores(const double* q, int rows, const double* k_t, double* scores) {
  for (int r0 = 0; r0 < rows; r0 += kRowBlock)
    for (int t0 = 0; t0 < kPageSize; t0 += kColBlock) {
      double acc[kRowBlock][kColBlock] = {};
      for (int j = 0; j < kHeadDimQK; ++j) {
        const double* k = k_t + j * kPageSize + t0;
        for (int r = 0; r < kRowBlock; ++r) {
          const double qv = q[(r0 + r) * kHeadDimQK + j];
          for (int t = 0; t < kColBlock; ++t) acc[r][t] += qv * k[t];
        }
      }
      for (int r = 0; r < kRowBlock; ++r)
        for (int t = 0; t < kColBlock; ++t) scores[(r0 + r) * kPageSize + t0 + t] = acc[r][t];
    }
}

// acc[rows][512] += p[rows][64] . v[tokens][576 (first 512 used)], over the first `tokens` tokens.
OPENMLA_REFERENCE_KERNEL
void page_values(const double* p, int rows, const double* v, int tokens, double* acc) {
  for (int r0 = 0; r0 < rows; r0 += kRowBlock)
    for (int c0 = 0; c0 < kHeadDimV; c0 += kColBlock) {
      double sum[kRowBlock][kColBlock];
      for (int r = 0; r < kRowBlock; ++r)
        for (int c = 0; c < kColBlock; ++c) sum[r][c] = acc[(r0 + r) * kHeadDimV + c0 + c];
      for (int t = 0; t < tokens; ++t) {
        const double* vt = v + t * kHeadDimQK + c0;
        for (int r = 0; r < kRowBlock; ++r) {
          const double pv = p[(r0 + r) * kPageSize + t];
          for (int c = 0; c < kColBlock; ++c) sum[r][c] += pv * vt[c];
        }
      }
      for (int r = 0; r < kRowBlock; ++r)
        for (int c = 0; c < kColBlock; ++c) acc[(r0 + r) * kHeadDimV + c0 + c] = sum[r][c];
    }
}

// The device-side guards, checked in this order; the first that fails is the request's error bit.
unsigned request_guard(int64_t seqlen, int64_t max_pages, int q_len, bool causal, const int32_t* table_row,
                       int64_t table_stride, int64_t num_pages) {
  if (seqlen < 0) return kDeviceErrorNegativeSeqlen;
  if (seqlen > max_pages * kPageSize) return kDeviceErrorSeqlenBeyondTable;
  if (causal && q_len > 1 && seqlen < q_len) return kDeviceErrorSeqlenBelowQueryLen;
  const int64_t blocks = (seqlen + kPageSize - 1) / kPageSize;
  for (int64_t j = 0; j < blocks; ++j) {
    const int64_t page = table_row[j * table_stride];
    if (page < 0 || page >= num_pages) return kDeviceErrorPageIdOutOfRange;
  }
  return kDeviceErrorNone;
}

}  // namespace

void read_kv_token(const KVCache& cache, int64_t page, int offset, float* out576) {
  const TensorView& t = cache.data;
  const int64_t elem = dtype_size(t.dtype);
  const uint8_t* token =
      static_cast<const uint8_t*>(t.data) + (page * t.strides[0] + offset * t.strides[1]) * elem;
  switch (cache.format) {
    case KVFormat::kBF16:
    case KVFormat::kFP16: {
      uint16_t bits[kHeadDimQK];
      std::memcpy(bits, token, sizeof(bits));
      for (int j = 0; j < kHeadDimQK; ++j)
        out576[j] = cache.format == KVFormat::kBF16 ? fp8::bf16_to_float(bits[j]) : fp8::fp16_to_float(bits[j]);
      break;
    }
    case KVFormat::kFP8E4M3: {
      for (int j = 0; j < kHeadDimQK; ++j) out576[j] = fp8::e4m3_to_float(token[j]) * cache.scale;
      break;
    }
    case KVFormat::kFP8DsMla: {
      fp8::ds_mla_decode_token(token, out576);
      break;
    }
    default: throw Error(Status::kInvalidArgument, "read_kv_token: cache.format is not a KVFormat");
  }
}

unsigned decode(const DecodeArgs& args, const DecodeShape& shape) {
  detail::validate_decode_args(args, shape, DeviceType::kCPU, 0, detail::DecodeOutputs::kReference);
  const int b = shape.batch_size, s_q = shape.q_len, h_q = shape.num_heads;
  const int rows = s_q * h_q;  // row = token * h_q + head
  const TensorView& q = args.q;
  const TensorView& table = args.block_table;
  const TensorView& out = args.out;
  const TensorView& lse = args.lse;
  const int64_t max_pages = table.shape[1];
  const int64_t num_pages = args.kv.data.shape[0];
  const double scale = args.softmax_scale;
  unsigned errors = kDeviceErrorNone;

  std::vector<double> q_rows(static_cast<size_t>(rows) * kHeadDimQK);
  std::vector<double> kv_page(static_cast<size_t>(kPageSize) * kHeadDimQK);  // token-major
  std::vector<double> k_t(static_cast<size_t>(kHeadDimQK) * kPageSize);       // transposed keys
  std::vector<double> scores(static_cast<size_t>(rows) * kPageSize);          // then weights
  std::vector<double> acc(static_cast<size_t>(rows) * kHeadDimV);
  std::vector<double> row_max(rows), row_sum(rows);
  std::vector<int64_t> visible(rows);  // KV positions [0, visible) each row attends to
  float token[kHeadDimQK];

  auto out_offset = [&](int r, int i, int h) {
    return r * out.strides[0] + i * out.strides[1] + h * out.strides[2];
  };
  auto lse_offset = [&](int r, int i, int h) {
    return r * lse.strides[0] + i * lse.strides[1] + h * lse.strides[2];
  };

  for (int r = 0; r < b; ++r) {
    const int64_t seqlen = static_cast<const int32_t*>(args.cache_seqlens.data)[r];
    const int32_t* table_row = static_cast<const int32_t*>(table.data) + r * table.strides[0];
    const unsigned guard = request_guard(seqlen, max_pages, s_q, shape.causal, table_row, table.strides[1], num_pages);
    if (guard != kDeviceErrorNone) {
      errors |= guard;
      for (int i = 0; i < s_q; ++i)
        for (int h = 0; h < h_q; ++h) {
          for (int c = 0; c < kHeadDimV; ++c) store_value(out, out_offset(r, i, h) + c * out.strides[3], kNaN);
          store_value(lse, lse_offset(r, i, h), kNaN);
        }
      continue;
    }

    for (int i = 0; i < s_q; ++i)
      for (int h = 0; h < h_q; ++h) {
        const int row = i * h_q + h;
        const int64_t q_base = r * q.strides[0] + i * q.strides[1] + h * q.strides[2];
        for (int c = 0; c < kHeadDimQK; ++c) q_rows[row * kHeadDimQK + c] = load_half(q, q_base + c * q.strides[3]);
        // Query token i sits at KV position seqlen - s_q + i; causal lets it see positions <= its own.
        visible[row] = shape.causal && s_q > 1 ? seqlen - s_q + i + 1 : seqlen;
      }
    std::fill(acc.begin(), acc.end(), 0.0);
    std::fill(row_max.begin(), row_max.end(), -kInf);
    std::fill(row_sum.begin(), row_sum.end(), 0.0);

    for (int64_t first = 0; first < seqlen; first += kPageSize) {
      const int64_t page = table_row[(first / kPageSize) * table.strides[1]];
      const int count = static_cast<int>(std::min<int64_t>(kPageSize, seqlen - first));
      std::fill(k_t.begin(), k_t.end(), 0.0);
      for (int t = 0; t < count; ++t) {
        read_kv_token(args.kv, page, t, token);
        for (int c = 0; c < kHeadDimQK; ++c) {
          kv_page[t * kHeadDimQK + c] = token[c];
          k_t[c * kPageSize + t] = token[c];
        }
      }
      page_scores(q_rows.data(), rows, k_t.data(), scores.data());
      for (int row = 0; row < rows; ++row) {
        // Tokens of this page the row sees; the others get weight 0 (and their scores are ignored).
        const int n = static_cast<int>(std::clamp<int64_t>(visible[row] - first, 0, count));
        double* s = &scores[row * kPageSize];
        for (int t = 0; t < n; ++t) s[t] *= scale;
        double page_max = -kInf;
        for (int t = 0; t < n; ++t) page_max = std::max(page_max, s[t]);
        if (page_max > row_max[row]) {  // rescale what was accumulated under the old maximum
          const double correction = std::exp(row_max[row] - page_max);
          for (int c = 0; c < kHeadDimV; ++c) acc[row * kHeadDimV + c] *= correction;
          row_sum[row] *= correction;
          row_max[row] = page_max;
        }
        for (int t = 0; t < kPageSize; ++t) {
          s[t] = t < n ? std::exp(s[t] - row_max[row]) : 0.0;  // s becomes the weight p
          row_sum[row] += s[t];
        }
      }
      page_values(scores.data(), rows, kv_page.data(), count, acc.data());
    }

    for (int i = 0; i < s_q; ++i)
      for (int h = 0; h < h_q; ++h) {
        const int row = i * h_q + h;
        const bool empty = visible[row] <= 0;  // length 0: out 0, lse -inf
        const double inv_sum = empty ? 0.0 : 1.0 / row_sum[row];
        const int64_t o = out_offset(r, i, h);
        for (int c = 0; c < kHeadDimV; ++c)
          store_value(out, o + c * out.strides[3], empty ? 0.0 : acc[row * kHeadDimV + c] * inv_sum);
        store_value(lse, lse_offset(r, i, h), empty ? -kInf : row_max[row] + std::log(row_sum[row]));
      }
  }
  return errors;
}

}  // namespace openmla::reference
