// Test data for decode: fresh random inputs in a shuffled paged cache whose unused pages and the
// tail of each request's last page are filled with NaN, plus comparison against the float64 oracle.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "openmla/decode.h"
#include "openmla/write_kv.h"

namespace openmla::testing {

// Seqlens above this are "beyond the table" cases: they add no pages to max_pages (which the other
// requests and extra_table_slots decide) and get a full block-table row of real pages, so the
// seqlen guard is the only fault. Seqlens in [0, kMaxBackedSeqlen] get ceil(seqlen / 64) pages.
inline constexpr int kMaxBackedSeqlen = 1 << 20;

struct DecodeCase {
  int batch_size = 1;
  int q_len = 1;
  int num_heads = 16;
  std::vector<int> seqlens;            // size batch_size (may hold 0, odd lengths, bad values)
  KVFormat kv_format = KVFormat::kBF16;
  DType q_dtype = DType::kBFloat16;
  bool causal = true;
  float softmax_scale = 0.0f;          // 0: 576^-0.5
  int extra_pages = 3;                 // unused (NaN) pages mixed into the pool
  int extra_table_slots = 1;           // block-table columns beyond the longest request (set to an
                                       // out-of-range id, as FlashMLA's tests do)
  int page_pad_tokens = 0;             // page stride = (64 + pad) * bytes_per_token
  float kv_fp8_scale = 1.0f;           // kFP8E4M3 per-tensor scale
  int latent_log2_spread = 0;          // > 0: latent magnitudes spread (per token 2^[-s, s], per
                                       // 128-value tile 2^[-s/2, s/2], every 7th token one zero tile):
                                       // ds_mla tile scales far apart
  int q_log2_scale = 0;                // query N(0, 1) times 2^this (bf16: beyond fp16's range)
  int kv_log2_scale = 0;               // cache values (latent and rope, before quantization) times 2^this
  bool lse_flashmla_layout = false;    // lse as [b, h_q, s_q] (strided view)
  bool device_scales = false;          // kFP8E4M3: kv_fp8_scale as a device-held tensor (DecodeShape::device_scales)
  bool fp8_query = false;              // with device_scales: q as e4m3 codes of the random query, its scale
                                       // amax / 448 held as a tensor too (value = code * scale); out is bf16
  float q_fp8_scale = 0.0f;            // fp8_query: 0 = amax / 448, else this scale
  uint64_t seed = 1;
  std::string describe() const;        // "b=4 s_q=2 h_q=16 bf16 causal lens=[0,1,65]"
};

// Owns host buffers; views() gives CPU TensorViews over them.
struct DecodeData {
  DecodeCase c;
  DecodeShape shape;
  int num_pages = 0;
  int max_pages = 0;                   // block-table columns
  int64_t page_stride_bytes = 0;
  std::vector<uint16_t> q;             // bf16/fp16 bits, [b, s_q, h_q, 576]
  std::vector<uint8_t> q_fp8;          // fp8_query: e4m3 codes of q, [b, s_q, h_q, 576]
  float q_scale = 1.0f;                // fp8_query: value = code * q_scale
  float kv_scale = 1.0f;               // device_scales: the cache scale (kv_fp8_scale), viewed as a tensor
  DType out_dtype() const { return c.fp8_query ? DType::kBFloat16 : c.q_dtype; }
  std::vector<uint8_t> cache;          // num_pages * page_stride_bytes, NaN-poisoned where unused
  std::vector<int32_t> block_table;    // [b, max_pages], shuffled page ids
  std::vector<int32_t> seqlens;        // [b]
  // Views of the host buffers (data pointers into the vectors above); out/lse are left undefined.
  DecodeArgs host_args() const;
};

DecodeData make_decode_data(const DecodeCase& c);

// Re-encodes every finite ds_mla token of data's cache with raw tile scales, as a writer that does not
// round them to a power of two would: scale = amax / 448 in float (2^-13 for an all-zero tile), codes
// e4m3(x / scale) of the token's dequantized values. Returns how many scales are not powers of two.
int64_t requantize_ds_mla_raw_scales(DecodeData& data);

// Float64 oracle outputs for data: out [b, s_q, h_q, 512], lse [b, s_q, h_q] (row-major); math
// kQkAndPv: the FP8-math kernel's arithmetic (reference::decode).
struct ReferenceResult {
  std::vector<double> out;
  std::vector<double> lse;
  unsigned device_errors = 0;
};
ReferenceResult run_reference(const DecodeData& data, Fp8Math math = Fp8Math::kOff);

// Compares kernel results (out: bf16/fp16 bits row-major [b, s_q, h_q, 512]; lse: float
// row-major [b, s_q, h_q]) with the oracle. NaN/inf positions must match exactly; then, per request,
// max|out - ref| / max|ref| <= out_tol and max|lse - ref| / max(1, |ref|) <= lse_tol.
// The message names the worst element (index, value, reference) and the pass fraction.
// slack (FP8 math, whose e4m3 weights round on a grid the reference can only match up to rounding
// flips): at least `fraction` of the finite out elements within out_tol, every one within `cap`.
struct CompareResult {
  bool ok = true;
  double max_out_rel_err = 0.0;
  double max_lse_rel_err = 0.0;
  int64_t out_within = 0, out_total = 0;
  std::string message;
};
struct OutSlack {
  double fraction = 1.0;
  double cap = 0.0;
};
CompareResult compare_decode(const DecodeData& data, const ReferenceResult& ref,
                             const std::vector<uint16_t>& out_bits, const std::vector<float>& lse,
                             double out_tol = 1e-2, double lse_tol = 1e-4, OutSlack slack = {});

}  // namespace openmla::testing
