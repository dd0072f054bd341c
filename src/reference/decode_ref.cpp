// CPU oracle for decode: float64 softmax attention over the dequantized paged cache, with the
// device-side guards of docs/validation.md emulated (bad requests get NaN rows, not an exception).
//
// Loop order (for speed): per (request, block of up to 128 query rows), per page of KV tokens:
// dequantize the page once, then run every row of the block over it with an online softmax
// (running max, denominator, accumulator), all in float64: the block's scores against the page's
// tokens, then weights, then weights x values. Blocks run on worker threads.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <limits>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/validate.h"
#include "openmla/error.h"
#include "openmla/fp8.h"
#include "openmla/reference.h"
#include "reference/ref_common.h"

namespace openmla::reference {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

}  // namespace

namespace internal {

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

int reference_threads(size_t tasks) {
  int n = static_cast<int>(std::thread::hardware_concurrency());
  if (const char* env = std::getenv("OPENMLA_REFERENCE_THREADS")) n = std::atoi(env);
  n = std::max(1, std::min(n, 64));
  return static_cast<int>(std::min<size_t>(static_cast<size_t>(n), std::max<size_t>(tasks, 1)));
}

namespace {

// The two products of a page as register-blocked micro-kernels: kRowBlock query rows x two
// SIMD vectors of tokens (scores) or value columns (outputs), accumulators held in registers. Lanes
// never mix, so each score and each output element is still a float64 sum in a fixed order (FMA
// contraction may differ between the two instruction sets; both are float64). x86-64 picks an
// AVX2/FMA build at run time; other GNU targets use 2-wide vectors, other compilers scalar loops.

#if defined(__GNUC__)
// Vectors are moved with one memcpy each (an unaligned load or store; no pointer casts).
typedef double Vec2 __attribute__((vector_size(16)));
#if defined(__x86_64__)
typedef double Vec4 __attribute__((vector_size(32)));
#define OPENMLA_REFERENCE_HAS_AVX2 1
#endif

// scores[rows][64] = q[rows][576] . k_t[576][64] (k_t: the page's keys transposed, zero past its tokens).
template <typename V, int kVecs>
__attribute__((always_inline)) inline void page_scores_impl(const double* q, int rows, const double* k_t,
                                                            double* scores) {
  constexpr int kLanes = sizeof(V) / sizeof(double);
  constexpr int kTokens = kLanes * kVecs;
  static_assert(kPageSize % kTokens == 0, "token blocks must tile a page");
  for (int r0 = 0; r0 < rows; r0 += kRowBlock)
    for (int t0 = 0; t0 < kPageSize; t0 += kTokens) {
      V acc[kRowBlock][kVecs] = {};
      for (int j = 0; j < kHeadDimQK; ++j) {
        V k[kVecs];
        for (int u = 0; u < kVecs; ++u) std::memcpy(&k[u], k_t + j * kPageSize + t0 + u * kLanes, sizeof(V));
        for (int r = 0; r < kRowBlock; ++r) {
          const double qv = q[(r0 + r) * kHeadDimQK + j];
          for (int u = 0; u < kVecs; ++u) acc[r][u] += qv * k[u];
        }
      }
      for (int r = 0; r < kRowBlock; ++r)
        for (int u = 0; u < kVecs; ++u) std::memcpy(scores + (r0 + r) * kPageSize + t0 + u * kLanes, &acc[r][u], sizeof(V));
    }
}

// acc[rows][512] += p[rows][64] . v[tokens][576 (first 512 used)], over the first `tokens` tokens.
template <typename V, int kVecs>
__attribute__((always_inline)) inline void page_values_impl(const double* p, int rows, const double* v, int tokens,
                                                            double* acc) {
  constexpr int kLanes = sizeof(V) / sizeof(double);
  constexpr int kCols = kLanes * kVecs;
  static_assert(kHeadDimV % kCols == 0, "column blocks must tile a row");
  for (int r0 = 0; r0 < rows; r0 += kRowBlock)
    for (int c0 = 0; c0 < kHeadDimV; c0 += kCols) {
      V sum[kRowBlock][kVecs];
      for (int r = 0; r < kRowBlock; ++r)
        for (int u = 0; u < kVecs; ++u) std::memcpy(&sum[r][u], acc + (r0 + r) * kHeadDimV + c0 + u * kLanes, sizeof(V));
      for (int t = 0; t < tokens; ++t) {
        V vt[kVecs];
        for (int u = 0; u < kVecs; ++u) std::memcpy(&vt[u], v + t * kHeadDimQK + c0 + u * kLanes, sizeof(V));
        for (int r = 0; r < kRowBlock; ++r) {
          const double pv = p[(r0 + r) * kPageSize + t];
          for (int u = 0; u < kVecs; ++u) sum[r][u] += pv * vt[u];
        }
      }
      for (int r = 0; r < kRowBlock; ++r)
        for (int u = 0; u < kVecs; ++u) std::memcpy(acc + (r0 + r) * kHeadDimV + c0 + u * kLanes, &sum[r][u], sizeof(V));
    }
}

void page_scores_generic(const double* q, int rows, const double* k_t, double* scores) {
  page_scores_impl<Vec2, 2>(q, rows, k_t, scores);
}
void page_values_generic(const double* p, int rows, const double* v, int tokens, double* acc) {
  page_values_impl<Vec2, 2>(p, rows, v, tokens, acc);
}
#if OPENMLA_REFERENCE_HAS_AVX2
__attribute__((target("avx2,fma"))) void page_scores_avx2(const double* q, int rows, const double* k_t,
                                                          double* scores) {
  page_scores_impl<Vec4, 2>(q, rows, k_t, scores);
}
__attribute__((target("avx2,fma"))) void page_values_avx2(const double* p, int rows, const double* v, int tokens,
                                                          double* acc) {
  page_values_impl<Vec4, 2>(p, rows, v, tokens, acc);
}
#endif

#else  // not GNU: plain loops

void page_scores_generic(const double* q, int rows, const double* k_t, double* scores) {
  for (int r = 0; r < rows; ++r)
    for (int t = 0; t < kPageSize; ++t) {
      double dot = 0.0;
      for (int j = 0; j < kHeadDimQK; ++j) dot += q[r * kHeadDimQK + j] * k_t[j * kPageSize + t];
      scores[r * kPageSize + t] = dot;
    }
}
void page_values_generic(const double* p, int rows, const double* v, int tokens, double* acc) {
  for (int r = 0; r < rows; ++r)
    for (int t = 0; t < tokens; ++t)
      for (int c = 0; c < kHeadDimV; ++c) acc[r * kHeadDimV + c] += p[r * kPageSize + t] * v[t * kHeadDimQK + c];
}
#endif

}  // namespace

// OPENMLA_REFERENCE_SIMD=generic forces the portable kernels (tests compare the two paths).
PageKernels select_page_kernels() {
#if OPENMLA_REFERENCE_HAS_AVX2
  const char* choice = std::getenv("OPENMLA_REFERENCE_SIMD");
  const bool generic = choice != nullptr && std::strcmp(choice, "generic") == 0;
  if (!generic && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    return {page_scores_avx2, page_values_avx2};
#endif
  return {page_scores_generic, page_values_generic};
}

}  // namespace internal

namespace {

using internal::kRowBlock;
using internal::load_half;
using internal::PageKernels;
using internal::select_page_kernels;
using internal::store_value;

// A query element: 16-bit, or e4m3 times the query's scale (exact in float64).
double load_query(const TensorView& q, int64_t offset, double q_scale) {
  if (q.dtype == DType::kFloat8E4M3) return fp8::e4m3_to_float(static_cast<const uint8_t*>(q.data)[offset]) * q_scale;
  return load_half(q, offset);
}

// The value of a device-held scale tensor (host memory in the reference); 1 when undefined.
double scale_value(const TensorView& t) {
  return t.defined() ? static_cast<double>(*static_cast<const float*>(t.data)) : 1.0;
}
bool valid_scale(double s) { return std::isfinite(s) && s > 0.0; }

// The device-side guards, checked in this order; the first that fails is the request's error bit.
// masked: a causal or tree mask places the request's q_len query tokens at its last KV positions.
unsigned request_guard(int64_t seqlen, int64_t max_pages, int q_len, bool masked, const int32_t* table_row,
                       int64_t table_stride, int64_t num_pages) {
  if (seqlen < 0) return kDeviceErrorNegativeSeqlen;
  if (seqlen > max_pages * kPageSize) return kDeviceErrorSeqlenBeyondTable;
  // Length 0 is an empty request (batch padding), never an error.
  if (masked && q_len > 1 && seqlen > 0 && seqlen < q_len) return kDeviceErrorSeqlenBelowQueryLen;
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
      const float scale = cache.device_scale.defined() ? *static_cast<const float*>(cache.device_scale.data) : cache.scale;
      for (int j = 0; j < kHeadDimQK; ++j) out576[j] = fp8::e4m3_to_float(token[j]) * scale;
      break;
    }
    case KVFormat::kFP8DsMla: {
      fp8::ds_mla_decode_token(token, out576);
      break;
    }
    default: throw Error(Status::kInvalidArgument, "read_kv_token: cache.format is not a KVFormat");
  }
}

namespace {

// Query rows per work item (a multiple of kRowBlock). Each item dequantizes the request's pages on
// its own, so larger items waste less; 128 still gives b * s_q * h_q / 128 items to spread.
constexpr int kRowsPerTask = 128;

// Per-thread buffers for one work item: rows [row_begin, row_end) of one request.
struct RowScratch {
  std::vector<double> q_rows = std::vector<double>(static_cast<size_t>(kRowsPerTask) * kHeadDimQK);
  std::vector<double> kv_page = std::vector<double>(static_cast<size_t>(kPageSize) * kHeadDimQK);  // token-major
  std::vector<double> k_t = std::vector<double>(static_cast<size_t>(kHeadDimQK) * kPageSize);      // transposed
  std::vector<double> scores = std::vector<double>(static_cast<size_t>(kRowsPerTask) * kPageSize);  // then weights
  std::vector<double> acc = std::vector<double>(static_cast<size_t>(kRowsPerTask) * kHeadDimV);
  double row_max[kRowsPerTask];
  double row_sum[kRowsPerTask];
  // KV positions each row attends to: [0, limit), or with a tree mask [0, prefix) and prefix + j for each bit j of
  // draft_bits (bits at or past the request's query count are cleared).
  int64_t limit[kRowsPerTask];
  int64_t prefix[kRowsPerTask];
  uint64_t draft_bits[kRowsPerTask];
  int64_t seen[kRowsPerTask];  // visible keys so far
  float token[kHeadDimQK];

  bool visible(int k, int64_t pos) const {
    if (pos < prefix[k]) return true;
    const int64_t j = pos - prefix[k];
    return pos < limit[k] && j < 64 && ((draft_bits[k] >> j) & 1u);
  }
};

struct DecodeTask {
  int request;
  int row_begin, row_end;  // row = query token * h_q + head
};

// Request r's query tokens: packed rows [begin, begin + count) of a ragged q, or row r of a uniform one.
struct RequestQueries {
  int64_t begin = 0;
  int count = 0;
  bool malformed = false;  // ragged q_indptr pair out of order, out of range or over shape.q_len
};

class ReferenceDecoder {
 public:
  ReferenceDecoder(const DecodeArgs& args, const DecodeShape& shape, Fp8Math math)
      : args_(args), shape_(shape), math_(math), kernels_(select_page_kernels()), q_scale_(scale_value(args.q_scale)) {}

  // Device-held scales that are not finite and > 0 (kDeviceErrorScale): every request with keys gets NaN rows.
  bool bad_scales() const {
    return (args_.q_scale.defined() && !valid_scale(q_scale_)) ||
           (args_.kv.device_scale.defined() && !valid_scale(scale_value(args_.kv.device_scale)));
  }
  int64_t request_length(int r) const { return seqlen(r); }

  bool ragged() const { return shape_.query_layout == QueryLayout::kRagged; }

  RequestQueries queries(int r) const {
    if (!ragged()) return {r, shape_.q_len, false};
    const int32_t* indptr = static_cast<const int32_t*>(args_.q_indptr.data);
    const int64_t a = indptr[r], e = indptr[r + 1];
    if (a < 0 || e < a || e > args_.q.shape[0] || e - a > shape_.q_len) return {0, 0, true};
    return {a, static_cast<int>(e - a), false};
  }

  // Element offsets of query token i, head h of request r (RequestQueries::begin) in q, out and lse.
  int64_t token_offset(const TensorView& t, const RequestQueries& rq, int i, int h) const {
    return ragged() ? (rq.begin + i) * t.strides[0] + h * t.strides[1]
                    : rq.begin * t.strides[0] + i * t.strides[1] + h * t.strides[2];
  }
  int64_t last_stride(const TensorView& t) const { return t.strides[ragged() ? 2 : 3]; }

  uint64_t mask_row(const RequestQueries& rq, int i) const {
    const int64_t* words = static_cast<const int64_t*>(args_.mask.data);
    switch (shape_.tree_mask) {
      case TreeMask::kShared: return static_cast<uint64_t>(words[i]);
      case TreeMask::kPerRequest: return static_cast<uint64_t>(words[rq.begin * shape_.q_len + i]);
      case TreeMask::kPacked: return static_cast<uint64_t>(words[rq.begin + i]);
      case TreeMask::kNone: break;
    }
    return 0;
  }

  int64_t seqlen(int r) const { return static_cast<const int32_t*>(args_.cache_seqlens.data)[r]; }
  const int32_t* table_row(int r) const {
    return static_cast<const int32_t*>(args_.block_table.data) + r * args_.block_table.strides[0];
  }

  unsigned guard(int r, const RequestQueries& rq) const {
    const bool masked = shape_.causal || shape_.tree_mask != TreeMask::kNone;
    return request_guard(seqlen(r), args_.block_table.shape[1], rq.count, masked, table_row(r),
                         args_.block_table.strides[1], args_.kv.data.shape[0]);
  }

  void write_row(const RequestQueries& rq, int row, const double* values512, double lse_value) const {
    const TensorView& out = args_.out;
    const TensorView& lse = args_.lse;
    const int i = row / shape_.num_heads, h = row % shape_.num_heads;
    const int64_t o = token_offset(out, rq, i, h), o_last = last_stride(out);
    for (int c = 0; c < kHeadDimV; ++c) store_value(out, o + c * o_last, values512 ? values512[c] : kNaN);
    store_value(lse, token_offset(lse, rq, i, h), lse_value);
  }

  void run(const DecodeTask& task, RowScratch& w) const {
    const TensorView& q = args_.q;
    const int r = task.request, h_q = shape_.num_heads;
    const RequestQueries rq = queries(r);
    const int n = rq.count;
    const int rows = task.row_end - task.row_begin;
    // The micro-kernels take whole blocks of kRowBlock rows: padding rows have a zero query and see no key.
    const int block_rows = (rows + kRowBlock - 1) / kRowBlock * kRowBlock;
    const int64_t len = seqlen(r);
    const int32_t* table = table_row(r);
    const double scale = args_.softmax_scale;
    const int64_t q_last = last_stride(q);
    for (int k = 0; k < rows; ++k) {
      const int row = task.row_begin + k, i = row / h_q, h = row % h_q;
      const int64_t q_base = token_offset(q, rq, i, h);
      for (int c = 0; c < kHeadDimQK; ++c) w.q_rows[k * kHeadDimQK + c] = load_query(q, q_base + c * q_last, q_scale_);
      if (math_ == Fp8Math::kQkAndPv) quantize_query_row(&w.q_rows[k * kHeadDimQK]);
      // Query token i sits at KV position len - n + i. Causal: it sees positions <= its own. Tree: the prefix
      // [0, len - n) and the draft tokens its mask row names. Neither: all len positions.
      w.limit[k] = len;
      w.prefix[k] = len;
      w.draft_bits[k] = 0;
      if (shape_.tree_mask != TreeMask::kNone) {
        w.prefix[k] = len - n;
        w.draft_bits[k] = mask_row(rq, i) & (n >= 64 ? ~uint64_t{0} : (uint64_t{1} << n) - 1);
      } else if (shape_.causal && n > 1) {
        w.limit[k] = w.prefix[k] = len - n + i + 1;
      }
      w.seen[k] = 0;
      w.row_max[k] = -kInf;
      w.row_sum[k] = 0.0;
    }
    for (int k = rows; k < block_rows; ++k) {
      std::fill(&w.q_rows[k * kHeadDimQK], &w.q_rows[(k + 1) * kHeadDimQK], 0.0);
      w.limit[k] = w.prefix[k] = 0;
      w.draft_bits[k] = 0;
      w.seen[k] = 0;
      w.row_max[k] = -kInf;
      w.row_sum[k] = 0.0;
    }
    std::fill(w.acc.begin(), w.acc.end(), 0.0);

    for (int64_t first = 0; first < len; first += kPageSize) {
      const int64_t page = table[(first / kPageSize) * args_.block_table.strides[1]];
      const int count = static_cast<int>(std::min<int64_t>(kPageSize, len - first));
      std::fill(w.k_t.begin(), w.k_t.end(), 0.0);
      for (int t = 0; t < count; ++t) {
        read_kv_token(args_.kv, page, t, w.token);
        for (int c = 0; c < kHeadDimQK; ++c) {
          w.kv_page[t * kHeadDimQK + c] = w.token[c];
          w.k_t[c * kPageSize + t] = w.token[c];
        }
      }
      kernels_.scores(w.q_rows.data(), block_rows, w.k_t.data(), w.scores.data());
      for (int k = 0; k < block_rows && math_ == Fp8Math::kQkAndPv; ++k) fp8_weights(w, k, first, count);
      for (int k = 0; k < block_rows && math_ == Fp8Math::kOff; ++k) {
        // Tokens of this page the row sees; the others get weight 0 (their scores are ignored).
        bool vis[kPageSize];
        for (int t = 0; t < kPageSize; ++t) vis[t] = t < count && w.visible(k, first + t);
        double* s = &w.scores[k * kPageSize];
        double page_max = -kInf;
        for (int t = 0; t < kPageSize; ++t) {
          if (!vis[t]) continue;
          s[t] *= scale;
          page_max = std::max(page_max, s[t]);
          ++w.seen[k];
        }
        if (page_max > w.row_max[k]) {  // rescale what was accumulated under the old maximum
          const double correction = std::exp(w.row_max[k] - page_max);
          for (int c = 0; c < kHeadDimV; ++c) w.acc[k * kHeadDimV + c] *= correction;
          w.row_sum[k] *= correction;
          w.row_max[k] = page_max;
        }
        for (int t = 0; t < kPageSize; ++t) {
          s[t] = vis[t] ? std::exp(s[t] - w.row_max[k]) : 0.0;  // s becomes the weight p
          w.row_sum[k] += s[t];
        }
      }
      kernels_.values(w.scores.data(), block_rows, w.kv_page.data(), count, w.acc.data());
    }

    for (int k = 0; k < rows; ++k) {
      double* values = &w.acc[k * kHeadDimV];
      if (w.seen[k] == 0) {  // nothing visible (length 0, or a tree row with no prefix and no draft): out 0, lse -inf
        std::fill(values, values + kHeadDimV, 0.0);
        write_row(rq, task.row_begin + k, values, -kInf);
        continue;
      }
      for (int c = 0; c < kHeadDimV; ++c) values[c] /= w.row_sum[k];
      // FP8 math keeps the running maximum as a base in log2 units (below).
      const double max_term = math_ == Fp8Math::kQkAndPv ? w.row_max[k] * kLn2 : w.row_max[k];
      write_row(rq, task.row_begin + k, values, max_term + std::log(w.row_sum[k]));
    }
  }

 private:
  static constexpr double kLn2 = 0.69314718055994530942;
  static constexpr double kLog2e = 1.44269504088896340736;

  // Fp8Math::kQkAndPv: the row as the kernel quantizes it, e4m3(q * 2^-e) * 2^e.
  static void quantize_query_row(double* q576) {
    float amax = 0.0f;
    for (int c = 0; c < kHeadDimQK; ++c) amax = std::max(amax, std::fabs(static_cast<float>(q576[c])));
    const int e = fp8::fp8_math_query_exponent(amax);
    for (int c = 0; c < kHeadDimQK; ++c) {
      const float scaled = std::ldexp(static_cast<float>(q576[c]), -e);  // exact
      q576[c] = std::ldexp(static_cast<double>(fp8::e4m3_to_float(fp8::e4m3_from_float(scaled))), e);
    }
  }

  // Fp8Math::kQkAndPv weights of row k over one page, as the kernel forms them: x = score in log2
  // units, base = ceil(running max of x) (row_max holds it), p = 2^(x - base) summed unrounded,
  // the weight e4m3(256 p) / 256. Every base change is a power of two, so the weights equal the
  // kernel's whatever its tiles and splits (up to e4m3 subnormals, p < 2^-14).
  void fp8_weights(RowScratch& w, int k, int64_t first, int count) const {
    bool vis[kPageSize];
    for (int t = 0; t < kPageSize; ++t) vis[t] = t < count && w.visible(k, first + t);
    double* s = &w.scores[k * kPageSize];
    const double scale_log2 = static_cast<double>(args_.softmax_scale) * kLog2e;
    double page_max = -kInf;
    for (int t = 0; t < kPageSize; ++t) {
      if (!vis[t]) continue;
      s[t] *= scale_log2;
      page_max = std::max(page_max, s[t]);
      ++w.seen[k];
    }
    const double base = std::max(w.row_max[k], std::ceil(page_max));
    if (base > w.row_max[k]) {
      const double correction = std::exp2(w.row_max[k] - base);  // 0 from -inf
      for (int c = 0; c < kHeadDimV; ++c) w.acc[k * kHeadDimV + c] *= correction;
      w.row_sum[k] *= correction;
      w.row_max[k] = base;
    }
    for (int t = 0; t < kPageSize; ++t) {
      const double p = vis[t] ? std::exp2(s[t] - w.row_max[k]) : 0.0;
      w.row_sum[k] += p;
      s[t] = static_cast<double>(fp8::e4m3_to_float(fp8::e4m3_from_float(static_cast<float>(256.0 * p)))) / 256.0;
    }
  }

  const DecodeArgs& args_;
  const DecodeShape& shape_;
  Fp8Math math_;
  PageKernels kernels_;
  double q_scale_;  // e4m3 queries: value = code * q_scale_
};

}  // namespace

unsigned decode(const DecodeArgs& args, const DecodeShape& shape, Fp8Math math) {
  detail::validate_decode_args(args, shape, DeviceType::kCPU, 0, detail::DecodeOutputs::kReference);
  if (math != Fp8Math::kOff && (math != Fp8Math::kQkAndPv || shape.kv_format != KVFormat::kFP8E4M3))
    throw Error(Status::kInvalidArgument, std::string("math: expected kOff, or kQkAndPv with an fp8_e4m3 cache, got ") +
                                              fp8_math_name(math) + " with " + kv_format_name(shape.kv_format));
  const ReferenceDecoder decoder(args, shape, math);
  // A bad device-held scale is flagged by every CTA that runs: whatever the lengths, as b >= 1.
  unsigned errors = decoder.bad_scales() ? unsigned{kDeviceErrorScale} : kDeviceErrorNone;
  std::vector<DecodeTask> tasks;
  for (int r = 0; r < shape.batch_size; ++r) {
    const RequestQueries rq = decoder.queries(r);
    if (rq.malformed) {  // its rows are unknown: nothing is written
      errors |= kDeviceErrorQueryOffsets;
      continue;
    }
    const int rows = rq.count * shape.num_heads;
    if (const unsigned bad = decoder.guard(r, rq)) {  // device guard: NaN rows, an error bit, no exception
      errors |= bad;
      for (int row = 0; row < rows; ++row) decoder.write_row(rq, row, nullptr, kNaN);
      continue;
    }
    if (decoder.bad_scales() && decoder.request_length(r) > 0) {  // NaN scores: no finite row
      for (int row = 0; row < rows; ++row) decoder.write_row(rq, row, nullptr, kNaN);
      continue;
    }
    for (int begin = 0; begin < rows; begin += kRowsPerTask) tasks.push_back({r, begin, std::min(rows, begin + kRowsPerTask)});
  }

  // Rows are independent and each is computed the same way whatever thread runs it, so results do
  // not depend on the thread count.
  internal::parallel_tasks<RowScratch>(tasks.size(),
                                     [&](size_t k, RowScratch& scratch) { decoder.run(tasks[k], scratch); });
  return errors;
}

}  // namespace openmla::reference
