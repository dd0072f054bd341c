// FP8 KV-cache accuracy study: data generation, float64 baseline, caches through the host codecs,
// error statistics. See fp8_accuracy.h and docs/fp8-accuracy.md.
#include "fp8_accuracy.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "openmla/decode.h"
#include "openmla/error.h"
#include "openmla/fp8.h"
#include "openmla/reference.h"
#include "openmla/write_kv.h"

namespace openmla::fp8_accuracy {
namespace {

// splitmix64 with Box-Muller: the same numbers on every platform and standard library
// (std::normal_distribution is implementation-defined).
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1p-53; }  // [0, 1)
  double normal() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    const double u1 = 1.0 - uniform();  // (0, 1]
    const double u2 = uniform();
    const double r = std::sqrt(-2.0 * std::log(u1));
    const double kTwoPi = 6.283185307179586;
    spare_ = r * std::sin(kTwoPi * u2);
    has_spare_ = true;
    return r * std::cos(kTwoPi * u2);
  }
  int below(int n) { return static_cast<int>(next() % static_cast<uint64_t>(n)); }

 private:
  uint64_t state_;
  double spare_ = 0.0;
  bool has_spare_ = false;
};

uint64_t mix(uint64_t a, uint64_t b) { return Rng(a * 0x100000001B3ull ^ b).next(); }

double bf16_round(double x) { return fp8::bf16_to_float(fp8::float_to_bf16(static_cast<float>(x))); }

constexpr int kPeakKeys = 4;        // keys a peaky query is aimed at (per head)
constexpr double kPeakLogit = 12.0; // their score (after the softmax scale), over noise of std ~1

int worker_threads(size_t tasks) {
  int n = static_cast<int>(std::thread::hardware_concurrency());
  if (const char* env = std::getenv("OPENMLA_REFERENCE_THREADS")) n = std::atoi(env);
  n = std::max(1, std::min(n, 64));
  return static_cast<int>(std::min<size_t>(static_cast<size_t>(n), std::max<size_t>(tasks, 1)));
}

template <typename F>
void parallel_for(size_t tasks, F&& f) {
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t k = next++; k < tasks; k = next++) f(k);
  };
  std::vector<std::thread> pool;
  const int threads = worker_threads(tasks);
  for (int t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();
}

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// A paged cache holding bf16(data.kv), request r in pages [r * ppr, (r + 1) * ppr).
struct Cache {
  std::vector<uint8_t> bytes;
  KVCache view;
  int pages_per_request = 0;
};

Cache build_cache(const StudyData& data, KVFormat format, float e4m3_scale) {
  const int b = data.c.batch, s_k = data.c.seqlen;
  Cache cache;
  cache.pages_per_request = (s_k + kPageSize - 1) / kPageSize;
  const int64_t num_pages = static_cast<int64_t>(b) * cache.pages_per_request;
  const int64_t width = format == KVFormat::kFP8DsMla ? kDsMlaBytesPerToken : kHeadDimQK;
  const DType dtype = format == KVFormat::kBF16 ? DType::kBFloat16
                      : format == KVFormat::kFP16 ? DType::kFloat16 : DType::kUInt8;
  cache.bytes.assign(static_cast<size_t>(num_pages * kPageSize * kv_bytes_per_token(format)), 0);
  cache.view.format = format;
  cache.view.data = make_tensor(cache.bytes.data(), dtype, {num_pages, kPageSize, width});

  // write_kv input: float32 holding the bf16-rounded values (exact), as a model's bf16 output.
  const int64_t n = static_cast<int64_t>(b) * s_k;
  std::vector<float> latent(static_cast<size_t>(n) * kHeadDimV), rope(static_cast<size_t>(n) * kRopeDim);
  std::vector<int64_t> slots(static_cast<size_t>(n));
  float amax = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    const double* row = &data.kv[static_cast<size_t>(i) * kHeadDimQK];
    for (int c = 0; c < kHeadDimQK; ++c) {
      const float v = static_cast<float>(bf16_round(row[c]));
      amax = std::max(amax, std::fabs(v));
      if (c < kHeadDimV) latent[static_cast<size_t>(i) * kHeadDimV + c] = v;
      else rope[static_cast<size_t>(i) * kRopeDim + (c - kHeadDimV)] = v;
    }
    const int64_t r = i / s_k, t = i % s_k;
    slots[static_cast<size_t>(i)] = r * cache.pages_per_request * kPageSize + t;
  }
  if (format == KVFormat::kFP8E4M3) cache.view.scale = e4m3_scale > 0.0f ? e4m3_scale : amax / fp8::kE4M3Max;

  WriteKVArgs w;
  w.kv_latent = make_tensor(latent.data(), DType::kFloat32, {n, kHeadDimV});
  w.k_rope = make_tensor(rope.data(), DType::kFloat32, {n, kRopeDim});
  w.slots = make_tensor(slots.data(), DType::kInt64, {n});
  w.cache = cache.view;
  if (reference::write_kv(w) != kDeviceErrorNone) throw Error(Status::kInternal, "fp8_accuracy: write_kv flagged a slot");
  return cache;
}

AttentionResult decode_cache(const StudyData& data, const Cache& cache) {
  const int b = data.c.batch, h = data.c.num_heads;
  std::vector<uint16_t> q_bits(data.q.size());
  for (size_t i = 0; i < data.q.size(); ++i) q_bits[i] = fp8::float_to_bf16(static_cast<float>(data.q[i]));
  std::vector<int32_t> table(static_cast<size_t>(b) * cache.pages_per_request);
  for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<int32_t>(i);
  std::vector<int32_t> seqlens(static_cast<size_t>(b), data.c.seqlen);
  AttentionResult res;
  res.out.assign(static_cast<size_t>(b) * h * kHeadDimV, 0.0);
  res.lse.assign(static_cast<size_t>(b) * h, 0.0);

  DecodeShape shape;
  shape.batch_size = b;
  shape.q_len = 1;
  shape.num_heads = h;
  shape.q_dtype = DType::kBFloat16;
  shape.kv_format = cache.view.format;
  DecodeArgs a;
  a.q = make_tensor(q_bits.data(), DType::kBFloat16, {b, 1, h, kHeadDimQK});
  a.kv = cache.view;
  a.block_table = make_tensor(table.data(), DType::kInt32, {b, cache.pages_per_request});
  a.cache_seqlens = make_tensor(seqlens.data(), DType::kInt32, {b});
  a.softmax_scale = static_cast<float>(data.softmax_scale);
  a.out = make_tensor(res.out.data(), DType::kFloat64, {b, 1, h, kHeadDimV});
  a.lse = make_tensor(res.lse.data(), DType::kFloat64, {b, 1, h});
  if (reference::decode(a, shape) != kDeviceErrorNone) throw Error(Status::kInternal, "fp8_accuracy: decode flagged a request");
  return res;
}

// Against the bf16 rounding of the data, or (original) against the unrounded data.
ChannelError cache_channel_error(const StudyData& data, const Cache& cache, bool original = false) {
  const int b = data.c.batch, s_k = data.c.seqlen;
  std::vector<double> num(kHeadDimV, 0.0), den(kHeadDimV, 0.0);
  float token[kHeadDimQK];
  for (int r = 0; r < b; ++r)
    for (int t = 0; t < s_k; ++t) {
      reference::read_kv_token(cache.view, static_cast<int64_t>(r) * cache.pages_per_request + t / kPageSize,
                               t % kPageSize, token);
      const double* row = &data.kv[(static_cast<size_t>(r) * s_k + t) * kHeadDimQK];
      for (int c = 0; c < kHeadDimV; ++c) {
        const double x = original ? row[c] : bf16_round(row[c]), d = token[c] - x;
        num[c] += d * d;
        den[c] += x * x;
      }
    }
  std::vector<double> rel(kHeadDimV);
  for (int c = 0; c < kHeadDimV; ++c) rel[c] = den[c] > 0.0 ? std::sqrt(num[c] / den[c]) : 0.0;
  return {median(rel), *std::max_element(rel.begin(), rel.end())};
}

}  // namespace

const char* distribution_name(Distribution d) noexcept {
  switch (d) {
    case Distribution::kGaussian: return "gaussian";
    case Distribution::kChannelOutliers: return "channel-outliers";
    case Distribution::kTokenOutliers: return "token-outliers";
    case Distribution::kMassiveChannels: return "massive-channels";
  }
  return "?";
}

const char* query_name(QueryKind q) noexcept { return q == QueryKind::kFlat ? "flat" : "peaky"; }

StudyData make_study_data(const StudyCase& c) {
  if (c.batch < 1 || c.seqlen < 1 || c.num_heads < 8 || c.num_heads % 8 != 0)
    throw Error(Status::kInvalidArgument, "fp8_accuracy: batch >= 1, seqlen >= 1, num_heads a multiple of 8");
  StudyData data;
  data.c = c;
  // Rounded to float: decode takes a float scale, and the float64 baseline must use the same one.
  data.softmax_scale = static_cast<float>(c.softmax_scale > 0.0 ? c.softmax_scale : 1.0 / std::sqrt(576.0));
  const int b = c.batch, s_k = c.seqlen, h = c.num_heads;

  // Per-channel scales (a property of the layer: shared by every token and request).
  std::vector<double> channel_scale(kHeadDimQK, 1.0);
  if (c.dist == Distribution::kChannelOutliers || c.dist == Distribution::kMassiveChannels) {
    Rng rng(mix(c.seed, 0xC4A77E15ull));
    for (int j = 0; j < kHeadDimV; ++j) channel_scale[j] = std::exp(rng.normal());  // log-normal, sigma 1
    // Outlier channels: their scale relative to the median channel (1), not times the log-normal.
    if (c.dist == Distribution::kChannelOutliers) {
      for (int k = 0; k < kHeadDimV / 100; ++k)  // 1% (5 channels): 10-30x
        channel_scale[rng.below(kHeadDimV)] = 10.0 + 20.0 * rng.uniform();
    } else {
      for (int k = 0; k < 2; ++k) channel_scale[rng.below(kHeadDimV)] = 1000.0;  // 2 channels: 1000x
    }
    for (int j = kHeadDimV; j < kHeadDimQK; ++j) channel_scale[j] = 4.0 * std::exp(0.5 * rng.normal());  // rope: 4x
  }
  Rng rng(mix(mix(c.seed, static_cast<uint64_t>(c.dist)), static_cast<uint64_t>(s_k) * 1000 + b));
  data.kv.resize(static_cast<size_t>(b) * s_k * kHeadDimQK);
  for (int64_t i = 0; i < static_cast<int64_t>(b) * s_k; ++i) {
    double token_scale = 1.0;
    if (c.dist == Distribution::kTokenOutliers) {
      token_scale = std::exp(0.5 * rng.normal());
      if (rng.uniform() < 0.01) token_scale *= 10.0;
    }
    double* row = &data.kv[static_cast<size_t>(i) * kHeadDimQK];
    for (int j = 0; j < kHeadDimQK; ++j) row[j] = token_scale * channel_scale[j] * rng.normal();
  }

  Rng qrng(mix(mix(c.seed, 0x9E7Aull + static_cast<uint64_t>(c.query)), static_cast<uint64_t>(h)));
  data.q.resize(static_cast<size_t>(b) * h * kHeadDimQK);
  // Query noise: iid N(0, sigma^2) with sigma such that a token of unit magnitude (token_scale 1)
  // scores with std 1: softmax_scale * sigma * sqrt(sum of channel variances) = 1. sigma = 1 (q iid
  // N(0, 1), the benchmark's) for the gaussian and token-outlier data.
  double channel_var = 0.0;
  for (int j = 0; j < kHeadDimQK; ++j) channel_var += channel_scale[j] * channel_scale[j];
  const double sigma = c.dist == Distribution::kChannelOutliers || c.dist == Distribution::kMassiveChannels
                           ? 1.0 / (data.softmax_scale * std::sqrt(channel_var)) : 1.0;
  for (int r = 0; r < b; ++r) {
    const double* kv = &data.kv[static_cast<size_t>(r) * s_k * kHeadDimQK];
    for (int hh = 0; hh < h; ++hh) {
      double* q = &data.q[(static_cast<size_t>(r) * h + hh) * kHeadDimQK];
      for (int j = 0; j < kHeadDimQK; ++j) q[j] = sigma * qrng.normal();
      if (c.query == QueryKind::kPeaky) {
        // q = noise + (beta / scale) * sum_i D^-2 k_i / |D^-1 k_i|^2 (D = the channel scales): each
        // aimed-at key scores ~beta. Whitened so that q does not lean on the outlier channels (which
        // would give every other key a score of order beta too).
        for (int k = 0; k < kPeakKeys; ++k) {
          const double* key = kv + static_cast<size_t>(qrng.below(s_k)) * kHeadDimQK;
          double sq = 0.0;
          for (int j = 0; j < kHeadDimQK; ++j) sq += key[j] * key[j] / (channel_scale[j] * channel_scale[j]);
          const double w = kPeakLogit / (data.softmax_scale * sq);
          for (int j = 0; j < kHeadDimQK; ++j) q[j] += w * key[j] / (channel_scale[j] * channel_scale[j]);
        }
      }
      for (int j = 0; j < kHeadDimQK; ++j) q[j] = bf16_round(q[j]);
    }
  }
  return data;
}

std::vector<double> round_to_bf16(const std::vector<double>& kv) {
  std::vector<double> out(kv.size());
  for (size_t i = 0; i < kv.size(); ++i) out[i] = bf16_round(kv[i]);
  return out;
}

AttentionResult attention_f64(const StudyData& data, const std::vector<double>& kv) {
  return attention_emulated(data, kv, MathOptions{});
}

static double e4m3_round_scaled(double x, double scale) {
  return static_cast<double>(fp8::e4m3_to_float(fp8::e4m3_encode_scaled(static_cast<float>(x), static_cast<float>(scale)))) *
         scale;
}

std::vector<double> round_to_e4m3(const std::vector<double>& kv, float* used_scale) {
  double amax = 0.0;
  for (double x : kv) amax = std::max(amax, std::fabs(bf16_round(x)));
  const float scale = amax > 0.0 ? static_cast<float>(amax / 448.0) : 1.0f;
  if (used_scale) *used_scale = scale;
  std::vector<double> out(kv.size());
  for (size_t i = 0; i < kv.size(); ++i) out[i] = e4m3_round_scaled(bf16_round(kv[i]), scale);
  return out;
}

AttentionResult attention_emulated(const StudyData& data, const std::vector<double>& kv, const MathOptions& math) {
  constexpr int kHeads = 8;  // heads per task (num_heads is a multiple of 8)
  const int b = data.c.batch, s_k = data.c.seqlen, h = data.c.num_heads;
  const double scale = data.softmax_scale;
  AttentionResult res;
  res.out.assign(static_cast<size_t>(b) * h * kHeadDimV, 0.0);
  res.lse.assign(static_cast<size_t>(b) * h, 0.0);
  std::vector<double> eff(static_cast<size_t>(b) * h, 0.0);
  const int blocks = h / kHeads;
  parallel_for(static_cast<size_t>(b) * blocks, [&](size_t task) {
    const int r = static_cast<int>(task) / blocks, h0 = static_cast<int>(task) % blocks * kHeads;
    const double* keys = &kv[static_cast<size_t>(r) * s_k * kHeadDimQK];
    std::vector<double> q_t(static_cast<size_t>(kHeadDimQK) * kHeads);  // [576][8]
    for (int k = 0; k < kHeads; ++k) {
      const double* q_row = &data.q[(static_cast<size_t>(r) * h + h0 + k) * kHeadDimQK];
      // FP8 QK: the query row quantized to e4m3 as the FP8-math kernel does it: scale 2^e, the
      // smallest power of two with amax <= 448 * 2^e (fp8::fp8_math_query_exponent).
      double q_scale = 0.0;
      if (math.q_e4m3) {
        float amax = 0.0f;
        for (int j = 0; j < kHeadDimQK; ++j) amax = std::max(amax, static_cast<float>(std::fabs(q_row[j])));
        q_scale = amax > 0.0f ? std::ldexp(1.0, fp8::fp8_math_query_exponent(amax)) : 0.0;
      }
      for (int j = 0; j < kHeadDimQK; ++j)
        q_t[static_cast<size_t>(j) * kHeads + k] =
            q_scale > 0.0 ? e4m3_round_scaled(q_row[j], q_scale) : q_row[j];
    }
    std::vector<double> p(static_cast<size_t>(s_k) * kHeads);  // scores, then weights: [s_k][8]
    double mx[kHeads];
    std::fill(mx, mx + kHeads, -INFINITY);
    for (int t = 0; t < s_k; ++t) {
      double acc[kHeads] = {};
      const double* key = keys + static_cast<size_t>(t) * kHeadDimQK;
      for (int j = 0; j < kHeadDimQK; ++j)
        for (int k = 0; k < kHeads; ++k) acc[k] += q_t[static_cast<size_t>(j) * kHeads + k] * key[j];
      for (int k = 0; k < kHeads; ++k) {
        p[static_cast<size_t>(t) * kHeads + k] = acc[k] * scale;
        mx[k] = std::max(mx[k], acc[k] * scale);
      }
    }
    double sum[kHeads] = {}, weighted[kHeads] = {};  // weighted: sum of p * (s - max), for the entropy
    for (int t = 0; t < s_k; ++t)
      for (int k = 0; k < kHeads; ++k) {
        double& v = p[static_cast<size_t>(t) * kHeads + k];
        const double centered = v - mx[k];
        v = std::exp(centered);
        sum[k] += v;
        weighted[k] += v * centered;
      }
    // The FP8-math kernel's P: 256 * 2^(x - base) in e4m3 with base = ceil(row max) in log2 units,
    // i.e. relative to exp(s - max) a factor f = 2^(max log2 e - base) in (1/2, 1].
    constexpr double kLog2e = 1.4426950408889634;
    double p_factor[kHeads];
    for (int k = 0; k < kHeads; ++k) p_factor[k] = std::exp2(mx[k] * kLog2e - std::ceil(mx[k] * kLog2e));
    std::vector<double> out(static_cast<size_t>(kHeads) * kHeadDimV, 0.0);
    for (int t = 0; t < s_k; ++t) {
      const double* value = keys + static_cast<size_t>(t) * kHeadDimQK;
      for (int k = 0; k < kHeads; ++k) {
        // P as the PV product sees it (the row sum above stays in full precision, as in a kernel):
        // exact, bf16 (the kernels' P), or e4m3 as the FP8-math kernel stores it (above).
        double w = p[static_cast<size_t>(t) * kHeads + k];
        if (math.p == PFormat::kBf16) w = bf16_round(w);
        if (math.p == PFormat::kE4m3) w = e4m3_round_scaled(w * p_factor[k], 1.0 / 256.0) / p_factor[k];
        double* o = &out[static_cast<size_t>(k) * kHeadDimV];
        for (int c = 0; c < kHeadDimV; ++c) o[c] += w * value[c];
      }
    }
    for (int k = 0; k < kHeads; ++k) {
      const size_t row = static_cast<size_t>(r) * h + h0 + k;
      for (int c = 0; c < kHeadDimV; ++c) res.out[row * kHeadDimV + c] = out[static_cast<size_t>(k) * kHeadDimV + c] / sum[k];
      res.lse[row] = mx[k] + std::log(sum[k]);
      eff[row] = std::exp(std::log(sum[k]) - weighted[k] / sum[k]);  // exp(entropy)
    }
  });
  res.median_effective_tokens = median(eff);
  return res;
}

AttentionResult reference_on_cache(const StudyData& data, KVFormat format, float e4m3_scale, float* used_scale) {
  const Cache cache = build_cache(data, format, e4m3_scale);
  if (used_scale) *used_scale = cache.view.scale;
  return decode_cache(data, cache);
}

ChannelError channel_error(const StudyData& data, KVFormat format, float e4m3_scale) {
  return cache_channel_error(data, build_cache(data, format, e4m3_scale));
}

ErrorStats compare(const AttentionResult& got, const AttentionResult& ref) {
  if (got.out.size() != ref.out.size() || got.lse.size() != ref.lse.size() || ref.out.size() != ref.lse.size() * kHeadDimV)
    throw Error(Status::kInvalidArgument, "fp8_accuracy: compare of results of different shapes");
  ErrorStats s;
  std::vector<double> rel_l2(ref.lse.size());
  std::vector<double> chan_d2(kHeadDimV, 0.0), chan_r2(kHeadDimV, 0.0);
  for (size_t row = 0; row < ref.lse.size(); ++row) {
    double d2 = 0.0, r2 = 0.0, dmax = 0.0, rmax = 0.0;
    for (int c = 0; c < kHeadDimV; ++c) {
      const double o = got.out[row * kHeadDimV + c], o_ref = ref.out[row * kHeadDimV + c];
      d2 += (o - o_ref) * (o - o_ref);
      r2 += o_ref * o_ref;
      chan_d2[c] += (o - o_ref) * (o - o_ref);
      chan_r2[c] += o_ref * o_ref;
      dmax = std::max(dmax, std::fabs(o - o_ref));
      rmax = std::max(rmax, std::fabs(o_ref));
    }
    rel_l2[row] = std::sqrt(d2 / r2);  // NaN (0 / 0) only for an all-zero reference row: max() keeps it visible
    s.max_rel_l2 = std::max(s.max_rel_l2, rel_l2[row]);
    s.max_rel_abs = std::max(s.max_rel_abs, dmax / rmax);
    s.max_lse_abs = std::max(s.max_lse_abs, std::fabs(got.lse[row] - ref.lse[row]));
  }
  s.median_rel_l2 = median(rel_l2);
  for (int c = 0; c < kHeadDimV; ++c) s.max_channel_rel = std::max(s.max_channel_rel, std::sqrt(chan_d2[c] / chan_r2[c]));
  return s;
}

CaseResult run_case(const StudyCase& c, bool with_unit_scale_e4m3) {
  const StudyData data = make_study_data(c);
  CaseResult res;
  res.c = c;
  const AttentionResult truth = attention_f64(data, data.kv);
  res.effective_tokens = truth.median_effective_tokens;

  const Cache bf16_cache = build_cache(data, KVFormat::kBF16, 0.0f);
  const AttentionResult bf16 = decode_cache(data, bf16_cache);
  res.rows.push_back({"bf16", "f64 original", compare(bf16, truth), cache_channel_error(data, bf16_cache, true)});

  struct Variant {
    const char* name;
    KVFormat format;
    float scale;
  };
  std::vector<Variant> variants = {{"fp8_e4m3", KVFormat::kFP8E4M3, 0.0f}, {"fp8_ds_mla", KVFormat::kFP8DsMla, 0.0f}};
  if (with_unit_scale_e4m3) variants.push_back({"fp8_e4m3 (scale 1)", KVFormat::kFP8E4M3, 1.0f});
  for (const Variant& v : variants) {
    const Cache cache = build_cache(data, v.format, v.scale);
    if (v.format == KVFormat::kFP8E4M3 && v.scale == 0.0f) res.e4m3_scale = cache.view.scale;
    res.rows.push_back({v.name, "bf16 cache", compare(decode_cache(data, cache), bf16), cache_channel_error(data, cache)});
  }
  return res;
}

}  // namespace openmla::fp8_accuracy
