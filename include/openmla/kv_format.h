// KV-cache formats and the paged-cache view. Byte layouts: docs/kv-formats.md.
#pragma once

#include <cstdint>

#include "openmla/tensor.h"

namespace openmla {

inline constexpr int kPageSize = 64;     // tokens per page
inline constexpr int kHeadDimQK = 576;   // 512 latent + 64 rope
inline constexpr int kHeadDimV = 512;    // latent (V is the first 512 values of each KV row)
inline constexpr int kRopeDim = 64;
inline constexpr int kMaxQueryLen = 128;     // query tokens per request (uniform s_q, or a ragged request's)
inline constexpr int kMaxTreeQueryLen = 64;  // with a tree mask: one 64-bit mask word per query token
inline constexpr int kDsMlaTile = 128;   // latent values per ds_mla scale

enum class KVFormat : uint8_t {
  kBF16 = 0,      // 576 bf16 per token                                  (1152 B)
  kFP16 = 1,      // 576 fp16 per token                                  (1152 B)
  kFP8E4M3 = 2,   // 576 e4m3 per token, one per-tensor float scale      (576 B)
  kFP8DsMla = 3,  // 512 e4m3 | 4 x float32 tile scale | 64 bf16 rope    (656 B)
};

const char* kv_format_name(KVFormat f) noexcept;  // "bf16", "fp16", "fp8_e4m3", "fp8_ds_mla"
bool parse_kv_format(const char* name, KVFormat* out) noexcept;

constexpr int kv_bytes_per_token(KVFormat f) noexcept {
  return f == KVFormat::kFP8E4M3 ? 576 : f == KVFormat::kFP8DsMla ? 656 : 1152;
}

// bf16 / fp16 caches (read in the query's type); the others are FP8 layouts.
constexpr bool kv_format_is_16bit(KVFormat f) noexcept { return f == KVFormat::kBF16 || f == KVFormat::kFP16; }

// ds_mla token: byte offsets inside one 656-byte token.
inline constexpr int kDsMlaLatentOffset = 0;    // 512 x e4m3
inline constexpr int kDsMlaScalesOffset = 512;  // 4 x float32 (tile scale: value = e4m3 * scale)
inline constexpr int kDsMlaRopeOffset = 528;    // 64 x bf16
inline constexpr int kDsMlaBytesPerToken = 656;

// A paged KV cache. data is [num_pages, 64, 1, W] or [num_pages, 64, W] where W is the per-token
// row in elements of data.dtype:
//   kBF16 / kFP16: dtype bf16 / fp16, W = 576
//   kFP8E4M3:     dtype e4m3 or uint8, W = 576
//   kFP8DsMla:    dtype uint8 (or e4m3), W = 656 bytes
// Inside a page, tokens are dense (token stride = W, last stride 1); the page stride (strides[0])
// is the caller's (e.g. FlashMLA's padded test caches), must be >= 64 * W and a multiple of 16 bytes.
struct KVCache {
  TensorView data;
  KVFormat format = KVFormat::kBF16;  // decode: must be the plan's DecodeShape::kv_format (checked)
  float scale = 1.0f;  // kFP8E4M3 only: value = float(e4m3) * scale. Ignored otherwise.
  // kFP8E4M3 only, optional: the scale held on the device, a float32 tensor of one element on the cache's
  // device (an engine's per-layer k_scale / descale_k). Read by the kernels, so a CUDA graph captures the
  // tensor and each replay sees its current value; `scale` is then ignored. Decode plans for it with
  // DecodeShape::device_scales. A value that is not finite and > 0 is flagged on the device
  // (kDeviceErrorScale) and its outputs are NaN.
  TensorView device_scale;
};

}  // namespace openmla
