// CPU oracle for sparse top-k decode: per query token, the slots its indices name (in the cache, then in the
// extra cache) gathered in blocks of 64 and attended with the dense reference's float64 page kernels and online
// softmax, with the device-side guards of docs/sparse-decode.md emulated (NaN rows and error bits, no exception).
//
// One work item per query token: its h_q rows (at most 128) share the gathered keys. Items run on worker threads;
// each row is computed the same way whatever thread runs it.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/validate.h"
#include "openmla/error.h"
#include "openmla/reference.h"
#include "reference/ref_common.h"

namespace openmla::reference {
namespace {

using internal::kRowBlock;
using internal::load_half;
using internal::PageKernels;
using internal::store_value;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr int kMaxRows = 128;  // h_q
constexpr int kBlock = kPageSize;  // gathered tokens per kernel call (the page kernels' token count)

// Per-thread buffers for one query token.
struct TokenScratch {
  std::vector<double> q_rows = std::vector<double>(static_cast<size_t>(kMaxRows) * kHeadDimQK);
  std::vector<double> kv = std::vector<double>(static_cast<size_t>(kBlock) * kHeadDimQK);   // token-major
  std::vector<double> k_t = std::vector<double>(static_cast<size_t>(kHeadDimQK) * kBlock);  // transposed
  std::vector<double> scores = std::vector<double>(static_cast<size_t>(kMaxRows) * kBlock);  // then weights
  std::vector<double> acc = std::vector<double>(static_cast<size_t>(kMaxRows) * kHeadDimV);
  double row_max[kMaxRows];
  double row_sum[kMaxRows];
  float token[kHeadDimQK];
};

// One gathered key: which cache and the slot in it.
struct Slot {
  const KVCache* cache;
  int64_t slot;
};

double scale_value(const TensorView& t) { return static_cast<double>(*static_cast<const float*>(t.data)); }

// A device-held fp8_e4m3 scale that is not finite and > 0 (kDeviceErrorScale).
bool bad_device_scale(const KVCache& kv) {
  if (!kv.device_scale.defined()) return false;
  const double s = scale_value(kv.device_scale);
  return !(std::isfinite(s) && s > 0.0);
}

class SparseReference {
 public:
  SparseReference(const SparseDecodeArgs& args, const SparseDecodeShape& shape, const TensorView& topk_length,
                  const TensorView& extra_topk_length)
      : args_(args), shape_(shape), topk_length_(topk_length), extra_topk_length_(extra_topk_length),
        kernels_(internal::select_page_kernels()), bad_scale_(bad_device_scale(args.kv)),
        bad_extra_scale_(shape.extra_topk > 0 && bad_device_scale(args.extra_kv)) {}

  bool bad_scales() const { return bad_scale_ || bad_extra_scale_; }

  // The request's length of one list: min(length[r], k) with a length tensor, else k; negative stays negative.
  static int64_t list_length(const TensorView& lengths, int r, int64_t k) {
    if (!lengths.defined()) return k;
    return std::min<int64_t>(static_cast<const int32_t*>(lengths.data)[r], k);
  }
  int64_t main_length(int r) const { return list_length(topk_length_, r, shape_.topk); }
  int64_t extra_length(int r) const {
    return shape_.extra_topk > 0 ? list_length(extra_topk_length_, r, shape_.extra_topk) : 0;
  }

  // Appends the slots of query token (r, i) in one list (-1 skipped). False when an index other than -1 lies
  // outside [0, num_pages * page_block_size) of its cache; `touches` is set when a slot of the cache is attended.
  static bool gather(const TensorView& indices, const KVCache& cache, int r, int i, int64_t n, std::vector<Slot>& out,
                     bool& touches) {
    const int32_t* row = static_cast<const int32_t*>(indices.data) + r * indices.strides[0] + i * indices.strides[1];
    const int64_t slots = cache.data.shape[0] * cache.data.shape[1];
    for (int64_t k = 0; k < n; ++k) {
      const int64_t s = row[k];  // last dimension contiguous (validated)
      if (s == -1) continue;
      if (s < 0 || s >= slots) return false;
      out.push_back({&cache, s});
      touches = true;
    }
    return true;
  }

  void write_token(int r, int i, const double* acc, const double* lse_of_row) const {
    const TensorView& out = args_.out;
    const TensorView& lse = args_.lse;
    for (int h = 0; h < shape_.num_heads; ++h) {
      const int64_t o = r * out.strides[0] + i * out.strides[1] + h * out.strides[2];
      for (int c = 0; c < kHeadDimV; ++c)
        store_value(out, o + c * out.strides[3], acc ? acc[h * kHeadDimV + c] : kNaN);
      store_value(lse, r * lse.strides[0] + i * lse.strides[1] + h * lse.strides[2], lse_of_row ? lse_of_row[h] : kNaN);
    }
  }
  void write_nan_request(int r) const {
    for (int i = 0; i < shape_.q_len; ++i) write_token(r, i, nullptr, nullptr);
  }

  // Query token (r, i); returns its error bits (kDeviceErrorSparseIndex, or none).
  unsigned run(int r, int i, TokenScratch& w) const {
    std::vector<Slot> slots;
    slots.reserve(static_cast<size_t>(shape_.topk + shape_.extra_topk));
    bool touches_main = false, touches_extra = false;
    bool ok = gather(args_.indices, args_.kv, r, i, main_length(r), slots, touches_main);
    if (ok && shape_.extra_topk > 0)
      ok = gather(args_.extra_indices, args_.extra_kv, r, i, extra_length(r), slots, touches_extra);
    if (!ok) {  // never dereferenced: the token's rows are NaN
      write_token(r, i, nullptr, nullptr);
      return kDeviceErrorSparseIndex;
    }
    const int h_q = shape_.num_heads;
    if ((touches_main && bad_scale_) || (touches_extra && bad_extra_scale_)) {  // NaN scores: no finite row
      write_token(r, i, nullptr, nullptr);
      return kDeviceErrorNone;  // the scale's bit is per call (sparse_decode below)
    }
    std::vector<double> lse(static_cast<size_t>(h_q));
    if (slots.empty()) {  // nothing to attend: out 0, lse -inf (the sink scales 0 to 0)
      std::fill(w.acc.begin(), w.acc.begin() + static_cast<size_t>(h_q) * kHeadDimV, 0.0);
      std::fill(lse.begin(), lse.end(), -kInf);
      write_token(r, i, w.acc.data(), lse.data());
      return kDeviceErrorNone;
    }

    // The micro-kernels take whole blocks of kRowBlock rows: padding rows have a zero query and weight 0.
    const int rows = (h_q + kRowBlock - 1) / kRowBlock * kRowBlock;
    const TensorView& q = args_.q;
    for (int h = 0; h < rows; ++h) {
      double* dst = &w.q_rows[static_cast<size_t>(h) * kHeadDimQK];
      if (h < h_q) {
        const int64_t base = r * q.strides[0] + i * q.strides[1] + h * q.strides[2];
        for (int c = 0; c < kHeadDimQK; ++c) dst[c] = load_half(q, base + c * q.strides[3]);
      } else {
        std::fill(dst, dst + kHeadDimQK, 0.0);
      }
      w.row_max[h] = -kInf;
      w.row_sum[h] = 0.0;
    }
    std::fill(w.acc.begin(), w.acc.begin() + static_cast<size_t>(rows) * kHeadDimV, 0.0);

    const double scale = args_.softmax_scale;
    for (size_t first = 0; first < slots.size(); first += kBlock) {
      const int count = static_cast<int>(std::min<size_t>(kBlock, slots.size() - first));
      std::fill(w.k_t.begin(), w.k_t.end(), 0.0);
      for (int t = 0; t < count; ++t) {
        const Slot& s = slots[first + t];
        const int64_t page_block_size = s.cache->data.shape[1];
        read_kv_token(*s.cache, s.slot / page_block_size, static_cast<int>(s.slot % page_block_size), w.token);
        for (int c = 0; c < kHeadDimQK; ++c) {
          w.kv[t * kHeadDimQK + c] = w.token[c];
          w.k_t[c * kBlock + t] = w.token[c];
        }
      }
      kernels_.scores(w.q_rows.data(), rows, w.k_t.data(), w.scores.data());
      for (int h = 0; h < rows; ++h) {
        double* s = &w.scores[static_cast<size_t>(h) * kBlock];
        if (h >= h_q) {  // padding row: no weight
          std::fill(s, s + kBlock, 0.0);
          continue;
        }
        double block_max = -kInf;
        for (int t = 0; t < count; ++t) block_max = std::max(block_max, s[t] *= scale);
        if (block_max > w.row_max[h]) {  // rescale what was accumulated under the old maximum
          const double correction = std::exp(w.row_max[h] - block_max);
          for (int c = 0; c < kHeadDimV; ++c) w.acc[h * kHeadDimV + c] *= correction;
          w.row_sum[h] *= correction;
          w.row_max[h] = block_max;
        }
        for (int t = 0; t < kBlock; ++t) {
          s[t] = t < count ? std::exp(s[t] - w.row_max[h]) : 0.0;  // s becomes the weight p
          w.row_sum[h] += s[t];
        }
      }
      kernels_.values(w.scores.data(), rows, w.kv.data(), count, w.acc.data());
    }

    const float* sink = args_.attn_sink.defined() ? static_cast<const float*>(args_.attn_sink.data) : nullptr;
    for (int h = 0; h < h_q; ++h) {
      double* values = &w.acc[static_cast<size_t>(h) * kHeadDimV];
      lse[h] = w.row_max[h] + std::log(w.row_sum[h]);
      // The sink joins the denominator only: out * exp(lse) / (exp(lse) + exp(sink)); +inf gives 0.
      const double factor = sink ? 1.0 / (1.0 + std::exp(static_cast<double>(sink[h]) - lse[h])) : 1.0;
      for (int c = 0; c < kHeadDimV; ++c) values[c] = values[c] / w.row_sum[h] * factor;
    }
    write_token(r, i, w.acc.data(), lse.data());
    return kDeviceErrorNone;
  }

 private:
  const SparseDecodeArgs& args_;
  const SparseDecodeShape& shape_;
  const TensorView& topk_length_;
  const TensorView& extra_topk_length_;
  PageKernels kernels_;
  bool bad_scale_;
  bool bad_extra_scale_;
};

}  // namespace

unsigned sparse_decode(const SparseDecodeArgs& args, const SparseDecodeShape& shape, const TensorView& topk_length,
                       const TensorView& extra_topk_length) {
  openmla::detail::validate_sparse_decode_args(args, shape, DeviceType::kCPU, 0,
                                               openmla::detail::DecodeOutputs::kReference);
  openmla::detail::validate_sparse_lengths(topk_length, extra_topk_length, shape, DeviceType::kCPU, 0);
  const SparseReference ref(args, shape, topk_length, extra_topk_length);
  // A bad device-held scale is flagged whatever the indices, as the kernels read it in every CTA.
  unsigned errors = ref.bad_scales() ? unsigned{kDeviceErrorScale} : kDeviceErrorNone;
  struct Task {
    int r, i;
  };
  std::vector<Task> tasks;
  for (int r = 0; r < shape.batch_size; ++r) {
    if (ref.main_length(r) < 0 || ref.extra_length(r) < 0) {  // the request's rows are NaN, its indices unread
      errors |= kDeviceErrorNegativeSeqlen;
      ref.write_nan_request(r);
      continue;
    }
    for (int i = 0; i < shape.q_len; ++i) tasks.push_back({r, i});
  }
  std::vector<unsigned> bits(tasks.size(), kDeviceErrorNone);
  internal::parallel_tasks<TokenScratch>(
      tasks.size(), [&](size_t k, TokenScratch& w) { bits[k] = ref.run(tasks[k].r, tasks[k].i, w); });
  for (unsigned b : bits) errors |= b;
  return errors;
}

}  // namespace openmla::reference
