// reference::write_kv: every format and input dtype round-trips through read_kv_token with the
// format's codec, skipped and flagged slots leave the cache untouched.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "openmla/error.h"
#include "openmla/fp8.h"
#include "openmla/kv_format.h"
#include "openmla/reference.h"

namespace openmla {
namespace {

constexpr int kNumPages = 3;

struct CacheBuffer {
  KVFormat format;
  int pad_tokens;
  std::vector<uint8_t> bytes;
  int64_t page_stride_bytes;

  CacheBuffer(KVFormat f, int pad) : format(f), pad_tokens(pad) {
    page_stride_bytes = static_cast<int64_t>(kPageSize + pad) * kv_bytes_per_token(f);
    bytes.assign(static_cast<size_t>(kNumPages * page_stride_bytes), 0xFF);
  }
  KVCache view(float scale, bool three_dims) {
    const DType dtype = format == KVFormat::kBF16   ? DType::kBFloat16
                        : format == KVFormat::kFP16 ? DType::kFloat16
                        : format == KVFormat::kFP8E4M3 ? DType::kFloat8E4M3 : DType::kUInt8;
    const int64_t w = format == KVFormat::kFP8DsMla ? kDsMlaBytesPerToken : kHeadDimQK;
    const int64_t page_stride = page_stride_bytes / dtype_size(dtype);
    KVCache kv;
    kv.format = format;
    kv.scale = scale;
    kv.data = three_dims ? make_tensor_strided(bytes.data(), dtype, {kNumPages, kPageSize, w}, {page_stride, w, 1})
                         : make_tensor_strided(bytes.data(), dtype, {kNumPages, kPageSize, 1, w},
                                               {page_stride, w, w, 1});
    return kv;
  }
  const uint8_t* token(int64_t slot) const {
    return bytes.data() + (slot / kPageSize) * page_stride_bytes + (slot % kPageSize) * kv_bytes_per_token(format);
  }
};

// The value decode must see for input x (already exact in the input dtype) at index j of a token.
void expected_token(KVFormat f, float scale, const float* x576, float* out576) {
  switch (f) {
    case KVFormat::kBF16:
      for (int j = 0; j < kHeadDimQK; ++j) out576[j] = fp8::bf16_to_float(fp8::float_to_bf16(x576[j]));
      break;
    case KVFormat::kFP16:
      for (int j = 0; j < kHeadDimQK; ++j) out576[j] = fp8::fp16_to_float(fp8::float_to_fp16(x576[j]));
      break;
    case KVFormat::kFP8E4M3:
      for (int j = 0; j < kHeadDimQK; ++j) out576[j] = fp8::e4m3_to_float(fp8::e4m3_encode_scaled(x576[j], scale)) * scale;
      break;
    case KVFormat::kFP8DsMla: {
      uint8_t token[kDsMlaBytesPerToken];
      fp8::ds_mla_encode_token(x576, x576 + kHeadDimV, token);
      fp8::ds_mla_decode_token(token, out576);
      break;
    }
  }
}

struct WriteCase {
  KVFormat format;
  DType input;
  DType slot_dtype;
  int pad_tokens;
  bool three_dims;
};

class WriteKVRoundTrip : public ::testing::TestWithParam<WriteCase> {};

TEST_P(WriteKVRoundTrip, EveryTokenReadsBackWithTheFormatCodec) {
  const WriteCase wc = GetParam();
  const float scale = wc.format == KVFormat::kFP8E4M3 ? 0.0625f : 1.0f;
  CacheBuffer cache(wc.format, wc.pad_tokens);
  // Slots: valid ones across pages (first, last offset of a page, middle), a padding slot (-1),
  // one beyond the cache (flagged), and a large negative one (skipped, not flagged).
  const std::vector<int64_t> slots = {0, 63, 64, 130, -1, kNumPages * kPageSize, 191, -1000000, 5};
  const int64_t n = static_cast<int64_t>(slots.size());
  std::mt19937_64 rng(17 + static_cast<int>(wc.format));
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> values(n * kHeadDimQK);  // exact in the input dtype
  for (float& v : values) {
    v = normal(rng);
    if (wc.input == DType::kBFloat16) v = fp8::bf16_to_float(fp8::float_to_bf16(v));
    if (wc.input == DType::kFloat16) v = fp8::fp16_to_float(fp8::float_to_fp16(v));
  }
  std::vector<float> latent_f(n * kHeadDimV), rope_f(n * kRopeDim);
  std::vector<uint16_t> latent_h(n * kHeadDimV), rope_h(n * kRopeDim);
  for (int64_t i = 0; i < n; ++i) {
    for (int j = 0; j < kHeadDimQK; ++j) {
      const float v = values[i * kHeadDimQK + j];
      const uint16_t h = wc.input == DType::kBFloat16 ? fp8::float_to_bf16(v) : fp8::float_to_fp16(v);
      if (j < kHeadDimV) {
        latent_f[i * kHeadDimV + j] = v;
        latent_h[i * kHeadDimV + j] = h;
      } else {
        rope_f[i * kRopeDim + j - kHeadDimV] = v;
        rope_h[i * kRopeDim + j - kHeadDimV] = h;
      }
    }
  }
  std::vector<int32_t> slots32(slots.begin(), slots.end());
  WriteKVArgs args;
  const bool is_f32 = wc.input == DType::kFloat32;
  args.kv_latent = make_tensor(is_f32 ? static_cast<void*>(latent_f.data()) : latent_h.data(), wc.input, {n, kHeadDimV});
  args.k_rope = make_tensor(is_f32 ? static_cast<void*>(rope_f.data()) : rope_h.data(), wc.input, {n, kRopeDim});
  args.slots = wc.slot_dtype == DType::kInt32 ? make_tensor(slots32.data(), DType::kInt32, {n})
                                              : make_tensor(const_cast<int64_t*>(slots.data()), DType::kInt64, {n});
  args.cache = cache.view(scale, wc.three_dims);

  EXPECT_EQ(reference::write_kv(args), unsigned{kDeviceErrorSlotOutOfRange});

  std::vector<bool> written(kNumPages * kPageSize, false);
  float got[kHeadDimQK], want[kHeadDimQK];
  for (int64_t i = 0; i < n; ++i) {
    const int64_t slot = slots[i];
    if (slot < 0 || slot >= kNumPages * kPageSize) continue;
    written[slot] = true;
    reference::read_kv_token(args.cache, slot / kPageSize, static_cast<int>(slot % kPageSize), got);
    expected_token(wc.format, scale, &values[i * kHeadDimQK], want);
    for (int j = 0; j < kHeadDimQK; ++j)
      ASSERT_EQ(got[j], want[j]) << "slot " << slot << " element " << j;
  }
  // Every byte not belonging to a written token (skipped slots, page padding) is still 0xFF.
  const int bytes_per_token = kv_bytes_per_token(wc.format);
  for (int64_t page = 0; page < kNumPages; ++page)
    for (int64_t b = 0; b < cache.page_stride_bytes; ++b) {
      const int64_t offset = b / bytes_per_token;
      const bool in_written_token = offset < kPageSize && written[page * kPageSize + offset];
      if (!in_written_token) {
        ASSERT_EQ(cache.bytes[page * cache.page_stride_bytes + b], 0xFF) << "page " << page << " byte " << b;
      }
    }
}

std::vector<WriteCase> all_write_cases() {
  std::vector<WriteCase> cases;
  for (KVFormat f : {KVFormat::kBF16, KVFormat::kFP16, KVFormat::kFP8E4M3, KVFormat::kFP8DsMla})
    for (DType in : {DType::kBFloat16, DType::kFloat16, DType::kFloat32})
      cases.push_back({f, in, in == DType::kFloat16 ? DType::kInt32 : DType::kInt64, in == DType::kFloat32 ? 1 : 0,
                       in == DType::kBFloat16});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(AllFormats, WriteKVRoundTrip, ::testing::ValuesIn(all_write_cases()),
                         [](const ::testing::TestParamInfo<WriteCase>& info) {
                           return std::string(kv_format_name(info.param.format)) + "_from_" +
                                  dtype_name(info.param.input);
                         });

TEST(WriteKV, EmptyBatchAndNoFlagWithoutBadSlots) {
  CacheBuffer cache(KVFormat::kBF16, 0);
  WriteKVArgs args;
  args.kv_latent = make_tensor(nullptr, DType::kBFloat16, {0, kHeadDimV});
  args.k_rope = make_tensor(nullptr, DType::kBFloat16, {0, kRopeDim});
  args.slots = make_tensor(nullptr, DType::kInt64, {0});
  args.cache = cache.view(1.0f, false);
  EXPECT_EQ(reference::write_kv(args), 0u);
  for (uint8_t b : cache.bytes) ASSERT_EQ(b, 0xFF);

  std::vector<float> latent(kHeadDimV, 1.0f), rope(kRopeDim, -1.0f);
  int32_t slot = kNumPages * kPageSize - 1;  // the very last slot is valid
  args.kv_latent = make_tensor(latent.data(), DType::kFloat32, {1, kHeadDimV});
  args.k_rope = make_tensor(rope.data(), DType::kFloat32, {1, kRopeDim});
  args.slots = make_tensor(&slot, DType::kInt32, {1});
  EXPECT_EQ(reference::write_kv(args), 0u);
  float got[kHeadDimQK];
  reference::read_kv_token(args.cache, kNumPages - 1, kPageSize - 1, got);
  EXPECT_EQ(got[0], 1.0f);
  EXPECT_EQ(got[kHeadDimQK - 1], -1.0f);
}

TEST(WriteKV, LaterDuplicateSlotWins) {
  CacheBuffer cache(KVFormat::kFP16, 0);
  std::vector<float> latent(2 * kHeadDimV), rope(2 * kRopeDim);
  for (int j = 0; j < kHeadDimV; ++j) {
    latent[j] = 1.0f;
    latent[kHeadDimV + j] = 2.0f;
  }
  int64_t slots[2] = {70, 70};
  WriteKVArgs args;
  args.kv_latent = make_tensor(latent.data(), DType::kFloat32, {2, kHeadDimV});
  args.k_rope = make_tensor(rope.data(), DType::kFloat32, {2, kRopeDim});
  args.slots = make_tensor(slots, DType::kInt64, {2});
  args.cache = cache.view(1.0f, false);
  EXPECT_EQ(reference::write_kv(args), 0u);
  float got[kHeadDimQK];
  reference::read_kv_token(args.cache, 1, 6, got);
  EXPECT_EQ(got[0], 2.0f);
}

// ---- per-tensor FP8: the device-held scale and the overflow modes ----------------------------------

// n tokens of float32 input: random N(0, spread) values, every 9th token a row of e4m3 overflow
// boundaries (times `scale`), NaN of both signs and +-inf.
struct Fp8Input {
  std::vector<float> latent, rope;
  std::vector<int32_t> slots;
  Fp8Input(int n, float scale, float spread, uint64_t seed) : latent(n * kHeadDimV), rope(n * kRopeDim), slots(n) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> normal(0.0f, spread);
    const float boundaries[] = {448.0f, 456.0f, 463.99f, 464.0f, 464.01f, 479.99f, 480.0f, 1e6f, INFINITY, NAN};
    for (int t = 0; t < n; ++t) {
      for (int j = 0; j < kHeadDimQK; ++j) {
        float x = normal(rng);
        if (t % 9 == 4) x = boundaries[j % 10] * scale * (j % 20 < 10 ? 1.0f : -1.0f);
        (j < kHeadDimV ? latent[t * kHeadDimV + j] : rope[t * kRopeDim + j - kHeadDimV]) = x;
      }
      slots[t] = (t * 37) % (kNumPages * kPageSize);  // distinct for n <= 192
    }
    slots[n / 2] = -1;  // padding
  }
  WriteKVArgs args(KVCache cache) {
    WriteKVArgs a;
    const int64_t n = static_cast<int64_t>(slots.size());
    a.kv_latent = make_tensor(latent.data(), DType::kFloat32, {n, kHeadDimV});
    a.k_rope = make_tensor(rope.data(), DType::kFloat32, {n, kRopeDim});
    a.slots = make_tensor(slots.data(), DType::kInt32, {n});
    a.cache = cache;
    return a;
  }
};

TEST(WriteKVFp8, DeviceScaleWritesTheBytesOfTheSameHostScale) {
  for (float scale : {1.0f, 0.37f, 3.0f, 1e-3f, 0.0173f}) {
    for (E4M3Overflow overflow : {E4M3Overflow::kSaturate, E4M3Overflow::kNaN}) {
      SCOPED_TRACE(scale);
      Fp8Input in(150, scale, 300.0f * scale, 7);
      CacheBuffer host(KVFormat::kFP8E4M3, 1), device(KVFormat::kFP8E4M3, 1);
      WriteKVArgs a = in.args(host.view(scale, false));
      a.e4m3_overflow = overflow;
      EXPECT_EQ(reference::write_kv(a), 0u);
      float held = scale;
      WriteKVArgs b = in.args(device.view(7.25f, false));  // the host scale is ignored
      b.cache.device_scale = make_tensor(&held, DType::kFloat32, {1});
      b.e4m3_overflow = overflow;
      EXPECT_EQ(reference::write_kv(b), 0u);
      EXPECT_EQ(host.bytes, device.bytes);
      EXPECT_NE(host.bytes, CacheBuffer(KVFormat::kFP8E4M3, 1).bytes);  // something was written
    }
  }
}

TEST(WriteKVFp8, BadDeviceScaleWritesNothing) {
  for (float bad : {NAN, 0.0f, -0.0f, -2.0f, INFINITY, -INFINITY}) {
    SCOPED_TRACE(bad);
    Fp8Input in(100, 1.0f, 1.0f, 8);
    in.slots[3] = kNumPages * kPageSize + 5;  // beyond: not flagged, as nothing runs
    CacheBuffer cache(KVFormat::kFP8E4M3, 0);
    const std::vector<uint8_t> before = cache.bytes;
    float held = bad;
    WriteKVArgs a = in.args(cache.view(1.0f, true));
    a.cache.device_scale = make_tensor(&held, DType::kFloat32, {1});
    EXPECT_EQ(reference::write_kv(a), unsigned{kDeviceErrorScale});
    EXPECT_EQ(cache.bytes, before);
  }
  // A tiny positive (subnormal) scale is finite and > 0: valid.
  Fp8Input in(10, 1.0f, 1.0f, 9);
  CacheBuffer cache(KVFormat::kFP8E4M3, 0);
  float held = 1e-40f;
  WriteKVArgs a = in.args(cache.view(1.0f, true));
  a.cache.device_scale = make_tensor(&held, DType::kFloat32, {1});
  EXPECT_EQ(reference::write_kv(a), 0u);
}

TEST(WriteKVFp8, OverflowModesAtTheBoundaries) {
  // x / scale for x = b * scale is b again for these scales (exact: powers of two), so the bytes are
  // the codec's: saturate gives +-448, NaN mode gives the NaN code with the sign past 464.
  for (float scale : {1.0f, 0.5f, 4.0f}) {
    const float xs[] = {448.0f, 456.0f, 464.0f, 464.03125f, 480.0f, 1e6f, INFINITY, NAN, -448.0f, -464.03125f,
                        -INFINITY, -NAN};
    const uint8_t saturate[] = {0x7E, 0x7E, 0x7E, 0x7E, 0x7E, 0x7E, 0x7E, 0x7F, 0xFE, 0xFE, 0xFE, 0x7F};
    const uint8_t nan_mode[] = {0x7E, 0x7E, 0x7E, 0x7F, 0x7F, 0x7F, 0x7F, 0x7F, 0xFE, 0xFF, 0xFF, 0xFF};
    std::vector<float> latent(kHeadDimV, 0.0f), rope(kRopeDim, 0.0f);
    for (int j = 0; j < 12; ++j) latent[j] = rope[j] = std::isnan(xs[j]) ? xs[j] : xs[j] * scale;  // NaN keeps its sign
    int32_t slot = 65;
    for (E4M3Overflow overflow : {E4M3Overflow::kSaturate, E4M3Overflow::kNaN}) {
      CacheBuffer cache(KVFormat::kFP8E4M3, 0);
      WriteKVArgs a;
      a.kv_latent = make_tensor(latent.data(), DType::kFloat32, {1, kHeadDimV});
      a.k_rope = make_tensor(rope.data(), DType::kFloat32, {1, kRopeDim});
      a.slots = make_tensor(&slot, DType::kInt32, {1});
      a.cache = cache.view(scale, false);
      a.e4m3_overflow = overflow;
      EXPECT_EQ(reference::write_kv(a), 0u);
      const uint8_t* token = cache.token(slot);
      const uint8_t* want = overflow == E4M3Overflow::kNaN ? nan_mode : saturate;
      for (int j = 0; j < 12; ++j) {
        EXPECT_EQ(token[j], want[j]) << "latent " << xs[j] << " scale " << scale;
        EXPECT_EQ(token[kHeadDimV + j], want[j]) << "rope " << xs[j] << " scale " << scale;
      }
    }
  }
}

}  // namespace
}  // namespace openmla
