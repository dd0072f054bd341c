// FP8 KV-cache accuracy study (docs/fp8-accuracy.md): how far decode over an fp8_e4m3 or fp8_ds_mla
// cache lands from decode over the bf16 cache it was quantized from, on synthetic latent
// distributions shaped like real MLA compressed-KV activations, plus what bf16 storage itself costs
// against float64 attention on the unrounded data.
//
// Everything is CPU: caches are written by reference::write_kv (the library's host codecs, which the
// GPU writer matches bit for bit) and attended by reference::decode (float64). The float64 baseline
// on the unrounded data is computed here (attention_f64), since no cache format holds it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "openmla/kv_format.h"

namespace openmla::fp8_accuracy {

enum class Distribution {
  kGaussian,         // iid N(0, 1): openmla-bench's data
  kChannelOutliers,  // per-channel log-normal scales, 1% outlier channels, larger rope dims
  kTokenOutliers,    // per-token log-normal magnitudes, 1% of tokens 10x
  kMassiveChannels,  // stress case: kChannelOutliers with 2 channels at 1000x instead of 5 at 10-30x
};
enum class QueryKind {
  kFlat,   // q iid N(0, sigma^2), sigma such that a unit-magnitude token's logit has std 1 (1 for the
           // gaussian and token-outlier data: q iid N(0, 1))
  kPeaky,  // q aimed at a few keys per head: softmax mass concentrated on them
};

// "gaussian", "channel-outliers", "token-outliers", "massive-channels"
const char* distribution_name(Distribution d) noexcept;
const char* query_name(QueryKind q) noexcept;            // "flat", "peaky"

struct StudyCase {
  Distribution dist = Distribution::kGaussian;
  QueryKind query = QueryKind::kFlat;
  int num_heads = 16;    // h_q
  int seqlen = 1024;     // s_k (every request the same length); s_q = 1
  int batch = 2;         // requests (independent data)
  double softmax_scale = 0.0;  // 0: 576^-0.5
  uint64_t seed = 1;     // the KV data depends on (dist, seqlen, batch, seed) only, not on the query
};

// One case's inputs, all in float64. kv: the original (unrounded) values, [b][s_k][576];
// q: [b][h_q][576], already bf16-representable (decode takes a bf16 query).
struct StudyData {
  StudyCase c;
  double softmax_scale = 0.0;
  std::vector<double> kv;
  std::vector<double> q;
};
StudyData make_study_data(const StudyCase& c);

// Rows are (request, head), row-major: out [rows][512], lse [rows] (natural log).
struct AttentionResult {
  std::vector<double> out;
  std::vector<double> lse;
  double median_effective_tokens = 0.0;  // exp(entropy of the softmax), median over rows (attention_f64 only)
};

// Float64 softmax attention of data.q over the given KV rows ([b][s_k][576], e.g. data.kv or its bf16
// rounding), computed here without any cache.
AttentionResult attention_f64(const StudyData& data, const std::vector<double>& kv);

// FP8-math emulation (DecodeOptions::fp8_math): which operands of the two products are rounded
// before an exact (float64) product. q_e4m3: each query row quantized to e4m3 with its own scale
// amax / 448 (Q K^T on e4m3 operands; the cache side is the e4m3 cache itself). p: the format of
// P = exp(S - max) <= 1 as the P V product sees it; the row sum l stays exact.
enum class PFormat { kExact, kBf16, kE4m3 };
struct MathOptions {
  bool q_e4m3 = false;
  PFormat p = PFormat::kExact;
};
AttentionResult attention_emulated(const StudyData& data, const std::vector<double>& kv, const MathOptions& math);

// The KV rows as a per-tensor fp8_e4m3 cache stores them: bf16, then e4m3 with scale amax / 448 of
// the bf16 values (returned through used_scale), decoded back to float64.
std::vector<double> round_to_e4m3(const std::vector<double>& kv, float* used_scale = nullptr);

// The KV rows rounded to bf16 (RNE), as float64.
std::vector<double> round_to_bf16(const std::vector<double>& kv);

// Writes bf16(kv) into a paged cache of `format` with reference::write_kv and runs reference::decode
// over it. For kFP8E4M3, e4m3_scale is the per-tensor scale (<= 0: amax / 448 over the bf16 values
// of the whole cache); the scale used is returned through used_scale.
AttentionResult reference_on_cache(const StudyData& data, KVFormat format, float e4m3_scale = 0.0f,
                                   float* used_scale = nullptr);

// Per-row errors of `got` against `ref`, summarized.
struct ErrorStats {
  double max_rel_l2 = 0.0;     // max over rows of ||o - o_ref|| / ||o_ref||
  double median_rel_l2 = 0.0;  // median over rows of the same
  double max_rel_abs = 0.0;    // max over rows of max_c |o - o_ref| / max_c |o_ref|
  double max_lse_abs = 0.0;    // max over rows of |lse - lse_ref|
  double max_channel_rel = 0.0;  // max over the 512 output channels c of ||o_c - o_ref_c|| / ||o_ref_c||
                                 // (norms over rows): what small channels lose, which rel-L2 hides
};
ErrorStats compare(const AttentionResult& got, const AttentionResult& ref);

// Storage error of a layout on the KV values: per latent channel, ||x_q - x|| / ||x|| over all
// tokens (x = bf16 data, x_q = what the cache decodes to); median and max over the 512 channels.
struct ChannelError {
  double median = 0.0;
  double max = 0.0;
};
ChannelError channel_error(const StudyData& data, KVFormat format, float e4m3_scale = 0.0f);

struct LayoutRow {
  std::string layout;     // "bf16", "fp8_e4m3", "fp8_e4m3 (scale 1)", "fp8_ds_mla"
  std::string reference;  // what it is compared with: "f64 original" or "bf16 cache"
  ErrorStats err;
  ChannelError kv_err;    // channel_error; for the bf16 row, against the unrounded data
};
struct CaseResult {
  StudyCase c;
  double effective_tokens = 0.0;  // median over rows, from the float64 baseline
  float e4m3_scale = 0.0f;        // amax / 448 of the case's bf16 data (448 * it = the data's amax)
  std::vector<LayoutRow> rows;    // bf16 vs f64 original; then each FP8 layout vs the bf16 cache
};

// Runs a case: the float64 baseline on the original data, then bf16, fp8_e4m3 (scale amax/448),
// fp8_ds_mla and, when with_unit_scale_e4m3, fp8_e4m3 with scale 1.0 (SGLang's default k_scale).
CaseResult run_case(const StudyCase& c, bool with_unit_scale_e4m3 = true);

}  // namespace openmla::fp8_accuracy
