// GPU write_kv against the CPU oracle (openmla::reference::write_kv): the whole cache, byte for
// byte, for every KV format and input dtype, with shuffled slots, padding (negative) slots and
// slots beyond the cache, several n (0, 1, 1000+), padded pages, unaligned rows and graph capture.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "gpu/gpu_util.h"
#include "openmla/error.h"
#include "openmla/fp8.h"
#include "openmla/reference.h"
#include "openmla/write_kv.h"

namespace openmla::testing {
namespace {

struct WriteCase {
  KVFormat format = KVFormat::kBF16;
  DType input_dtype = DType::kBFloat16;
  int num_tokens = 1;
  int num_pages = 8;
  int negative_slots = 0;   // padding tokens (slot < 0): skipped
  int beyond_slots = 0;     // slots >= num_pages * 64: skipped and flagged
  int page_pad_tokens = 0;  // page stride = (64 + pad) tokens, as FlashMLA's padded test caches
  int row_pad = 0;          // input row stride = 512 + row_pad (odd: rows lose 16-byte alignment)
  bool cache_4d = true;     // [pages, 64, 1, W] or [pages, 64, W]
  bool cache_as_uint8 = false;  // fp8_e4m3 cache passed as uint8 instead of e4m3
  bool slots_int64 = false;
  bool error_word = true;
  bool non_finite = false;  // some tokens carry NaN (two payloads) and +-inf values
  float fp8_scale = 1.0f;
  bool device_scale = false;      // fp8_e4m3: the scale comes from a device tensor holding fp8_scale
                                  // (the host scale is then a different value, which must be ignored)
  E4M3Overflow overflow = E4M3Overflow::kSaturate;
  bool boundary_values = false;   // some tokens carry e4m3 overflow boundaries (times fp8_scale)
  uint64_t seed = 1;

  std::string describe() const {
    std::ostringstream os;
    os << kv_format_name(format) << " from " << dtype_name(input_dtype) << " n=" << num_tokens
       << " pages=" << num_pages << " neg=" << negative_slots << " beyond=" << beyond_slots
       << " pad=" << page_pad_tokens << " row_pad=" << row_pad << (cache_4d ? " 4d" : " 3d")
       << (slots_int64 ? " int64" : " int32") << " scale=" << fp8_scale
       << (non_finite ? " nan/inf" : "") << (device_scale ? " device_scale" : "")
       << (overflow == E4M3Overflow::kNaN ? " overflow=nan" : "") << (boundary_values ? " boundaries" : "")
       << " seed=" << seed;
    return os.str();
  }
};

// Cache row width W in elements of the cache dtype, and that dtype.
int row_elems(KVFormat f) { return f == KVFormat::kFP8DsMla ? kDsMlaBytesPerToken : kHeadDimQK; }
DType cache_dtype(const WriteCase& c) {
  switch (c.format) {
    case KVFormat::kBF16: return DType::kBFloat16;
    case KVFormat::kFP16: return DType::kFloat16;
    case KVFormat::kFP8E4M3: return c.cache_as_uint8 ? DType::kUInt8 : DType::kFloat8E4M3;
    case KVFormat::kFP8DsMla: return DType::kUInt8;
  }
  return DType::kUndefined;
}

// Input values in the input dtype's bytes. Tokens cycle through magnitude classes that exercise
// the codecs: plain N(0,1), large (e4m3 saturation, big ds_mla scales), small, tiny (subnormal
// e4m3 / fp16), all-zero tiles, tiles whose amax is exactly 448 * 2^k (the ceil in the ds_mla
// scale must not round a power of two up) and, when asked, NaN and +-inf (the codecs' special rules).
std::vector<uint8_t> make_values(const WriteCase& c, int64_t rows, int64_t row_stride, int cols,
                                 std::mt19937_64& rng, int salt) {
  const int elem = dtype_size(c.input_dtype);
  std::vector<uint8_t> bytes(static_cast<size_t>(rows * row_stride * elem), 0);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int kinds = c.boundary_values ? 8 : c.non_finite ? 7 : 6;
  // Around the e4m3 overflow rules: 448 (max), 456 (rounds to 448), 464 (tie, to even 448), just
  // above 464 (NaN when not saturating), 480 (the NaN code's magnitude), huge, inf.
  const float boundaries[] = {448.0f, 455.99f, 456.0f, 463.99f, 464.0f, 464.01f, 479.99f, 480.0f, 1e6f, INFINITY,
                              447.0f, 0x1p-9f, 0.75f * 0x1p-9f, 0x1p-10f};
  uint32_t nan_bits[2] = {0x7FC00000u, 0xFFA12345u};  // canonical, and negative with a payload
  float nans[2];
  std::memcpy(nans, nan_bits, sizeof(nans));
  for (int64_t r = 0; r < rows; ++r) {
    const int kind = static_cast<int>((r + salt) % kinds);
    for (int col = 0; col < cols; ++col) {
      float x = normal(rng);
      switch (kind) {
        case 1: x *= 600.0f; break;
        case 2: x *= 1e-3f; break;
        case 3: x *= 1e-6f; break;
        case 4: if ((col / kDsMlaTile) % 2 == 0) x = 0.0f; break;
        case 5: if (col % kDsMlaTile == 0) x = std::ldexp(448.0f, col / kDsMlaTile - 2); break;
        case 7: {  // boundary_values only; times the scale, so x / scale lands on them
          const float b = boundaries[col % (sizeof(boundaries) / sizeof(boundaries[0]))];
          x = ((col / 16) % 2 ? -b : b) * c.fp8_scale;
          if (col % 41 == 3) x = nans[(col / 41) % 2];
          break;
        }
        case 6:
          if (col % 37 == 5) x = nans[(col / 37) % 2];
          if (col % 53 == 7) x = (col / 53) % 2 ? -INFINITY : INFINITY;
          break;
        default: break;
      }
      uint8_t* dst = bytes.data() + (r * row_stride + col) * elem;
      if (c.input_dtype == DType::kFloat32) {
        std::memcpy(dst, &x, 4);
      } else {
        const uint16_t bits = c.input_dtype == DType::kBFloat16 ? fp8::float_to_bf16(x)
                                                                 : fp8::float_to_fp16(x);
        std::memcpy(dst, &bits, 2);
      }
    }
  }
  return bytes;
}

// Distinct in-range slots (a shuffled sample of the cache's slots), negative ones and ones beyond
// the cache, shuffled together.
std::vector<int64_t> make_slots(const WriteCase& c, std::mt19937_64& rng) {
  const int64_t capacity = static_cast<int64_t>(c.num_pages) * kPageSize;
  const int valid = c.num_tokens - c.negative_slots - c.beyond_slots;
  if (valid < 0 || valid > capacity) throw std::runtime_error("bad case: " + c.describe());
  std::vector<int64_t> all(static_cast<size_t>(capacity));
  std::iota(all.begin(), all.end(), int64_t{0});
  std::shuffle(all.begin(), all.end(), rng);
  std::vector<int64_t> slots(all.begin(), all.begin() + valid);
  for (int i = 0; i < c.negative_slots; ++i) slots.push_back(i % 3 == 0 ? -1 : -1 - 97 * i);
  for (int i = 0; i < c.beyond_slots; ++i) {
    const int64_t far = c.slots_int64 ? (int64_t{1} << 33) + i : int64_t{0x7FFFFFFF} - i;
    slots.push_back(i % 2 == 0 ? capacity + i : far);
  }
  std::shuffle(slots.begin(), slots.end(), rng);
  return slots;
}

// Everything one case needs on the host; views over host or device copies.
struct WriteData {
  WriteCase c;
  int64_t latent_stride = 0, rope_stride = 0, page_stride = 0;  // elements
  std::vector<uint8_t> latent, rope, cache, slot_bytes;

  // scale_ptr: a float holding c.fp8_scale where the view lives (used when c.device_scale).
  WriteKVArgs args(void* latent_ptr, void* rope_ptr, void* slots_ptr, void* cache_ptr,
                   DeviceType device, int device_id, void* scale_ptr = nullptr) const {
    const int64_t n = c.num_tokens;
    const int w = row_elems(c.format);
    WriteKVArgs a;
    a.kv_latent = make_tensor_strided(latent_ptr, c.input_dtype, {n, kHeadDimV}, {latent_stride, 1},
                                      device, device_id);
    a.k_rope = make_tensor_strided(rope_ptr, c.input_dtype, {n, kRopeDim}, {rope_stride, 1}, device,
                                   device_id);
    a.slots = make_tensor(slots_ptr, c.slots_int64 ? DType::kInt64 : DType::kInt32, {n}, device,
                          device_id);
    a.cache.format = c.format;
    a.cache.scale = c.fp8_scale;
    if (c.device_scale) {
      a.cache.scale = 7.25f;  // must be ignored (no test scale is 7.25)
      a.cache.device_scale = make_tensor(scale_ptr, DType::kFloat32, {1}, device, device_id);
    }
    a.e4m3_overflow = c.overflow;
    a.cache.data = c.cache_4d
        ? make_tensor_strided(cache_ptr, cache_dtype(c), {c.num_pages, kPageSize, 1, w},
                              {page_stride, w, w, 1}, device, device_id)
        : make_tensor_strided(cache_ptr, cache_dtype(c), {c.num_pages, kPageSize, w},
                              {page_stride, w, 1}, device, device_id);
    return a;
  }
};

WriteData make_write_data(const WriteCase& c) {
  WriteData d;
  d.c = c;
  std::mt19937_64 rng(c.seed);
  d.latent_stride = kHeadDimV + c.row_pad;
  d.rope_stride = kRopeDim + c.row_pad;
  d.page_stride = static_cast<int64_t>(kPageSize + c.page_pad_tokens) * row_elems(c.format);
  d.latent = make_values(c, c.num_tokens, d.latent_stride, kHeadDimV, rng, 0);
  d.rope = make_values(c, c.num_tokens, d.rope_stride, kRopeDim, rng, 3);
  // Old cache contents: random bytes, so a skipped or misplaced write shows as a difference.
  d.cache.resize(static_cast<size_t>(c.num_pages * d.page_stride * dtype_size(cache_dtype(c))));
  std::uniform_int_distribution<int> byte(0, 255);
  for (uint8_t& b : d.cache) b = static_cast<uint8_t>(byte(rng));
  const std::vector<int64_t> slots = make_slots(c, rng);
  if (c.slots_int64) {
    d.slot_bytes.resize(slots.size() * 8);
    std::memcpy(d.slot_bytes.data(), slots.data(), d.slot_bytes.size());
  } else {
    std::vector<int32_t> narrow(slots.begin(), slots.end());
    d.slot_bytes.resize(narrow.size() * 4);
    std::memcpy(d.slot_bytes.data(), narrow.data(), d.slot_bytes.size());
  }
  return d;
}

// "page 3 token 17 byte 530: expected 0x3c, got 0x00 (12 bytes differ)" or "" when equal.
std::string first_difference(const WriteData& d, const std::vector<uint8_t>& expected,
                             const std::vector<uint8_t>& got) {
  if (expected.size() != got.size()) return "cache sizes differ";
  size_t differing = 0, first = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    if (expected[i] != got[i] && differing++ == 0) first = i;
  }
  if (differing == 0) return "";
  const int64_t page_bytes = d.page_stride * dtype_size(cache_dtype(d.c));
  const int64_t token_bytes = static_cast<int64_t>(row_elems(d.c.format)) * dtype_size(cache_dtype(d.c));
  const int64_t in_page = static_cast<int64_t>(first) % page_bytes;
  std::ostringstream os;
  os << "page " << static_cast<int64_t>(first) / page_bytes << " token " << in_page / token_bytes
     << " byte " << in_page % token_bytes << ": expected 0x" << std::hex
     << static_cast<int>(expected[first]) << ", got 0x" << static_cast<int>(got[first]) << std::dec
     << " (" << differing << " bytes differ)";
  return os.str();
}

struct GpuResult {
  std::vector<uint8_t> cache;
  unsigned error_word = 0;
};

// Runs the GPU writer on a device copy of d (eagerly, or captured in a CUDA graph and replayed).
GpuResult run_gpu(const WriteData& d, bool through_graph = false, unsigned initial_error = 0) {
  int device = 0;
  OPENMLA_TEST_CUDA(cudaGetDevice(&device));
  DeviceBuffer latent = upload(d.latent), rope = upload(d.rope), slots = upload(d.slot_bytes);
  DeviceBuffer cache = upload(d.cache);
  DeviceBuffer error = upload(std::vector<unsigned>{initial_error});
  DeviceBuffer scale = upload(std::vector<float>{d.c.fp8_scale});
  const WriteKVArgs args =
      d.args(latent.get(), rope.get(), slots.get(), cache.get(), DeviceType::kCUDA, device, scale.get());
  unsigned* error_word = d.c.error_word ? error.as<unsigned>() : nullptr;
  Stream stream;
  if (through_graph) {
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    OPENMLA_TEST_CUDA(cudaStreamBeginCapture(stream.get(), cudaStreamCaptureModeGlobal));
    write_kv(args, stream.get(), error_word);
    OPENMLA_TEST_CUDA(cudaStreamEndCapture(stream.get(), &graph));
    OPENMLA_TEST_CUDA(cudaGraphInstantiate(&exec, graph, 0));
    OPENMLA_TEST_CUDA(cudaGraphLaunch(exec, stream.get()));
    stream.sync();
    OPENMLA_TEST_CUDA(cudaGraphExecDestroy(exec));
    OPENMLA_TEST_CUDA(cudaGraphDestroy(graph));
  } else {
    write_kv(args, stream.get(), error_word);
  }
  stream.sync();
  return {download<uint8_t>(cache), download<unsigned>(error)[0]};
}

// Oracle on the host copy; returns the expected cache and error bits.
GpuResult run_reference(const WriteData& d) {
  GpuResult r;
  r.cache = d.cache;
  std::vector<uint8_t> latent = d.latent, rope = d.rope, slots = d.slot_bytes;
  float scale = d.c.fp8_scale;
  r.error_word = reference::write_kv(
      d.args(latent.data(), rope.data(), slots.data(), r.cache.data(), DeviceType::kCPU, 0, &scale));
  return r;
}

void expect_matches_reference(const WriteCase& c, bool through_graph = false) {
  SCOPED_TRACE(c.describe());
  const WriteData d = make_write_data(c);
  const GpuResult expected = run_reference(d);
  const GpuResult got = run_gpu(d, through_graph);
  EXPECT_EQ(first_difference(d, expected.cache, got.cache), "");
  const unsigned want_error = c.error_word ? expected.error_word : 0u;
  EXPECT_EQ(got.error_word, want_error) << "device error word: got " << describe_device_errors(got.error_word)
                                        << ", expected " << describe_device_errors(want_error);
  EXPECT_EQ(expected.error_word, c.beyond_slots > 0 ? unsigned{kDeviceErrorSlotOutOfRange} : 0u);
}

// ---- every format x input dtype x n --------------------------------------------------------------

struct SweepParam {
  KVFormat format;
  DType input;
  int n;
};

class WriteKVSweep : public ::testing::TestWithParam<SweepParam> {};

TEST_P(WriteKVSweep, MatchesReferenceBitForBit) {
  const SweepParam p = GetParam();
  WriteCase c;
  c.format = p.format;
  c.input_dtype = p.input;
  c.num_tokens = p.n;
  // Enough pages for n distinct slots plus room, so slots land scattered over many pages.
  c.num_pages = std::max(4, p.n / 32 + 2);
  c.negative_slots = p.n >= 10 ? p.n / 10 : 0;
  c.beyond_slots = p.n >= 10 ? p.n / 20 : 0;
  c.fp8_scale = p.format == KVFormat::kFP8E4M3 ? 0.75f : 1.0f;
  c.seed = 1000u + static_cast<uint64_t>(p.format) * 100u + static_cast<uint64_t>(p.input) * 10u +
           static_cast<uint64_t>(p.n);
  expect_matches_reference(c);
}

std::vector<SweepParam> sweep_params() {
  std::vector<SweepParam> params;
  for (KVFormat f : {KVFormat::kBF16, KVFormat::kFP16, KVFormat::kFP8E4M3, KVFormat::kFP8DsMla}) {
    for (DType t : {DType::kBFloat16, DType::kFloat16, DType::kFloat32}) {
      for (int n : {0, 1, 2, 37, 1000, 1537}) params.push_back({f, t, n});
    }
  }
  return params;
}

INSTANTIATE_TEST_SUITE_P(AllFormats, WriteKVSweep, ::testing::ValuesIn(sweep_params()),
                         [](const ::testing::TestParamInfo<SweepParam>& info) {
                           return std::string(kv_format_name(info.param.format)) + "_from_" +
                                  dtype_name(info.param.input) + "_n" + std::to_string(info.param.n);
                         });

// ---- layouts and slot kinds ------------------------------------------------------------------------

constexpr KVFormat kAllFormats[] = {KVFormat::kBF16, KVFormat::kFP16, KVFormat::kFP8E4M3,
                                    KVFormat::kFP8DsMla};

TEST(WriteKV, PaddedPagesThreeDimCacheAndUnalignedRows) {
  // Odd row strides break 16-byte alignment (element-wise path); padded pages move every page.
  for (KVFormat f : kAllFormats) {
    for (DType t : {DType::kBFloat16, DType::kFloat32}) {
      WriteCase c;
      c.format = f;
      c.input_dtype = t;
      c.num_tokens = 300;
      c.num_pages = 7;
      c.negative_slots = 20;
      c.beyond_slots = 5;
      c.page_pad_tokens = 1;
      c.row_pad = 3;
      c.cache_4d = false;
      c.seed = 77;
      expect_matches_reference(c);
    }
  }
}

TEST(WriteKV, PaddedPagesAlignedRows) {
  // A padding that keeps 16-byte alignment: the vector path on a non-dense page stride.
  for (KVFormat f : kAllFormats) {
    WriteCase c;
    c.format = f;
    c.num_tokens = 200;
    c.num_pages = 5;
    c.page_pad_tokens = 2;
    c.row_pad = 8;  // 8 bf16 = 16 bytes
    c.seed = 78;
    expect_matches_reference(c);
  }
}

TEST(WriteKV, NonFiniteValues) {
  // NaN payloads and +-inf follow the host codecs: quiet NaN with payload (bf16/fp16), 0x7F and
  // saturation (e4m3), a non-finite ds_mla tile scale (first NaN of the tile, else inf).
  for (KVFormat f : kAllFormats) {
    for (DType t : {DType::kBFloat16, DType::kFloat16, DType::kFloat32}) {
      for (int row_pad : {0, 1}) {
        WriteCase c;
        c.format = f;
        c.input_dtype = t;
        c.num_tokens = 140;
        c.num_pages = 4;
        c.non_finite = true;
        c.row_pad = row_pad;
        c.fp8_scale = 0.5f;
        c.seed = 90;
        expect_matches_reference(c);
      }
    }
  }
}

TEST(WriteKV, Int64SlotsFarBeyondTheCache) {
  for (KVFormat f : kAllFormats) {
    WriteCase c;
    c.format = f;
    c.num_tokens = 130;
    c.num_pages = 3;
    c.negative_slots = 10;
    c.beyond_slots = 10;  // half of them beyond 2^32
    c.slots_int64 = true;
    c.seed = 79;
    expect_matches_reference(c);
  }
}

TEST(WriteKV, EveryPadding) {
  // All slots negative: nothing written, nothing flagged.
  WriteCase c;
  c.format = KVFormat::kFP8DsMla;
  c.num_tokens = 64;
  c.negative_slots = 64;
  c.seed = 80;
  expect_matches_reference(c);
}

TEST(WriteKV, FillsEverySlotOfTheCache) {
  for (KVFormat f : kAllFormats) {
    WriteCase c;
    c.format = f;
    c.num_pages = 20;
    c.num_tokens = c.num_pages * kPageSize;
    c.seed = 81;
    expect_matches_reference(c);
  }
}

TEST(WriteKV, Fp8PerTensorScales) {
  for (float scale : {1.0f, 0.37f, 8.0f, 1e-3f}) {
    for (bool as_uint8 : {false, true}) {
      WriteCase c;
      c.format = KVFormat::kFP8E4M3;
      c.input_dtype = DType::kFloat32;
      c.num_tokens = 257;
      c.num_pages = 6;
      c.fp8_scale = scale;
      c.cache_as_uint8 = as_uint8;
      c.seed = 82;
      expect_matches_reference(c);
    }
  }
}

TEST(WriteKV, WithoutErrorWordSkipsBeyondSlotsSilently) {
  WriteCase c;
  c.format = KVFormat::kBF16;
  c.num_tokens = 100;
  c.beyond_slots = 30;
  c.error_word = false;
  c.seed = 83;
  expect_matches_reference(c);
}

TEST(WriteKV, ErrorWordIsOredIntoExistingBits) {
  WriteCase c;
  c.format = KVFormat::kFP16;
  c.num_tokens = 50;
  c.beyond_slots = 1;
  c.seed = 84;
  const WriteData d = make_write_data(c);
  const GpuResult got = run_gpu(d, false, kDeviceErrorNegativeSeqlen);
  EXPECT_EQ(got.error_word, unsigned{kDeviceErrorNegativeSeqlen | kDeviceErrorSlotOutOfRange});
}

TEST(WriteKV, CapturedInACudaGraph) {
  for (KVFormat f : kAllFormats) {
    WriteCase c;
    c.format = f;
    c.num_tokens = 1000;
    c.num_pages = 40;
    c.negative_slots = 30;
    c.beyond_slots = 3;
    c.seed = 85;
    expect_matches_reference(c, /*through_graph=*/true);
  }
}

TEST(WriteKV, ZeroTokensLaunchesNothing) {
  // n = 0 is valid and writes nothing, even inside a graph capture.
  WriteCase c;
  c.format = KVFormat::kFP8E4M3;
  c.num_tokens = 0;
  c.seed = 86;
  expect_matches_reference(c, /*through_graph=*/true);
}

// ---- validation reaches the GPU entry point --------------------------------------------------------

TEST(WriteKV, RejectsHostTensors) {
  WriteCase c;
  c.num_tokens = 4;
  WriteData d = make_write_data(c);
  const WriteKVArgs host_args = d.args(d.latent.data(), d.rope.data(), d.slot_bytes.data(),
                                       d.cache.data(), DeviceType::kCPU, 0);
  try {
    write_kv(host_args, nullptr);
    FAIL() << "write_kv accepted CPU tensors";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::kInvalidArgument) << e.what();
  }
}

TEST(WriteKV, RejectsMismatchedRopeDtype) {
  WriteCase c;
  c.num_tokens = 4;
  const WriteData d = make_write_data(c);
  int device = 0;
  OPENMLA_TEST_CUDA(cudaGetDevice(&device));
  DeviceBuffer latent = upload(d.latent), rope = upload(d.rope), slots = upload(d.slot_bytes);
  DeviceBuffer cache = upload(d.cache);
  WriteKVArgs args = d.args(latent.get(), rope.get(), slots.get(), cache.get(), DeviceType::kCUDA, device);
  args.k_rope.dtype = DType::kFloat16;  // latent is bf16
  try {
    write_kv(args, nullptr);
    FAIL() << "write_kv accepted k_rope fp16 with kv_latent bf16";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::kInvalidArgument) << e.what();
  }
}

// ---- per-tensor FP8 as engines write it: device-held scale, overflow modes --------------------------

TEST(WriteKV, DeviceScaleMatchesReference) {
  // Non-power-of-two scales make x / scale inexact: the division must round as the host's does.
  for (float scale : {1.0f, 0.37f, 3.0f, 1e-3f, 0.0173f, 0x1p-4f}) {
    for (DType t : {DType::kBFloat16, DType::kFloat16, DType::kFloat32}) {
      for (E4M3Overflow overflow : {E4M3Overflow::kSaturate, E4M3Overflow::kNaN}) {
        WriteCase c;
        c.format = KVFormat::kFP8E4M3;
        c.input_dtype = t;
        c.num_tokens = 300;
        c.num_pages = 6;
        c.negative_slots = 7;
        c.beyond_slots = 2;
        c.fp8_scale = scale;
        c.device_scale = true;
        c.overflow = overflow;
        c.non_finite = true;
        c.boundary_values = true;
        c.row_pad = scale == 3.0f ? 1 : 0;  // also the element-wise path
        c.seed = 120;
        expect_matches_reference(c);
      }
    }
  }
}

TEST(WriteKV, NaNOverflowAroundTheBoundaries) {
  for (float scale : {1.0f, 0.5f, 0.37f}) {
    for (bool device_scale : {false, true}) {
      for (DType t : {DType::kBFloat16, DType::kFloat32}) {
        WriteCase c;
        c.format = KVFormat::kFP8E4M3;
        c.input_dtype = t;
        c.num_tokens = 64;
        c.num_pages = 2;
        c.fp8_scale = scale;
        c.device_scale = device_scale;
        c.overflow = E4M3Overflow::kNaN;
        c.non_finite = true;
        c.boundary_values = true;
        c.seed = 121;
        expect_matches_reference(c);
        // The mode is visible: the NaN codes of both signs appear (464.01, 480, inf overflow).
        const WriteData d = make_write_data(c);
        const GpuResult got = run_gpu(d);
        const GpuResult before{d.cache, 0};
        int nan_pos = 0, nan_neg = 0;
        for (size_t i = 0; i < got.cache.size(); ++i) {
          if (got.cache[i] == before.cache[i]) continue;
          nan_pos += got.cache[i] == 0x7F;
          nan_neg += got.cache[i] == 0xFF;
        }
        EXPECT_GT(nan_pos, 0) << c.describe();
        EXPECT_GT(nan_neg, 0) << c.describe();
      }
    }
  }
}

TEST(WriteKV, BadDeviceScaleWritesNothingAndIsFlagged) {
  for (float bad : {NAN, 0.0f, -0.0f, -1.0f, INFINITY, -INFINITY}) {
    for (bool through_graph : {false, true}) {
      WriteCase c;
      c.format = KVFormat::kFP8E4M3;
      c.input_dtype = DType::kFloat32;
      c.num_tokens = 1000;  // many blocks: none may write
      c.num_pages = 20;
      c.beyond_slots = 3;
      c.fp8_scale = bad;
      c.device_scale = true;
      c.seed = 122;
      SCOPED_TRACE(c.describe());
      WriteData d = make_write_data(c);
      std::fill(d.cache.begin(), d.cache.end(), uint8_t{0xA5});  // poison
      const GpuResult got = run_gpu(d, through_graph);
      EXPECT_EQ(first_difference(d, d.cache, got.cache), "");
      EXPECT_EQ(got.error_word, unsigned{kDeviceErrorScale}) << describe_device_errors(got.error_word);
      const GpuResult expected = run_reference(d);
      EXPECT_EQ(expected.error_word, unsigned{kDeviceErrorScale});
      EXPECT_EQ(first_difference(d, d.cache, expected.cache), "");
    }
  }
}

TEST(WriteKV, GraphReplaysSeeTheDeviceScaleOfTheirTime) {
  int device = 0;
  OPENMLA_TEST_CUDA(cudaGetDevice(&device));
  WriteCase c;
  c.format = KVFormat::kFP8E4M3;
  c.input_dtype = DType::kBFloat16;
  c.num_tokens = 500;
  c.num_pages = 10;
  c.device_scale = true;
  c.boundary_values = true;
  c.overflow = E4M3Overflow::kNaN;
  c.seed = 123;
  const WriteData d = make_write_data(c);
  DeviceBuffer latent = upload(d.latent), rope = upload(d.rope), slots = upload(d.slot_bytes);
  DeviceBuffer cache = upload(d.cache);
  DeviceBuffer error = upload(std::vector<unsigned>{0u});
  DeviceBuffer scale = upload(std::vector<float>{1.0f});
  const WriteKVArgs args =
      d.args(latent.get(), rope.get(), slots.get(), cache.get(), DeviceType::kCUDA, device, scale.get());
  Stream stream;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  OPENMLA_TEST_CUDA(cudaStreamBeginCapture(stream.get(), cudaStreamCaptureModeGlobal));
  write_kv(args, stream.get(), error.as<unsigned>());
  OPENMLA_TEST_CUDA(cudaStreamEndCapture(stream.get(), &graph));
  OPENMLA_TEST_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  std::vector<uint8_t> last = d.cache;
  // Every replay rewrites the same slots in full, so the reference from the original cache applies.
  for (float value : {0.37f, 2.0f, 0.0173f, NAN, 5.5f}) {
    SCOPED_TRACE(value);
    OPENMLA_TEST_CUDA(cudaMemcpy(scale.get(), &value, sizeof(float), cudaMemcpyHostToDevice));
    OPENMLA_TEST_CUDA(cudaMemset(error.get(), 0, sizeof(unsigned)));
    OPENMLA_TEST_CUDA(cudaGraphLaunch(exec, stream.get()));
    stream.sync();
    const std::vector<uint8_t> got = download<uint8_t>(cache);
    const unsigned got_error = download<unsigned>(error)[0];
    if (std::isnan(value)) {
      EXPECT_EQ(first_difference(d, last, got), "");  // untouched since the previous replay
      EXPECT_EQ(got_error, unsigned{kDeviceErrorScale});
    } else {
      WriteData at = d;
      at.c.fp8_scale = value;
      EXPECT_EQ(first_difference(d, run_reference(at).cache, got), "");
      EXPECT_EQ(got_error, 0u);
    }
    last = got;
  }
  OPENMLA_TEST_CUDA(cudaGraphExecDestroy(exec));
  OPENMLA_TEST_CUDA(cudaGraphDestroy(graph));
}

TEST(WriteKV, NaNOverflowRejectedForOtherFormats) {
  for (KVFormat f : {KVFormat::kBF16, KVFormat::kFP16, KVFormat::kFP8DsMla}) {
    WriteCase c;
    c.format = f;
    c.num_tokens = 4;
    c.overflow = E4M3Overflow::kNaN;
    const WriteData d = make_write_data(c);
    int device = 0;
    OPENMLA_TEST_CUDA(cudaGetDevice(&device));
    DeviceBuffer latent = upload(d.latent), rope = upload(d.rope), slots = upload(d.slot_bytes);
    DeviceBuffer cache = upload(d.cache);
    const WriteKVArgs args = d.args(latent.get(), rope.get(), slots.get(), cache.get(), DeviceType::kCUDA, device);
    try {
      write_kv(args, nullptr);
      FAIL() << "accepted kNaN for " << kv_format_name(f);
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), Status::kInvalidArgument) << e.what();
      EXPECT_NE(std::string(e.what()).find("e4m3_overflow"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace openmla::testing
