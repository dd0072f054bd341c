#include "common/sparse_data.h"

#include <cstring>
#include <random>

#include "openmla/fp8.h"

namespace openmla::testing {

int64_t SparseCache::page_stride_elems() const {
  const int64_t row = format == KVFormat::kFP8DsMla ? kDsMlaBytesPerToken : kHeadDimQK;
  return int64_t{page_block_size + page_pad_tokens} * row;
}

KVCache SparseCache::view() {
  KVCache kv;
  kv.format = format;
  const DType dtype = format == KVFormat::kBF16 ? DType::kBFloat16 : format == KVFormat::kFP16 ? DType::kFloat16
                                                                                                : DType::kUInt8;
  const int64_t row = format == KVFormat::kFP8DsMla ? kDsMlaBytesPerToken : kHeadDimQK;
  kv.data = make_tensor_strided(bytes.data(), dtype, {num_pages, page_block_size, 1, row},
                                {page_stride_elems(), row, row, 1});
  kv.scale = scale;
  if (format == KVFormat::kFP8E4M3 && device_scale) kv.device_scale = make_tensor(&scale, DType::kFloat32, {1});
  return kv;
}

SparseCache make_sparse_cache(KVFormat format, int num_pages, int page_block_size, uint64_t seed, int page_pad_tokens,
                              float e4m3_scale, bool device_scale) {
  SparseCache c;
  c.format = format;
  c.num_pages = num_pages;
  c.page_block_size = page_block_size;
  c.page_pad_tokens = page_pad_tokens;
  c.scale = e4m3_scale;
  c.device_scale = device_scale;
  const int64_t token_bytes = kv_bytes_per_token(format);
  const int64_t page_bytes = int64_t{page_block_size + page_pad_tokens} * token_bytes;
  c.bytes.assign(static_cast<size_t>(num_pages * page_bytes), 0xFF);  // padding: NaN in every format
  c.values.resize(static_cast<size_t>(c.num_slots()) * kHeadDimQK);
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  float x[kHeadDimQK];
  for (int64_t s = 0; s < c.num_slots(); ++s) {
    for (float& v : x) v = normal(rng);
    uint8_t* token = c.bytes.data() + (s / page_block_size) * page_bytes + (s % page_block_size) * token_bytes;
    float* out = &c.values[static_cast<size_t>(s) * kHeadDimQK];
    switch (format) {
      case KVFormat::kBF16:
      case KVFormat::kFP16: {
        for (int j = 0; j < kHeadDimQK; ++j) {
          const uint16_t bits = format == KVFormat::kBF16 ? fp8::float_to_bf16(x[j]) : fp8::float_to_fp16(x[j]);
          std::memcpy(token + 2 * j, &bits, 2);
          out[j] = format == KVFormat::kBF16 ? fp8::bf16_to_float(bits) : fp8::fp16_to_float(bits);
        }
        break;
      }
      case KVFormat::kFP8E4M3: {
        for (int j = 0; j < kHeadDimQK; ++j) {
          token[j] = fp8::e4m3_encode_scaled(x[j], e4m3_scale);
          out[j] = fp8::e4m3_to_float(token[j]) * e4m3_scale;
        }
        break;
      }
      case KVFormat::kFP8DsMla: {
        fp8::ds_mla_encode_token(x, x + kHeadDimV, token);
        fp8::ds_mla_decode_token(token, out);
        break;
      }
    }
  }
  return c;
}

}  // namespace openmla::testing
