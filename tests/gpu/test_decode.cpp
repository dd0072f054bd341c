// GPU decode against the float64 CPU reference: fresh random inputs per case, shuffled pages, NaN
// in unused pages and page tails, outputs poisoned with NaN before every run.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "common/decode_data.h"
#include "gpu/gpu_util.h"
#include "kernels/portable/decode/launch_config.h"
#include "kernels/sm90/decode/launch_config.h"
#include "openmla/fp8.h"
#include "openmla/openmla.h"
#include "openmla/testing.h"

namespace openmla::testing {
namespace {

// DecodeOptions and the testing overrides (openmla/testing.h) a test forces. What a test leaves automatic comes
// from the environment (OPENMLA_BACKEND, OPENMLA_PORTABLE_TILE), as for a plain DecodePlan, so the suite runs
// once per backend under gpu_check.sh.
struct PlanOptions : DecodeOptions {
  int sm90_rows_per_cta = 0;                          // DecodeOverrides::sm90_rows_per_cta
  PortableTile portable_tile = PortableTile::kAuto;  // DecodeOverrides::portable_tile
};

DecodePlan make_plan(const DecodeShape& shape, const PlanOptions& opt, int device = -1) {
  DecodeOverrides overrides = environment_overrides();
  if (opt.sm90_rows_per_cta != 0) overrides.sm90_rows_per_cta = opt.sm90_rows_per_cta;
  if (opt.portable_tile != PortableTile::kAuto) overrides.portable_tile = opt.portable_tile;
  return make_decode_plan(shape, opt, overrides, device);
}

struct GpuDecodeResult {
  std::vector<uint16_t> out;  // [b, s_q, h_q, 512] bits
  std::vector<float> lse;     // [b, s_q, h_q] row-major (re-laid out from FlashMLA's layout if used)
  unsigned device_errors = 0;
};

// Device copies of one case's inputs and outputs.
struct DeviceCase {
  DeviceBuffer q, cache, block_table, seqlens, out, lse, workspace;
  DeviceBuffer scales;  // device_scales: [q scale, kv scale]
};

DecodeArgs device_args(const DecodeData& d, DeviceCase& dc, int device) {
  DecodeArgs a = d.host_args();
  auto to_device = [device](TensorView v, void* ptr) {
    v.data = ptr;
    v.device = DeviceType::kCUDA;
    v.device_id = device;
    return v;
  };
  a.q = to_device(a.q, dc.q.get());
  a.kv.data = to_device(a.kv.data, dc.cache.get());
  if (a.q_scale.defined()) a.q_scale = to_device(a.q_scale, dc.scales.as<float>());
  if (a.kv.device_scale.defined()) a.kv.device_scale = to_device(a.kv.device_scale, dc.scales.as<float>() + 1);
  a.block_table = to_device(a.block_table, dc.block_table.get());
  a.cache_seqlens = to_device(a.cache_seqlens, dc.seqlens.get());
  const int b = d.shape.batch_size, s = d.shape.q_len, h = d.shape.num_heads;
  a.out = make_tensor(dc.out.get(), d.out_dtype(), {b, s, h, 512}, DeviceType::kCUDA, device);
  if (d.c.lse_flashmla_layout) {
    a.lse = make_tensor_strided(dc.lse.get(), DType::kFloat32, {b, s, h}, {int64_t(h) * s, 1, s}, DeviceType::kCUDA,
                                device);
  } else {
    a.lse = make_tensor(dc.lse.get(), DType::kFloat32, {b, s, h}, DeviceType::kCUDA, device);
  }
  return a;
}

DeviceCase upload_case(const DecodeData& d) {
  DeviceCase dc;
  dc.q = d.c.fp8_query ? upload(d.q_fp8) : upload(d.q);
  dc.scales = upload(std::vector<float>{d.q_scale, d.kv_scale});
  dc.cache = upload(d.cache);
  dc.block_table = upload(d.block_table);
  dc.seqlens = upload(d.seqlens);
  const size_t rows = size_t(d.shape.batch_size) * d.shape.q_len * d.shape.num_heads;
  dc.out = DeviceBuffer(rows * 512 * 2);
  dc.lse = DeviceBuffer(rows * sizeof(float));
  return dc;
}

void poison_outputs(DeviceCase& dc) {
  OPENMLA_TEST_CUDA(cudaMemset(dc.out.get(), 0xFF, dc.out.bytes()));  // bf16/fp16 NaN
  OPENMLA_TEST_CUDA(cudaMemset(dc.lse.get(), 0xFF, dc.lse.bytes()));  // float NaN
}

GpuDecodeResult read_results(const DecodeData& d, DeviceCase& dc) {
  GpuDecodeResult r;
  r.out = download<uint16_t>(dc.out);
  std::vector<float> raw = download<float>(dc.lse);
  const int b = d.shape.batch_size, s = d.shape.q_len, h = d.shape.num_heads;
  r.lse.resize(raw.size());
  for (int i = 0; i < b; ++i)
    for (int j = 0; j < s; ++j)
      for (int k = 0; k < h; ++k) {
        const size_t dst = (size_t(i) * s + j) * h + k;
        const size_t src = d.c.lse_flashmla_layout ? (size_t(i) * h + k) * s + j : dst;
        r.lse[dst] = raw[src];
      }
  return r;
}

// `adjust` may replace device inputs and their views after the packed upload (other layouts).
using AdjustArgs = std::function<void(DeviceCase&, DecodeArgs&, int device)>;

GpuDecodeResult run_gpu(const DecodeData& d, const PlanOptions& opt = {}, const AdjustArgs& adjust = {}) {
  int device = 0;
  OPENMLA_TEST_CUDA(cudaGetDevice(&device));
  DecodePlan plan = make_plan(d.shape, opt, device);
  DeviceCase dc = upload_case(d);
  dc.workspace = DeviceBuffer(plan.workspace_bytes());
  DecodePlan::reset_device_errors(dc.workspace.get(), nullptr);
  poison_outputs(dc);
  DecodeArgs a = device_args(d, dc, device);
  if (adjust) adjust(dc, a, device);
  plan.plan(a.cache_seqlens, dc.workspace.get(), dc.workspace.bytes(), nullptr);
  plan.run(a, dc.workspace.get(), dc.workspace.bytes(), nullptr);
  OPENMLA_TEST_CUDA(cudaGetLastError());
  GpuDecodeResult r = read_results(d, dc);
  r.device_errors = DecodePlan::read_device_errors(dc.workspace.get(), nullptr);
  return r;
}

void expect_data_matches_reference(const DecodeData& d, const PlanOptions& opt = {}, const AdjustArgs& adjust = {}) {
  ReferenceResult ref = run_reference(d);
  GpuDecodeResult gpu = run_gpu(d, opt, adjust);
  CompareResult cmp = compare_decode(d, ref, gpu.out, gpu.lse);
  EXPECT_TRUE(cmp.ok) << cmp.message;
  EXPECT_EQ(gpu.device_errors, ref.device_errors)
      << "device errors " << describe_device_errors(gpu.device_errors) << " vs reference "
      << describe_device_errors(ref.device_errors);
}

void expect_matches_reference(const DecodeCase& c, const PlanOptions& opt = {}) {
  SCOPED_TRACE(c.describe());
  expect_data_matches_reference(make_decode_data(c), opt);
}

// The automatic plan, then 7 parts (long segments, and partial rows for the requests that split).
void expect_matches_reference_planned_and_split(const DecodeCase& c) {
  expect_matches_reference(c);
  PlanOptions few;
  few.num_parts = 7;
  expect_matches_reference(c, few);
}

std::vector<int> random_lengths(int b, int max_len, uint64_t seed, bool allow_zero) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> dist(allow_zero ? 0 : 1, max_len);
  std::vector<int> v(b);
  for (int& x : v) x = dist(rng);
  return v;
}

uint64_t fresh_seed() {
  static std::random_device rd;
  return (uint64_t(rd()) << 32) ^ rd();
}

// ---------------------------------------------------------------------------------------------

struct ShapeParam {
  int q_len;
  int num_heads;
  bool causal;
  DType dtype;
};

class DecodeShapes : public ::testing::TestWithParam<ShapeParam> {};

TEST_P(DecodeShapes, EdgeLengthsMatchReference) {
  const ShapeParam sp = GetParam();
  DecodeCase c;
  c.q_len = sp.q_len;
  c.num_heads = sp.num_heads;
  c.causal = sp.causal;
  c.q_dtype = sp.dtype;
  c.kv_format = sp.dtype == DType::kBFloat16 ? KVFormat::kBF16 : KVFormat::kFP16;
  // Lengths 0, 1, < 64, = 64, > 64, non-multiples; all >= s_q under causal (else a guard fires).
  // Length 0 is always an empty request (out 0, lse -inf), causal or not.
  const int lo = (sp.causal && sp.q_len > 1) ? sp.q_len : 1;
  c.seqlens = {0, lo, 17, 63, 64, 65, 128, 200, 1000};
  c.batch_size = static_cast<int>(c.seqlens.size());
  c.seed = fresh_seed();
  expect_matches_reference(c);
}

std::vector<ShapeParam> all_shapes() {
  std::vector<ShapeParam> v;
  for (int h : {8, 16, 32, 64, 128})
    for (int s : {1, 2, 4, 8})
      for (bool causal : {true, false}) {
        if (s == 1 && !causal) continue;
        v.push_back({s, h, causal, DType::kBFloat16});
      }
  // s_q = 3 (MTP with two draft tokens): 24, 48, 96, 192 and 384 rows, so that every schedule also
  // runs a query tile that its rows fill only in part (the sizes above are all powers of two).
  for (int h : {8, 16, 32, 64, 128}) v.push_back({3, h, true, DType::kBFloat16});
  v.push_back({3, 32, true, DType::kFloat16});
  for (int h : {16, 128}) v.push_back({2, h, true, DType::kFloat16});
  v.push_back({16, 8, true, DType::kBFloat16});
  v.push_back({16, 16, true, DType::kFloat16});
  return v;
}

INSTANTIATE_TEST_SUITE_P(AllSupported, DecodeShapes, ::testing::ValuesIn(all_shapes()),
                         [](const ::testing::TestParamInfo<ShapeParam>& info) {
                           const ShapeParam& p = info.param;
                           return "sq" + std::to_string(p.q_len) + "_hq" + std::to_string(p.num_heads) +
                                  (p.causal ? "_causal" : "_full") + (p.dtype == DType::kBFloat16 ? "_bf16" : "_fp16");
                         });

// FP8 caches: the kernel dequantizes exactly (e4m3 -> bf16/fp16, times a power-of-two ds_mla
// scale; the per-tensor scale is folded into the softmax scale and the output), so it is held to
// the same tolerance against the reference computed on the dequantized cache.
struct Fp8Param {
  KVFormat format;
  int q_len;
  int num_heads;
  DType q_dtype;
};

class DecodeFp8 : public ::testing::TestWithParam<Fp8Param> {};

TEST_P(DecodeFp8, EdgeLengthsMatchReference) {
  const Fp8Param fp = GetParam();
  DecodeCase c;
  c.q_len = fp.q_len;
  c.num_heads = fp.num_heads;
  c.causal = true;
  c.q_dtype = fp.q_dtype;
  c.kv_format = fp.format;
  c.kv_fp8_scale = 0.05f;  // a cache scale far from 1 (values e4m3 * 0.05)
  const int lo = fp.q_len > 1 ? fp.q_len : 1;
  c.seqlens = {0, lo, 17, 63, 64, 65, 200, 1000};
  c.batch_size = static_cast<int>(c.seqlens.size());
  c.seed = fresh_seed();
  expect_matches_reference(c);
}

std::vector<Fp8Param> fp8_shapes() {
  std::vector<Fp8Param> v;
  for (KVFormat f : {KVFormat::kFP8E4M3, KVFormat::kFP8DsMla})
    for (int h : {8, 16, 32, 64, 128})
      for (int s : {1, 4}) v.push_back({f, s, h, DType::kBFloat16});
  v.push_back({KVFormat::kFP8E4M3, 2, 16, DType::kFloat16});
  // <= 16 rows run the sm90 narrow kernel (per-tensor e4m3 with either query type, ds_mla with
  // bf16 queries; ds_mla with fp16 queries stays on the wide kernel): causal pairs too.
  v.push_back({KVFormat::kFP8E4M3, 2, 8, DType::kBFloat16});
  v.push_back({KVFormat::kFP8DsMla, 2, 8, DType::kBFloat16});
  v.push_back({KVFormat::kFP8DsMla, 1, 16, DType::kFloat16});
  v.push_back({KVFormat::kFP8E4M3, 1, 16, DType::kFloat16});
  v.push_back({KVFormat::kFP8E4M3, 2, 8, DType::kFloat16});
  v.push_back({KVFormat::kFP8DsMla, 2, 128, DType::kFloat16});
  v.push_back({KVFormat::kFP8DsMla, 16, 16, DType::kBFloat16});
  // Partly filled query tiles (48 and 96 rows), as in all_shapes().
  for (KVFormat f : {KVFormat::kFP8E4M3, KVFormat::kFP8DsMla})
    for (int h : {16, 32}) v.push_back({f, 3, h, DType::kBFloat16});
  return v;
}

INSTANTIATE_TEST_SUITE_P(Fp8Formats, DecodeFp8, ::testing::ValuesIn(fp8_shapes()),
                         [](const ::testing::TestParamInfo<Fp8Param>& info) {
                           const Fp8Param& p = info.param;
                           return std::string(p.format == KVFormat::kFP8E4M3 ? "e4m3" : "dsmla") + "_sq" +
                                  std::to_string(p.q_len) + "_hq" + std::to_string(p.num_heads) +
                                  (p.q_dtype == DType::kBFloat16 ? "_bf16" : "_fp16");
                         });

// 64 requests of up to 900 tokens on fresh inputs; request 5 is long enough to be split over many
// parts, and two page ids are out of range: request 7's first, and one in the middle of request 5, so that one of its
// parts finds it inside its own segment. Both requests' rows must come out NaN, flagged.
DecodeData large_batch_with_bad_page(int q_len, int num_heads, KVFormat f, DType q_dtype = DType::kBFloat16) {
  DecodeCase c;
  c.batch_size = 64;
  c.q_len = q_len;
  c.num_heads = num_heads;
  c.kv_format = f;
  c.q_dtype = q_dtype;
  c.seed = fresh_seed();
  c.seqlens = random_lengths(c.batch_size, 900, c.seed, false);
  for (int& x : c.seqlens) x = std::max(x, c.q_len);
  c.seqlens[5] = 5000;
  DecodeData d = make_decode_data(c);
  d.block_table[7 * d.max_pages] = -3;
  d.block_table[5 * d.max_pages + 40] = d.num_pages;  // request 5: 5000 tokens, 79 pages
  return d;
}

// That batch against the reference: every valid request right, the bad page id flagged.
void expect_large_batch_split_and_guards(const DecodeData& d, const PlanOptions& opt = {}) {
  ReferenceResult ref = run_reference(d);
  GpuDecodeResult gpu = run_gpu(d, opt);
  CompareResult cmp = compare_decode(d, ref, gpu.out, gpu.lse);
  EXPECT_TRUE(cmp.ok) << kv_format_name(d.c.kv_format) << ": " << cmp.message;
  EXPECT_EQ(gpu.device_errors, unsigned{kDeviceErrorPageIdOutOfRange}) << describe_device_errors(gpu.device_errors);
}

TEST(Decode, Fp8LargeBatchSplitAndGuards) {
  // q_len 2 x 16 heads: 32 rows, at 64 requests the sm90 32-row narrow kernel; q_len 1: 16 rows (narrow kernel).
  for (int q_len : {2, 1}) {
    for (KVFormat f : {KVFormat::kFP8E4M3, KVFormat::kFP8DsMla}) {
      SCOPED_TRACE("q_len=" + std::to_string(q_len));
      expect_large_batch_split_and_guards(large_batch_with_bad_page(q_len, 16, f));
    }
  }
}

// 16-bit caches on the narrow kernel: the same large batch with a split request and a bad page id, 16 rows
// (automatic from 64 requests, and forced) and 32 rows (forced), both query types.
TEST(Decode, Narrow16BitLargeBatchSplitAndGuards) {
  for (KVFormat f : {KVFormat::kBF16, KVFormat::kFP16}) {
    const DType q_dtype = f == KVFormat::kBF16 ? DType::kBFloat16 : DType::kFloat16;
    for (int rows_per_cta : {0, 16, 32}) {
      const int q_len = rows_per_cta == 32 ? 2 : 1;
      SCOPED_TRACE("sm90_rows_per_cta=" + std::to_string(rows_per_cta));
      PlanOptions opt;
      opt.sm90_rows_per_cta = rows_per_cta;
      expect_large_batch_split_and_guards(large_batch_with_bad_page(q_len, 16, f, q_dtype), opt);
    }
  }
}

// The wide kernel (64+ rows; the consumers check a segment's page ids once, before its tiles, in
// segment_page_out_of_range) on the same large batch: 16-bit caches with both query types on the alternating schedule
// (64 rows) and the seesaw (128, 256 rows), and the FP8 caches' alternating schedule (64, 128 rows).
TEST(Decode, WideLargeBatchSplitAndGuards) {
  struct Case {
    KVFormat format;
    int q_len, num_heads;
  };
  const Case cases[] = {{KVFormat::kBF16, 1, 64},     {KVFormat::kBF16, 1, 128}, {KVFormat::kBF16, 2, 128},
                        {KVFormat::kFP16, 1, 64},     {KVFormat::kFP16, 4, 64},  {KVFormat::kFP8E4M3, 1, 64},
                        {KVFormat::kFP8DsMla, 2, 64}, {KVFormat::kFP8E4M3, 2, 64}};
  for (const Case& k : cases) {
    SCOPED_TRACE(std::string(kv_format_name(k.format)) + " q_len=" + std::to_string(k.q_len) +
                 " h_q=" + std::to_string(k.num_heads));
    const DType q_dtype = k.format == KVFormat::kFP16 ? DType::kFloat16 : DType::kBFloat16;
    expect_large_batch_split_and_guards(large_batch_with_bad_page(k.q_len, k.num_heads, k.format, q_dtype));
  }
}

// ds_mla at 16 rows from 64 requests runs the narrow kernel with its two-warp producer (a finish warp
// zeroes the tail rows and factors the scales): every edge length at that batch, scales far apart,
// with the automatic part count and with few parts (long segments).
TEST(Decode, DsMla16RowsLargeBatchEdgeLengths) {
  DecodeCase c;
  c.batch_size = 64;
  c.q_len = 1;
  c.num_heads = 16;
  c.kv_format = KVFormat::kFP8DsMla;
  c.latent_log2_spread = 12;
  c.softmax_scale = std::ldexp(1.0f / 24.0f, -14);
  const int edges[] = {0, 1, 17, 63, 64, 65, 127, 200, 1000, 3000};
  c.seqlens.resize(c.batch_size);
  for (int i = 0; i < c.batch_size; ++i) c.seqlens[i] = edges[i % 10];
  c.seed = fresh_seed();
  expect_matches_reference(c);
  PlanOptions opt;
  opt.num_parts = 7;
  expect_matches_reference(c, opt);
}

TEST(Decode, DsMlaScalesFarApart) {
  // ds_mla tile scales spread far within and across tokens, zero tiles, scales >= 2^8: the narrow
  // kernel factors each scale into a power of two per token and an fp16 part (hi * lo), the wide
  // kernel takes its exact path for the large ones. bf16 queries: values over 2^+-18 (outputs up to
  // ~1e6). fp16 queries compute and return fp16, so their data stays in fp16's range (2^+-6). The
  // softmax scale keeps the scores of the largest tokens in range, so many tokens weigh.
  for (int q_len : {1, 2}) {
    for (DType q_dtype : {DType::kBFloat16, DType::kFloat16}) {
      DecodeCase c;
      c.batch_size = 6;
      c.q_len = q_len;
      c.num_heads = 16;  // q_len 1: 16 rows (narrow kernel with a bf16 query), 2: wide kernel
      c.q_dtype = q_dtype;
      c.kv_format = KVFormat::kFP8DsMla;
      const bool bf16 = q_dtype == DType::kBFloat16;
      c.latent_log2_spread = bf16 ? 12 : 4;
      c.softmax_scale = std::ldexp(1.0f / 24.0f, bf16 ? -14 : -6);
      c.seqlens = {2, 63, 65, 300, 1000, 2000};
      c.seed = fresh_seed();
      SCOPED_TRACE(c.describe());
      expect_matches_reference(c);
    }
  }
}

TEST(Decode, DsMlaRawTileScales) {
  // A ds_mla cache written with raw tile scales (amax / 448, not powers of two; write_kv and
  // FlashMLA's quantizer never store them). Every kernel multiplies by the scale as a float, but
  // rounds the dequantized value once more than for a power of two (docs/kv-formats.md): the
  // portable kernel once to the query type (<= 2^-9 relative for bf16), the sm90 wide kernel with a
  // bf16 query twice in bf16 (<= 2^-8), the sm90 narrow kernel twice in fp16 (<= 2^-10). The reference
  // reads the exact products, so scores differ by ~2^-9 of their terms: with ordinary magnitudes (no
  // spread; large scores move lse in proportion) out within 2e-2 and lse within 1e-2.
  for (int q_len : {1, 2}) {
    for (DType q_dtype : {DType::kBFloat16, DType::kFloat16}) {
      for (Backend backend : {Backend::kAuto, Backend::kPortable}) {
        DecodeCase c;
        c.batch_size = 4;
        c.q_len = q_len;
        c.num_heads = 16;  // q_len 1 + bf16: sm90 narrow; q_len 2: sm90 wide; the portable kernel elsewhere
        c.q_dtype = q_dtype;
        c.kv_format = KVFormat::kFP8DsMla;
        c.seqlens = {1, 65, 300, 1200};
        c.seed = fresh_seed();
        SCOPED_TRACE(c.describe());
        DecodeData d = make_decode_data(c);
        ASSERT_GT(requantize_ds_mla_raw_scales(d), 1000);
        PlanOptions opt;
        opt.backend = backend;  // auto: sm90 on compute capability 9.0
        const ReferenceResult ref = run_reference(d);
        const GpuDecodeResult gpu = run_gpu(d, opt);
        const CompareResult cmp = compare_decode(d, ref, gpu.out, gpu.lse, 2e-2, 1e-2);
        EXPECT_TRUE(cmp.ok) << cmp.message;
        EXPECT_EQ(gpu.device_errors, 0u) << describe_device_errors(gpu.device_errors);
      }
    }
  }
}

TEST(Decode, ScoresJumpAcrossTiles) {
  // Token magnitudes spread over 2^[-6, 6] (latent_log2_spread), so a row's running max jumps at
  // random tiles, often long after a segment's first: by more than 2^8 (the portable kernel's lazy
  // rescaling then redoes the tile exactly) at the default softmax scale, mostly by less (weights
  // above 1 against a stale max) at 1/8 of it. Every format and both row counts of the portable
  // tiles (16 rows; 64 from h_q = 64 with s_q = 2), long segments (7 parts) and the automatic split.
  for (KVFormat format : {KVFormat::kBF16, KVFormat::kFP8E4M3, KVFormat::kFP8DsMla}) {
    for (int scale_log2 : {0, -3}) {
      for (int q_len : {1, 2}) {
        DecodeCase c;
        c.q_len = q_len;
        c.num_heads = q_len == 1 ? 16 : 64;
        c.causal = true;
        c.kv_format = format;
        c.kv_fp8_scale = 0.37f;
        c.latent_log2_spread = 4;
        c.softmax_scale = std::ldexp(1.0f / 24.0f, scale_log2);
        c.seqlens = {2, 63, 65, 300, 1000, 2000};
        c.batch_size = static_cast<int>(c.seqlens.size());
        c.seed = fresh_seed();
        SCOPED_TRACE(c.describe());
        expect_matches_reference_planned_and_split(c);
      }
    }
  }
}

TEST(Decode, SplitRowsFarOutsideFp16Range) {
  // A split request's partial rows are fp16 with a power-of-two scale per 64 columns
  // (kernels/common/partial_rows.h). Cache values 2^40 and 2^-40 times N(0, 1) (the softmax scale
  // compensates, so the weights stay as usual) put every output value far above fp16's 65504 or deep in
  // its subnormals, through every fp16 writer and the combine: 16 rows (the narrow FP8 kernel, the wide kernel
  // on 16-bit caches), 128 (the seesaw, the wide FP8 kernel), the narrow kernel on 16-bit caches (forced), the
  // portable kernel under its backend, long segments (7 parts) and the automatic split.
  for (KVFormat format : {KVFormat::kBF16, KVFormat::kFP8E4M3, KVFormat::kFP8DsMla}) {
    for (int log2_scale : {40, -40}) {
      for (int q_len : {1, 2}) {
        DecodeCase c;
        c.q_len = q_len;
        c.num_heads = q_len == 1 ? 16 : 64;
        c.kv_format = format;
        c.kv_log2_scale = log2_scale;
        c.kv_fp8_scale = std::ldexp(0.37f, log2_scale);
        // ds_mla tiles far apart too (zero tiles among them): its kernels keep O in units of 1 / (the largest
        // tile weight), so a block's raw accumulator can be far below its output value.
        if (format == KVFormat::kFP8DsMla) c.latent_log2_spread = 12;
        c.softmax_scale = std::ldexp(1.0f / 24.0f, -log2_scale);
        c.seqlens = {2, 63, 65, 300, 1000, 2000};
        c.batch_size = static_cast<int>(c.seqlens.size());
        c.seed = fresh_seed();
        SCOPED_TRACE(c.describe());
        expect_matches_reference_planned_and_split(c);
      }
    }
  }
  // The narrow kernel on 16-bit caches (from 64 requests when automatic): 16 and 32 rows, forced.
  for (int log2_scale : {40, -40}) {
    for (int rows_per_cta : {16, 32}) {
      DecodeCase c;
      c.q_len = rows_per_cta / 16;
      c.num_heads = 16;
      c.kv_log2_scale = log2_scale;
      c.softmax_scale = std::ldexp(1.0f / 24.0f, -log2_scale);
      c.seqlens = {2, 63, 65, 300, 1000, 2000};
      c.batch_size = static_cast<int>(c.seqlens.size());
      c.seed = fresh_seed();
      PlanOptions opt;
      opt.sm90_rows_per_cta = rows_per_cta;
      SCOPED_TRACE(c.describe() + " sm90_rows_per_cta=" + std::to_string(rows_per_cta));
      expect_matches_reference(c, opt);
      opt.num_parts = 7;
      expect_matches_reference(c, opt);
    }
  }
}

TEST(Decode, NonFiniteKvPoisonsItsRows) {
  // A NaN that reaches a request's keys must make exactly that request's rows NaN (out and lse), whole
  // or split over parts: a part's row sum l is then NaN, and its LSE must say so, or the combine
  // drops the part as empty (l = 0) and returns a finite answer. bf16: one latent value. ds_mla: a
  // tile's scale, which is how the quantizer (write_kv, FlashMLA's) stores a tile that held NaN (the
  // sm90 wide kernel's fast bf16 expansion tests the scale, not the bytes: docs/kv-formats.md).
  // e4m3: the NaN code in one byte, where the kernel converts with cvt (sm_89+; the sm_80 build
  // reads it as 480, docs/kv-formats.md). 16 rows: sm90 narrow kernel for the FP8 formats; 32 and
  // 128: wide.
  const cudaDeviceProp prop = current_device_properties();
  const bool fp8_conversion = prop.major * 10 + prop.minor >= 89;
  for (KVFormat format : {KVFormat::kBF16, KVFormat::kFP8DsMla, KVFormat::kFP8E4M3}) {
    if (format == KVFormat::kFP8E4M3 && !fp8_conversion) continue;
    for (int heads : {16, 128}) {
      for (int q_len : {1, 2}) {
        DecodeCase c;
        c.batch_size = 4;
        c.q_len = q_len;
        c.num_heads = heads;
        c.kv_format = format;
        c.seqlens = {100, 200, 70, 1000};
        c.seed = fresh_seed();
        SCOPED_TRACE(c.describe());
        DecodeData d = make_decode_data(c);
        // Request 1, token 150 (third page); request 3, tokens 5 and 990 (first and last part of a
        // split request).
        auto poison = [&](int req, int token, int which) {
          const int page = d.block_table[size_t(req) * d.max_pages + token / kPageSize];
          uint8_t* row = d.cache.data() + size_t(page) * d.page_stride_bytes;
          if (format == KVFormat::kFP8DsMla) {
            const float nan = std::numeric_limits<float>::quiet_NaN();
            std::memcpy(row + size_t(token % kPageSize) * kDsMlaBytesPerToken + kDsMlaScalesOffset + which * 4, &nan,
                        sizeof(nan));
          } else if (format == KVFormat::kFP8E4M3) {
            row[size_t(token % kPageSize) * kHeadDimQK + 100 * which + 7] = 0x7F;  // e4m3 NaN
          } else {
            const uint16_t nan = 0x7FC0;  // bf16
            std::memcpy(row + (size_t(token % kPageSize) * kHeadDimQK + 100 * which + 7) * 2, &nan, sizeof(nan));
          }
        };
        poison(1, 150, 2);
        poison(3, 5, 0);
        poison(3, 990, 3);
        ReferenceResult ref = run_reference(d);
        const size_t row_elems = size_t(c.q_len) * c.num_heads;
        for (int parts : {0, 1, 3}) {  // automatic, whole requests, forced splits
          SCOPED_TRACE("num_parts=" + std::to_string(parts));
          PlanOptions opt;
          opt.num_parts = parts;
          GpuDecodeResult gpu = run_gpu(d, opt);
          CompareResult cmp = compare_decode(d, ref, gpu.out, gpu.lse);
          EXPECT_TRUE(cmp.ok) << cmp.message;
          for (int r = 0; r < 4; ++r) {
            size_t nan_rows = 0;
            for (size_t i = 0; i < row_elems; ++i) nan_rows += std::isnan(gpu.lse[r * row_elems + i]);
            EXPECT_EQ(nan_rows, (r == 1 || r == 3) ? row_elems : 0) << "request " << r;
          }
        }
      }
    }
  }
}

// Three requests of 1, 100 and 1000 tokens on an e4m3 cache (scale 0.37) with bf16 queries of N(0, 1)
// times 2^17, and a softmax scale of 2^(extra - 17) / 24 (extra > 0: a few tokens dominate).
DecodeCase large_query_case(int heads, int extra_log2) {
  DecodeCase c;
  c.batch_size = 3;
  c.num_heads = heads;
  c.kv_format = KVFormat::kFP8E4M3;
  c.kv_fp8_scale = 0.37f;
  c.q_log2_scale = 17;
  c.softmax_scale = std::ldexp(1.0f / 24.0f, extra_log2 - 17);
  c.seqlens = {1, 100, 1000};
  c.seed = fresh_seed();
  return c;
}

TEST(Decode, Bf16QueryBeyondFp16RangeOnE4m3) {
  // e4m3 tiles are multiplied in fp16 (sm90 narrow and wide, portable): a bf16 query is converted
  // times 2^-shift so that its largest |q| (here ~2^19) fits, and the scores are scaled back. The
  // softmax scale keeps the scores where several tokens weigh. 16 rows (sm90: narrow kernel) and
  // 128 (wide); the portable suite runs the same cases.
  for (int heads : {16, 128}) {
    DecodeCase c = large_query_case(heads, 0);
    SCOPED_TRACE(c.describe());
    expect_matches_reference(c);
  }
}

// Every sm90 schedule on the shapes it can run: the narrow kernel with 16 rows per CTA, the wide
// kernel on a 16-row shape, and the opt-in 32-row narrow variant (two consumers and their merge).
// Edge lengths, FP8 caches (ds_mla with scales far apart), few parts (long segments) and the
// automatic count. On other GPUs the option is ignored and the portable kernel runs the same cases.
struct ScheduleCase {
  KVFormat format;
  DType q_dtype;
  int q_len, num_heads, rows_per_cta;
  bool causal = true;
  int page_pad_tokens = 0;  // page stride (64 + pad) tokens, as FlashMLA's test caches
};

void expect_schedules_match_reference(const std::vector<ScheduleCase>& cases) {
  for (const ScheduleCase& k : cases) {
    DecodeCase c;
    c.q_len = k.q_len;
    c.num_heads = k.num_heads;
    c.q_dtype = k.q_dtype;
    c.kv_format = k.format;
    c.causal = k.causal;
    c.page_pad_tokens = k.page_pad_tokens;
    c.kv_fp8_scale = 0.37f;
    if (k.format == KVFormat::kFP8DsMla) {
      // Tile scales far apart; with an fp16 query the values stay in fp16's range, as in DsMlaScalesFarApart
      // (an fp16 query computes in fp16: docs/fp8-accuracy.md).
      const bool bf16 = k.q_dtype == DType::kBFloat16;
      c.latent_log2_spread = bf16 ? 12 : 4;
      c.softmax_scale = std::ldexp(1.0f / 24.0f, bf16 ? -14 : -6);
    }
    const int lo = k.causal && k.q_len > 1 ? k.q_len : 1;  // without the mask a request may be shorter than s_q
    c.seqlens = {0, lo, 17, 63, 64, 65, 200, 1000, 3000};
    c.batch_size = static_cast<int>(c.seqlens.size());
    c.seed = fresh_seed();
    PlanOptions opt;
    opt.sm90_rows_per_cta = k.rows_per_cta;
    SCOPED_TRACE(c.describe() + " sm90_rows_per_cta=" + std::to_string(k.rows_per_cta) +
                 " page_pad_tokens=" + std::to_string(k.page_pad_tokens));
    expect_matches_reference(c, opt);
    opt.num_parts = 7;  // few parts: long segments (and, at 32 rows, both consumers in most of them)
    expect_matches_reference(c, opt);
  }
}

TEST(Decode, Sm90ScheduleForced) {
  expect_schedules_match_reference({{KVFormat::kFP8E4M3, DType::kBFloat16, 1, 16, 64},
                                    {KVFormat::kFP8DsMla, DType::kBFloat16, 1, 16, 64},
                                    {KVFormat::kFP8DsMla, DType::kBFloat16, 2, 8, 16},
                                    {KVFormat::kFP8E4M3, DType::kFloat16, 1, 8, 16}});
}

TEST(Decode, Sm90Narrow32RowsForced) {
  expect_schedules_match_reference({{KVFormat::kFP8E4M3, DType::kBFloat16, 2, 16, 32},
                                    {KVFormat::kFP8E4M3, DType::kFloat16, 1, 32, 32},
                                    {KVFormat::kFP8E4M3, DType::kBFloat16, 4, 8, 32},
                                    {KVFormat::kFP8E4M3, DType::kBFloat16, 1, 8, 32},
                                    {KVFormat::kFP8DsMla, DType::kBFloat16, 2, 16, 32},
                                    {KVFormat::kFP8DsMla, DType::kBFloat16, 1, 16, 32}});
}

// 16-bit caches on the narrow kernel (both operands from shared memory, one consumer warpgroup), 16 and
// 32 rows per CTA, both query types, fewer rows than a CTA holds, MTP rows of several tokens.
TEST(Decode, Sm90Narrow16BitForced) {
  expect_schedules_match_reference({{KVFormat::kBF16, DType::kBFloat16, 1, 16, 16},
                                    {KVFormat::kFP16, DType::kFloat16, 2, 8, 16},
                                    {KVFormat::kBF16, DType::kBFloat16, 1, 8, 16},
                                    {KVFormat::kBF16, DType::kBFloat16, 2, 16, 32},
                                    {KVFormat::kFP16, DType::kFloat16, 1, 32, 32},
                                    {KVFormat::kBF16, DType::kBFloat16, 4, 8, 32},
                                    {KVFormat::kFP16, DType::kFloat16, 1, 16, 32}});
}

// Several query tokens without the causal mask (every token sees the whole request, which may be
// shorter than s_q), on every sm90 schedule and cache format: the FP8 and 16-bit narrow kernels in 16-
// and 32-row CTAs, the wide kernel's alternating schedule on FP8 caches (48 rows: a tile filled in part,
// 128 rows) and its seesaw (96 rows). The other tests of these schedules take the mask.
TEST(Decode, Sm90SchedulesWithoutCausalMask) {
  expect_schedules_match_reference({{KVFormat::kFP8E4M3, DType::kBFloat16, 2, 8, 16, false},
                                    {KVFormat::kFP8DsMla, DType::kBFloat16, 2, 8, 16, false},
                                    {KVFormat::kFP8E4M3, DType::kBFloat16, 2, 16, 32, false},
                                    {KVFormat::kFP8DsMla, DType::kBFloat16, 4, 8, 32, false},
                                    {KVFormat::kBF16, DType::kBFloat16, 2, 8, 16, false},
                                    {KVFormat::kFP16, DType::kFloat16, 2, 16, 32, false},
                                    {KVFormat::kFP8E4M3, DType::kBFloat16, 3, 16, 64, false},
                                    {KVFormat::kFP8DsMla, DType::kBFloat16, 2, 64, 64, false},
                                    {KVFormat::kBF16, DType::kBFloat16, 3, 32, 64, false}});
}

// Pages padded past 64 tokens (FlashMLA's test caches pad by one): the page stride, which every sm90 TMA
// map takes as a coordinate stride, is then not 64 rows. Every schedule and cache format, pads 1 and 3.
TEST(Decode, Sm90SchedulesOnPaddedPages) {
  expect_schedules_match_reference({{KVFormat::kBF16, DType::kBFloat16, 1, 16, 16, true, 1},
                                    {KVFormat::kFP16, DType::kFloat16, 2, 16, 32, true, 3},
                                    {KVFormat::kFP8E4M3, DType::kBFloat16, 1, 16, 16, true, 1},
                                    {KVFormat::kFP8DsMla, DType::kBFloat16, 1, 16, 16, true, 3},
                                    {KVFormat::kFP8E4M3, DType::kBFloat16, 2, 16, 32, true, 3},
                                    {KVFormat::kFP8DsMla, DType::kBFloat16, 2, 16, 32, true, 1},
                                    {KVFormat::kBF16, DType::kBFloat16, 1, 64, 64, true, 1},
                                    {KVFormat::kFP8E4M3, DType::kBFloat16, 1, 64, 64, true, 3},
                                    {KVFormat::kFP8DsMla, DType::kFloat16, 2, 64, 64, true, 1},
                                    {KVFormat::kBF16, DType::kBFloat16, 2, 64, 64, true, 3}});
}

// A batch whose every request is empty (a warm-up call, or a step before any token was written): no
// tile to compute, so only the planner, the kernels' empty segments and the combine run; every row must
// come out as out 0, lse -inf, with no device error. Every format, the automatic schedule at 4 and 128
// requests (the narrow kernels from 64 / 128) and each sm90 schedule forced.
TEST(Decode, EveryRequestEmpty) {
  const struct {
    int q_len, num_heads, batch, rows_per_cta;
  } shapes[] = {{1, 16, 4, 0}, {1, 16, 128, 0}, {2, 16, 128, 0}, {2, 64, 4, 0},
                {1, 16, 4, 16}, {2, 16, 4, 32}, {2, 16, 4, 64}};
  for (KVFormat f : {KVFormat::kBF16, KVFormat::kFP8E4M3, KVFormat::kFP8DsMla}) {
    for (const auto& k : shapes) {
      DecodeCase c;
      c.q_len = k.q_len;
      c.num_heads = k.num_heads;
      c.kv_format = f;
      c.causal = true;
      c.batch_size = k.batch;
      c.seqlens.assign(k.batch, 0);
      c.seed = fresh_seed();
      PlanOptions opt;
      opt.sm90_rows_per_cta = k.rows_per_cta;
      SCOPED_TRACE("sm90_rows_per_cta=" + std::to_string(k.rows_per_cta));
      expect_matches_reference(c, opt);
    }
  }
}

TEST(Decode, Sm90ScheduleOptionRejectsWhatCannotRun) {
  DecodeShape shape;
  shape.batch_size = 2;
  shape.q_len = 2;
  shape.num_heads = 16;  // 32 rows
  shape.kv_format = KVFormat::kFP8E4M3;
  PlanOptions opt;
  opt.sm90_rows_per_cta = 48;
  EXPECT_THROW(make_plan(shape, opt), Error);  // not a schedule, on any backend
  opt.backend = Backend::kSm90;
  opt.sm90_rows_per_cta = 16;  // 32 rows do not fit
  int device = 0, major = 0;
  OPENMLA_TEST_CUDA(cudaGetDevice(&device));
  OPENMLA_TEST_CUDA(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  if (major != 9) GTEST_SKIP() << "needs the sm90 backend";
  try {
    DecodePlan plan = make_plan(shape, opt);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("sm90_rows_per_cta"), std::string::npos) << e.what();
  }
  shape.kv_format = KVFormat::kBF16;  // 16-bit caches: the same rule
  EXPECT_THROW(make_plan(shape, opt), Error);
  opt.sm90_rows_per_cta = 32;
  EXPECT_NO_THROW(make_plan(shape, opt));
  opt.sm90_rows_per_cta = 64;
  EXPECT_NO_THROW(make_plan(shape, opt));
}

// ---- FP8 math (DecodeOptions::fp8_math, sm90 only) -------------------------------------------
// Held against the reference that does the kernel's arithmetic (reference::decode with
// Fp8Math::kQkAndPv: the query quantized per row, every weight rounded to e4m3 as the kernel rounds
// it). Hopper's FP8 tensor cores add the products at reduced precision (measured: scores off by
// ~6e-4 relative, lse by up to 1.4e-3, 3.2e-3 with scores in the tens), which the float64 reference
// does not model, and a weight whose 256 p lies that close to an e4m3 rounding midpoint rounds the
// other way (one step = 1/8 to 1/16 of the weight). So lse gets 5e-3 instead of 1e-4, and out keeps 1e-2 for 97% of the elements with
// every element within 0.2 (a flip of a dominant weight moves a short row by up to ~10%). A layout
// or indexing error moves almost every element far beyond that. Each case prints its worst errors.
constexpr double kFp8MathOutTol = 1e-2;
constexpr double kFp8MathLseTol = 5e-3;
constexpr OutSlack kFp8MathSlack{0.97, 0.2};

void expect_graph_replay_equals_eager(KVFormat format, const PlanOptions& opt, double out_tol, double lse_tol,
                                      OutSlack slack, int num_heads);

// Whether this GPU runs FP8 math (the sm90 backend); elsewhere the option must be refused.
bool fp8_math_runs_here() {
  DecodeShape shape;
  shape.batch_size = 1;
  shape.num_heads = 16;
  shape.kv_format = KVFormat::kFP8E4M3;
  PlanOptions opt;
  opt.fp8_math = Fp8Math::kQkAndPv;
  try {
    DecodePlan plan = make_plan(shape, opt);
    return plan.backend() == Backend::kSm90;
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::kUnsupported) << e.what();
    EXPECT_NE(std::string(e.what()).find("options.fp8_math"), std::string::npos) << e.what();
    return false;
  }
}

CompareResult expect_fp8_math_matches(const DecodeCase& c, PlanOptions opt = {}, OutSlack slack = kFp8MathSlack,
                                      double lse_tol = kFp8MathLseTol) {
  SCOPED_TRACE(c.describe());
  opt.fp8_math = Fp8Math::kQkAndPv;
  DecodeData d = make_decode_data(c);
  ReferenceResult ref = run_reference(d, Fp8Math::kQkAndPv);
  GpuDecodeResult gpu = run_gpu(d, opt);
  CompareResult cmp = compare_decode(d, ref, gpu.out, gpu.lse, kFp8MathOutTol, lse_tol, slack);
  EXPECT_TRUE(cmp.ok) << cmp.message;
  EXPECT_EQ(gpu.device_errors, ref.device_errors)
      << "device errors " << describe_device_errors(gpu.device_errors) << " vs reference "
      << describe_device_errors(ref.device_errors);
  std::printf("[fp8 math] %s parts=%d: out max %.2e (%lld/%lld within %.0e), lse %.2e\n", c.describe().c_str(),
              opt.num_parts, cmp.max_out_rel_err, static_cast<long long>(cmp.out_within),
              static_cast<long long>(cmp.out_total), kFp8MathOutTol, cmp.max_lse_rel_err);
  return cmp;
}

struct Fp8MathCase {
  int q_len, num_heads;
  DType q_dtype;
};

TEST(Decode, Fp8MathMatchesItsReference) {
  if (!fp8_math_runs_here()) GTEST_SKIP() << "FP8 math needs the sm90 backend (refused here, as checked)";
  const std::vector<Fp8MathCase> cases = {{1, 16, DType::kBFloat16},  {1, 64, DType::kBFloat16},
                                          {1, 128, DType::kBFloat16}, {2, 128, DType::kBFloat16},
                                          {4, 32, DType::kBFloat16},  {2, 8, DType::kBFloat16},
                                          {16, 8, DType::kBFloat16},  {3, 32, DType::kBFloat16},
                                          {2, 64, DType::kFloat16},
                                          {1, 16, DType::kFloat16}};
  for (const Fp8MathCase& k : cases) {
    DecodeCase c;
    c.q_len = k.q_len;
    c.num_heads = k.num_heads;
    c.q_dtype = k.q_dtype;
    c.kv_format = KVFormat::kFP8E4M3;
    c.kv_fp8_scale = 0.05f;
    const int lo = k.q_len > 1 ? k.q_len : 1;
    c.seqlens = {0, lo, 17, 63, 64, 65, 200, 1000};
    c.batch_size = static_cast<int>(c.seqlens.size());
    c.seed = fresh_seed();
    expect_fp8_math_matches(c);
    PlanOptions few;
    few.num_parts = 7;  // long segments, and splits with partials for the others
    expect_fp8_math_matches(c, few);
  }
}

// Pages padded past 64 tokens (Sm90SchedulesOnPaddedPages covers the other schedules): the FP8-math
// kernel's page map with strides of 65 and 67 tokens.
TEST(Decode, Fp8MathOnPaddedPages) {
  if (!fp8_math_runs_here()) GTEST_SKIP() << "FP8 math needs the sm90 backend";
  for (int pad : {1, 3}) {
    DecodeCase c;
    c.q_len = pad == 1 ? 2 : 1;
    c.num_heads = pad == 1 ? 64 : 16;
    c.kv_format = KVFormat::kFP8E4M3;
    c.kv_fp8_scale = 0.05f;
    c.page_pad_tokens = pad;
    c.seqlens = {0, 2, 63, 65, 200, 1000};
    c.batch_size = static_cast<int>(c.seqlens.size());
    c.seed = fresh_seed();
    SCOPED_TRACE("page_pad_tokens=" + std::to_string(pad));
    expect_fp8_math_matches(c);
  }
}

TEST(Decode, Fp8MathQueryScalesAndPeakyRows) {
  // A query far from 1 in magnitude (bf16 ~2^19; per-row exponents) and a softmax scale that makes
  // a few tokens dominate (weights near 1, where e4m3 is finest, and many near 2^-14). Scores are
  // large here, so the tensor cores' absolute score error and with it the rounding flips of the
  // dominant weights are more frequent (measured: 95-99% of elements within 1e-2): 85% required.
  if (!fp8_math_runs_here()) GTEST_SKIP() << "FP8 math needs the sm90 backend";
  // The lse error scales with the scores (tens here): measured up to 3.2e-3, so 1e-2 (the lse is still
  // exact to a few thousandths of a nat; a wrong row scale or base would be off by whole units).
  for (int heads : {16, 128}) expect_fp8_math_matches(large_query_case(heads, 2), {}, OutSlack{0.85, 0.25}, 1e-2);
}

TEST(Decode, Fp8MathLargeBatchSplitAndGuards) {
  if (!fp8_math_runs_here()) GTEST_SKIP() << "FP8 math needs the sm90 backend";
  DecodeData d = large_batch_with_bad_page(2, 64, KVFormat::kFP8E4M3);
  ReferenceResult ref = run_reference(d, Fp8Math::kQkAndPv);
  PlanOptions opt;
  opt.fp8_math = Fp8Math::kQkAndPv;
  GpuDecodeResult gpu = run_gpu(d, opt);
  CompareResult cmp = compare_decode(d, ref, gpu.out, gpu.lse, kFp8MathOutTol, kFp8MathLseTol, kFp8MathSlack);
  EXPECT_TRUE(cmp.ok) << cmp.message;
  EXPECT_EQ(gpu.device_errors, unsigned{kDeviceErrorPageIdOutOfRange}) << describe_device_errors(gpu.device_errors);
}

TEST(Decode, Fp8MathIndependentOfPartCount) {
  // The weights' rounding does not depend on where a split starts (power-of-two bases) and the
  // scores are the same in every split, so the results over 1, 3 and 64 parts agree to the outputs'
  // own rounding (a bf16 step or two) and the lse to float precision.
  if (!fp8_math_runs_here()) GTEST_SKIP() << "FP8 math needs the sm90 backend";
  DecodeCase c;
  c.batch_size = 5;
  c.q_len = 2;
  c.num_heads = 64;
  c.kv_format = KVFormat::kFP8E4M3;
  c.seqlens = {2, 70, 640, 2, 3000};
  c.seed = fresh_seed();
  DecodeData d = make_decode_data(c);
  std::vector<GpuDecodeResult> runs;
  for (int parts : {1, 3, 64}) {
    PlanOptions opt;
    opt.num_parts = parts;
    opt.fp8_math = Fp8Math::kQkAndPv;
    runs.push_back(run_gpu(d, opt));
  }
  ReferenceResult one_part;  // the single-part run as the "reference" of the others
  one_part.out.resize(runs[0].out.size());
  one_part.lse.assign(runs[0].lse.begin(), runs[0].lse.end());
  for (size_t k = 0; k < runs[0].out.size(); ++k)
    one_part.out[k] = d.c.q_dtype == DType::kBFloat16 ? fp8::bf16_to_float(runs[0].out[k]) : fp8::fp16_to_float(runs[0].out[k]);
  for (size_t i = 1; i < runs.size(); ++i) {
    CompareResult cmp = compare_decode(d, one_part, runs[i].out, runs[i].lse, 1e-2, 1e-5);
    EXPECT_TRUE(cmp.ok) << "run " << i << " vs one part: " << cmp.message;
  }
}

TEST(Decode, Fp8MathGraphReplayEqualsEager) {
  if (!fp8_math_runs_here()) GTEST_SKIP() << "FP8 math needs the sm90 backend";
  PlanOptions opt;
  opt.fp8_math = Fp8Math::kQkAndPv;
  expect_graph_replay_equals_eager(KVFormat::kFP8E4M3, opt, kFp8MathOutTol, kFp8MathLseTol, kFp8MathSlack, 64);
}

TEST(Decode, Fp8MathOptionRejectsWhatCannotRun) {
  DecodeShape shape;
  shape.batch_size = 2;
  shape.num_heads = 16;
  shape.kv_format = KVFormat::kFP8DsMla;
  PlanOptions opt;
  opt.fp8_math = Fp8Math::kQkAndPv;
  try {  // not a per-tensor e4m3 cache: refused on any GPU, naming the option
    DecodePlan plan = make_plan(shape, opt);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("options.fp8_math"), std::string::npos) << e.what();
  }
  shape.kv_format = KVFormat::kFP8E4M3;
  opt.backend = Backend::kPortable;  // the portable kernel has no FP8 math
  try {
    DecodePlan plan = make_plan(shape, opt);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::kUnsupported);
  }
  if (!fp8_math_runs_here()) return;
  opt.backend = Backend::kSm90;
  opt.sm90_rows_per_cta = 16;  // FP8 math runs the 64-row schedule only
  EXPECT_THROW(make_plan(shape, opt), Error);
  opt.sm90_rows_per_cta = 64;
  EXPECT_NO_THROW(make_plan(shape, opt));
}

// ---- per-tensor FP8 with device-held scales (DecodeShape::device_scales) ----

// An fp8_e4m3 case whose cache scale (and, with fp8_query, the e4m3 query's scale) live in device memory, as engines
// hold k_scale / descale_q. Edge lengths; a non-power-of-two cache scale.
DecodeCase device_scale_case(int q_len, int heads, bool fp8_query, DType q_dtype) {
  DecodeCase c;
  c.q_len = q_len;
  c.num_heads = heads;
  c.q_dtype = q_dtype;
  c.kv_format = KVFormat::kFP8E4M3;
  c.kv_fp8_scale = 0.37f;
  c.device_scales = true;
  c.fp8_query = fp8_query;
  c.seqlens = {0, q_len, 17, 63, 64, 65, 200, 1000, 3000};
  c.batch_size = static_cast<int>(c.seqlens.size());
  c.seed = fresh_seed();
  return c;
}

// Against the float64 reference on the same codes and scale values: 16-bit and e4m3 queries (an e4m3 query's codes
// are widened to bf16 exactly, so the kernels multiply the very codes), decode and causal MTP, the narrow and wide
// row counts, the automatic plan and 7 parts.
TEST(Decode, DeviceHeldScalesMatchReference) {
  for (bool fp8_query : {false, true})
    for (int q_len : {1, 2})
      for (int heads : {16, 128}) {
        const DType q_dtype = !fp8_query && heads == 16 ? DType::kFloat16 : DType::kBFloat16;
        expect_matches_reference_planned_and_split(device_scale_case(q_len, heads, fp8_query, q_dtype));
      }
}

// A device-held scale that is not finite and > 0: NaN rows for the requests with keys, out 0 / lse -inf for the
// empty one, kDeviceErrorScale; never a finite answer from a bad scale.
TEST(Decode, BadDeviceHeldScalesPoisonRowsAndSetTheScaleBit) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  for (bool fp8_query : {false, true})
    for (float bad : {nan, 0.0f, -2.0f, inf}) {
      DecodeCase c = device_scale_case(1, 16, fp8_query, DType::kBFloat16);
      SCOPED_TRACE(c.describe() + " bad scale " + std::to_string(bad));
      DecodeData d = make_decode_data(c);
      (fp8_query ? d.q_scale : d.kv_scale) = bad;
      expect_data_matches_reference(d);
    }
}

// One captured step (plan + run); each replay reads the scale tensors' current values, as an engine's graph does
// when it updates k_scale / descale_q in place.
TEST(Decode, DeviceHeldScalesChangeBetweenGraphReplays) {
  int device = 0;
  OPENMLA_TEST_CUDA(cudaGetDevice(&device));
  for (bool fp8_query : {false, true}) {
    DecodeCase c = device_scale_case(2, 64, fp8_query, DType::kBFloat16);
    SCOPED_TRACE(c.describe());
    DecodeData d = make_decode_data(c);
    DecodePlan plan = make_plan(d.shape, {}, device);
    DeviceCase dc = upload_case(d);
    dc.workspace = DeviceBuffer(plan.workspace_bytes());
    Stream stream;
    DecodePlan::reset_device_errors(dc.workspace.get(), stream.get());
    DecodeArgs a = device_args(d, dc, device);
    cudaGraph_t graph;
    OPENMLA_TEST_CUDA(cudaStreamBeginCapture(stream.get(), cudaStreamCaptureModeThreadLocal));
    plan.plan(a.cache_seqlens, dc.workspace.get(), dc.workspace.bytes(), stream.get());
    plan.run(a, dc.workspace.get(), dc.workspace.bytes(), stream.get());
    OPENMLA_TEST_CUDA(cudaStreamEndCapture(stream.get(), &graph));
    cudaGraphExec_t exec;
    OPENMLA_TEST_CUDA(cudaGraphInstantiate(&exec, graph, 0));
    std::vector<float> previous_lse;
    for (float factor : {1.0f, 3.5f, 0.0625f}) {
      DecodeData now = d;
      now.kv_scale = d.kv_scale * factor;
      if (fp8_query) now.q_scale = d.q_scale / factor / 2.0f;
      const std::vector<float> scales = {now.q_scale, now.kv_scale};
      OPENMLA_TEST_CUDA(cudaMemcpy(dc.scales.get(), scales.data(), 8, cudaMemcpyHostToDevice));
      poison_outputs(dc);
      OPENMLA_TEST_CUDA(cudaGraphLaunch(exec, stream.get()));
      OPENMLA_TEST_CUDA(cudaStreamSynchronize(stream.get()));
      GpuDecodeResult replay = read_results(d, dc);
      CompareResult cmp = compare_decode(now, run_reference(now), replay.out, replay.lse);
      EXPECT_TRUE(cmp.ok) << "factor " << factor << ": " << cmp.message;
      EXPECT_NE(replay.lse, previous_lse) << "the replay did not see the new scales";
      previous_lse = replay.lse;
    }
    EXPECT_EQ(DecodePlan::read_device_errors(dc.workspace.get(), stream.get()), 0u);
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
  }
}

// What device-held scales cannot run with: FP8 math (host-held scales only).
TEST(Decode, DeviceHeldScalesRejectFp8Math) {
  DecodeShape shape;
  shape.batch_size = 2;
  shape.num_heads = 16;
  shape.kv_format = KVFormat::kFP8E4M3;
  shape.device_scales = true;
  PlanOptions opt;
  opt.fp8_math = Fp8Math::kQkAndPv;
  try {
    make_plan(shape, opt);
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::kUnsupported);
    EXPECT_NE(std::string(e.what()).find("device_scales"), std::string::npos) << e.what();
  }
}

TEST(Decode, LargeBatchRandomLengths) {
  DecodeCase c;
  c.batch_size = 128;
  c.q_len = 1;
  c.num_heads = 16;
  c.seed = fresh_seed();
  c.seqlens = random_lengths(c.batch_size, 700, c.seed, /*allow_zero=*/true);
  expect_matches_reference(c);
}

TEST(Decode, LargeBatchCausalMtp) {
  DecodeCase c;
  c.batch_size = 128;
  c.q_len = 4;
  c.num_heads = 16;
  c.causal = true;
  c.seed = fresh_seed();
  c.seqlens = random_lengths(c.batch_size, 300, c.seed, false);
  for (int& x : c.seqlens) x = std::max(x, c.q_len);
  expect_matches_reference(c);
}

TEST(Decode, ManyHeadsMtpEightCausal) {
  DecodeCase c;
  c.batch_size = 3;
  c.q_len = 8;
  c.num_heads = 128;
  c.causal = true;
  c.seqlens = {8, 333, 1500};
  c.seed = fresh_seed();
  expect_matches_reference(c);
}

TEST(Decode, LongSingleRequestSplitWide) {
  // One request split over every SM: automatic (sm90: the narrow kernel at b <= 2) and the wide sm90 kernel forced.
  DecodeCase c;
  c.batch_size = 1;
  c.num_heads = 16;
  c.seqlens = {20000};
  c.seed = fresh_seed();
  expect_matches_reference(c);
  PlanOptions wide;
  wide.sm90_rows_per_cta = 64;
  expect_matches_reference(c, wide);
}

TEST(Decode, ScheduleIndependentOfPartCount) {
  // The same inputs over 1 part (no split), a few, and many more parts than work: equal results
  // within tolerance, and every variant matches the reference.
  DecodeCase c;
  c.batch_size = 5;
  c.q_len = 2;
  c.num_heads = 64;
  c.seqlens = {2, 70, 640, 1, 3000};
  c.seed = fresh_seed();
  for (int parts : {1, 3, 7, 64, 500}) {
    SCOPED_TRACE("num_parts=" + std::to_string(parts));
    PlanOptions opt;
    opt.num_parts = parts;
    expect_matches_reference(c, opt);
  }
}

TEST(Decode, SingleRequestSplitOverManyParts) {
  // One request over many parts, with 16, 64 and 128 rows: the combine's column tile depends on the
  // splits it is sized for (part count, and the block table's width), so narrow and wide tables (the
  // request fills 1/1 or 1/8 of them) with 16-132 parts reach tiles of 8, 16 and 32 float4 (sm90's
  // part counts), with the width bound deciding in some cases and the part count in others.
  for (int heads : {16, 64, 128}) {
    for (int width_factor : {1, 8}) {
      DecodeCase c;
      c.batch_size = 1;
      c.q_len = 1;
      c.num_heads = heads;
      c.seqlens = {4000};
      const int pages = (4000 + kPageSize - 1) / kPageSize;
      c.extra_table_slots = (width_factor - 1) * pages + 1;  // unused columns hold an out-of-range id
      c.seed = fresh_seed();
      for (int parts : {0, 16, 64, 65, 132}) {
        SCOPED_TRACE(c.describe() + " table columns=" + std::to_string(pages + c.extra_table_slots) +
                     " num_parts=" + std::to_string(parts));
        PlanOptions opt;
        opt.num_parts = parts;
        expect_matches_reference(c, opt);
      }
    }
  }
}

TEST(Decode, EveryPortableTileMatchesReference) {
  // The auto choice picks one tile per device; force each one (those that fit this device) so the
  // tiles meant for sm80 / sm86 are tested on whatever GPU runs the suite.
  const cudaDeviceProp prop = current_device_properties();
  for (int tile = 0; tile < kNumPortableTiles; ++tile) {
    const auto t = static_cast<PortableTile>(tile);
    for (KVFormat format : {KVFormat::kBF16, KVFormat::kFP8E4M3, KVFormat::kFP8DsMla}) {
      if (kernels::portable::tile_smem_bytes(t, format) > prop.sharedMemPerBlockOptin) continue;
      SCOPED_TRACE(std::string(portable_tile_name(t)) + " " + kv_format_name(format));
      PlanOptions opt;
      opt.portable_tile = t;
      for (int heads : {16, 128}) {
        DecodeCase c;
        c.batch_size = 4;
        c.q_len = 2;
        c.num_heads = heads;
        c.causal = true;
        c.kv_format = format;
        c.kv_fp8_scale = 0.37f;
        c.seqlens = {2, 33, 64, 1000};
        c.seed = fresh_seed();
        expect_matches_reference(c, opt);
      }
    }
  }
}

// Query views the validator accepts besides the packed one: padded rows, heads and tokens swapped in
// memory, and one row broadcast over the heads (stride 0). The sm90 wide kernel reads Q through a TMA
// map built from these strides; the portable kernel through addresses.
enum class QueryLayout { kPaddedRows, kHeadsOuter, kBroadcastHeads };

void expect_query_layout_matches_reference(DecodeCase c, QueryLayout layout) {
  SCOPED_TRACE(c.describe());
  DecodeData d = make_decode_data(c);
  const int b = c.batch_size, s = c.q_len, h = c.num_heads;
  constexpr int kD = 576;
  auto logical = [&](int i, int j, int k) { return (size_t(i) * s + j) * h + k; };
  if (layout == QueryLayout::kBroadcastHeads) {  // every head of a token holds head 0's row
    for (int i = 0; i < b; ++i)
      for (int j = 0; j < s; ++j)
        for (int k = 1; k < h; ++k)
          std::copy_n(d.q.begin() + logical(i, j, 0) * kD, kD, d.q.begin() + logical(i, j, k) * kD);
  }
  int64_t stride_b = 0, stride_s = 0, stride_h = 0;
  switch (layout) {
    case QueryLayout::kPaddedRows: stride_h = 640; stride_s = int64_t(h) * 640; stride_b = s * stride_s + 64; break;
    case QueryLayout::kHeadsOuter: stride_s = kD; stride_h = int64_t(s) * kD; stride_b = int64_t(h) * s * kD; break;
    case QueryLayout::kBroadcastHeads: stride_h = 0; stride_s = kD; stride_b = int64_t(s) * kD; break;
  }
  std::vector<uint16_t> laid(size_t(b) * stride_b + kD, 0x7FC0);  // bf16 NaN between the rows
  for (int i = 0; i < b; ++i)
    for (int j = 0; j < s; ++j)
      for (int k = 0; k < h; ++k)
        std::copy_n(d.q.begin() + logical(i, j, k) * kD, kD, laid.begin() + i * stride_b + j * stride_s + k * stride_h);
  expect_data_matches_reference(d, PlanOptions{}, [&](DeviceCase& dc, DecodeArgs& a, int device) {
    dc.q = upload(laid);
    a.q = make_tensor_strided(dc.q.get(), d.shape.q_dtype, {b, s, h, kD}, {stride_b, stride_s, stride_h, 1},
                              DeviceType::kCUDA, device);
  });
}

TEST(Decode, StridedQueryLayouts) {
  for (QueryLayout layout : {QueryLayout::kPaddedRows, QueryLayout::kHeadsOuter, QueryLayout::kBroadcastHeads}) {
    for (int h : {16, 128}) {
      SCOPED_TRACE(::testing::Message() << "layout " << int(layout) << ", h_q " << h);
      DecodeCase c;
      c.batch_size = 3;
      c.q_len = 2;
      c.num_heads = h;
      c.causal = true;
      c.seqlens = {1, 200, 64 * 9 + 7};
      c.seed = fresh_seed();
      expect_query_layout_matches_reference(c, layout);
    }
  }
}

TEST(Decode, FlashMlaLseLayoutAndPaddedPages) {
  DecodeCase c;
  c.batch_size = 4;
  c.q_len = 2;
  c.num_heads = 32;
  c.seqlens = {5, 64, 129, 777};
  c.lse_flashmla_layout = true;
  c.page_pad_tokens = 1;  // FlashMLA's tests pad each page by one token
  c.seed = fresh_seed();
  expect_matches_reference(c);
}

// Request 1: negative length; 2: beyond the block table; 3: causal with seqlen < s_q;
// 4: an out-of-range page id in its table. Requests 0 and 5 must be unaffected.
void expect_guards_poison_only_bad_requests(const PlanOptions& opt) {
  DecodeCase c;
  c.batch_size = 6;
  c.q_len = 2;
  c.num_heads = 16;
  c.causal = true;
  c.seqlens = {100, -5, 1, 1, 300, 90};
  c.seed = fresh_seed();
  DecodeData d = make_decode_data(c);
  d.seqlens[2] = d.max_pages * kPageSize + 1;  // one token beyond what the table can hold
  d.c.seqlens[2] = d.seqlens[2];
  d.block_table[4 * d.max_pages + 2] = d.num_pages + 7;  // third page of request 4
  ReferenceResult ref = run_reference(d);
  GpuDecodeResult gpu = run_gpu(d, opt);
  CompareResult cmp = compare_decode(d, ref, gpu.out, gpu.lse);
  EXPECT_TRUE(cmp.ok) << cmp.message;
  const unsigned expected = kDeviceErrorNegativeSeqlen | kDeviceErrorSeqlenBeyondTable |
                            kDeviceErrorSeqlenBelowQueryLen | kDeviceErrorPageIdOutOfRange;
  EXPECT_EQ(gpu.device_errors, expected) << describe_device_errors(gpu.device_errors);
  EXPECT_EQ(ref.device_errors, expected) << describe_device_errors(ref.device_errors);
  const size_t row_elems = size_t(c.q_len) * c.num_heads;
  for (int r : {0, 5})
    for (size_t i = 0; i < row_elems; ++i) EXPECT_FALSE(std::isnan(gpu.lse[r * row_elems + i])) << "request " << r;
  for (int r : {1, 2, 3, 4})
    for (size_t i = 0; i < row_elems; ++i) EXPECT_TRUE(std::isnan(gpu.lse[r * row_elems + i])) << "request " << r;
}

TEST(Decode, DeviceGuardsPoisonOnlyBadRequests) {
  expect_guards_poison_only_bad_requests({});
  PlanOptions narrow;  // the 32-row shape on the narrow kernel (sm90; ignored by the portable kernel)
  narrow.sm90_rows_per_cta = 32;
  SCOPED_TRACE("sm90_rows_per_cta=32");
  expect_guards_poison_only_bad_requests(narrow);
}

// One captured plan + run replayed over changing lengths: bit-equal to eager runs, and right.
void expect_graph_replay_equals_eager(KVFormat format, const PlanOptions& opt, double out_tol, double lse_tol,
                                      OutSlack slack, int num_heads) {
  int device = 0;
  OPENMLA_TEST_CUDA(cudaGetDevice(&device));
  DecodeCase c;
  c.kv_format = format;
  c.batch_size = 8;
  c.q_len = 2;
  c.num_heads = num_heads;
  c.seqlens = {1000, 900, 800, 700, 600, 500, 400, 300};  // capacity for every later length
  c.seed = fresh_seed();
  DecodeData d = make_decode_data(c);
  DecodePlan plan = make_plan(d.shape, opt, device);
  DeviceCase dc = upload_case(d);
  dc.workspace = DeviceBuffer(plan.workspace_bytes());
  Stream stream;
  DecodePlan::reset_device_errors(dc.workspace.get(), stream.get());
  DecodeArgs a = device_args(d, dc, device);

  cudaGraph_t graph;
  OPENMLA_TEST_CUDA(cudaStreamBeginCapture(stream.get(), cudaStreamCaptureModeThreadLocal));
  plan.plan(a.cache_seqlens, dc.workspace.get(), dc.workspace.bytes(), stream.get());
  plan.run(a, dc.workspace.get(), dc.workspace.bytes(), stream.get());
  OPENMLA_TEST_CUDA(cudaStreamEndCapture(stream.get(), &graph));
  cudaGraphExec_t exec;
  OPENMLA_TEST_CUDA(cudaGraphInstantiate(&exec, graph, 0));

  std::mt19937_64 rng(c.seed);
  for (int step = 0; step < 4; ++step) {
    std::vector<int> lens(c.batch_size);
    for (int i = 0; i < c.batch_size; ++i)
      lens[i] = std::uniform_int_distribution<int>(c.q_len, d.seqlens[i])(rng);
    if (step == 3) lens[2] = 0 + c.q_len;  // shortest legal causal length
    OPENMLA_TEST_CUDA(cudaMemcpy(dc.seqlens.get(), lens.data(), lens.size() * 4, cudaMemcpyHostToDevice));

    poison_outputs(dc);
    OPENMLA_TEST_CUDA(cudaGraphLaunch(exec, stream.get()));
    OPENMLA_TEST_CUDA(cudaStreamSynchronize(stream.get()));
    GpuDecodeResult replay = read_results(d, dc);

    poison_outputs(dc);
    plan.plan(a.cache_seqlens, dc.workspace.get(), dc.workspace.bytes(), stream.get());
    plan.run(a, dc.workspace.get(), dc.workspace.bytes(), stream.get());
    OPENMLA_TEST_CUDA(cudaStreamSynchronize(stream.get()));
    GpuDecodeResult eager = read_results(d, dc);

    ASSERT_EQ(0, std::memcmp(replay.out.data(), eager.out.data(), replay.out.size() * 2)) << "step " << step;
    ASSERT_EQ(0, std::memcmp(replay.lse.data(), eager.lse.data(), replay.lse.size() * 4)) << "step " << step;

    // And both are right for the new lengths.
    DecodeData now = d;
    now.seqlens = lens;
    now.c.seqlens = lens;
    ReferenceResult ref = run_reference(now, opt.fp8_math);
    CompareResult cmp = compare_decode(now, ref, eager.out, eager.lse, out_tol, lse_tol, slack);
    EXPECT_TRUE(cmp.ok) << "step " << step << ": " << cmp.message;
  }
  EXPECT_EQ(DecodePlan::read_device_errors(dc.workspace.get(), stream.get()), 0u);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
}

TEST(Decode, GraphReplayWithChangingLengthsEqualsEager) {
  expect_graph_replay_equals_eager(KVFormat::kBF16, {}, 1e-2, 1e-4, {}, 64);
  PlanOptions narrow;  // 32 rows on the narrow kernel (sm90; ignored by the portable kernel)
  narrow.sm90_rows_per_cta = 32;
  SCOPED_TRACE("sm90_rows_per_cta=32");
  expect_graph_replay_equals_eager(KVFormat::kBF16, narrow, 1e-2, 1e-4, {}, 16);
}

TEST(Decode, RunRejectsArgumentsThatDisagreeWithThePlan) {
  int device = 0;
  OPENMLA_TEST_CUDA(cudaGetDevice(&device));
  DecodeCase c;
  c.batch_size = 2;
  c.num_heads = 16;
  c.seqlens = {10, 20};
  DecodeData d = make_decode_data(c);
  DecodeShape other = d.shape;
  other.num_heads = 32;
  DecodePlan plan(other, {}, device);
  DeviceCase dc = upload_case(d);
  dc.workspace = DeviceBuffer(plan.workspace_bytes());
  DecodeArgs a = device_args(d, dc, device);
  try {
    plan.run(a, dc.workspace.get(), dc.workspace.bytes(), nullptr);
    FAIL() << "expected openmla::Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("q"), std::string::npos) << e.what();
  }
  // Arguments that match the plan, with too little workspace: the workspace check itself must fire
  // (with mismatching arguments the q check would answer first and hide it).
  DecodePlan matching(d.shape, {}, device);
  DeviceBuffer small(matching.workspace_bytes() / 2);
  try {
    matching.run(a, small.get(), small.bytes(), nullptr);
    FAIL() << "expected openmla::Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::kWorkspaceTooSmall);
    EXPECT_NE(std::string(e.what()).find("workspace_bytes"), std::string::npos) << e.what();
  }
}

// Backend resolution: kAuto takes the sm90a kernels on compute capability 9.0 for every cache format and shape
// and the portable kernel otherwise; a forced backend that cannot run is an error naming the reason.
TEST(Decode, BackendResolution) {
  int device = 0;
  OPENMLA_TEST_CUDA(cudaGetDevice(&device));
  const cudaDeviceProp prop = current_device_properties();
  const bool hopper = prop.major == 9 && prop.minor == 0;
  // The suite may run under OPENMLA_BACKEND (gpu_check.sh forces each backend); kAuto reads it.
  const char* env = std::getenv("OPENMLA_BACKEND");
  const std::string saved = env ? env : "";
  unsetenv("OPENMLA_BACKEND");
  DecodeShape bf16;
  bf16.batch_size = 2;
  bf16.num_heads = 16;
  DecodeShape fp8 = bf16;
  fp8.kv_format = KVFormat::kFP8DsMla;
  EXPECT_EQ(DecodePlan(bf16, {}, device).backend(), hopper ? Backend::kSm90 : Backend::kPortable);
  EXPECT_EQ(DecodePlan(fp8, {}, device).backend(), hopper ? Backend::kSm90 : Backend::kPortable);
  // TP8 decode from many requests (the narrow sm90 kernel on 16-bit caches), either cache kind.
  DecodeShape tp8 = bf16;
  tp8.batch_size = kernels::sm90::kNarrow16BitMinBatch;
  EXPECT_EQ(DecodePlan(tp8, {}, device).backend(), hopper ? Backend::kSm90 : Backend::kPortable);
  DecodeShape tp8_fp8 = tp8;
  tp8_fp8.kv_format = KVFormat::kFP8E4M3;
  EXPECT_EQ(DecodePlan(tp8_fp8, {}, device).backend(), hopper ? Backend::kSm90 : Backend::kPortable);
  PlanOptions portable;
  portable.backend = Backend::kPortable;
  EXPECT_EQ(DecodePlan(bf16, portable, device).backend(), Backend::kPortable);
  EXPECT_EQ(DecodePlan(fp8, portable, device).backend(), Backend::kPortable);
  PlanOptions sm90;
  sm90.backend = Backend::kSm90;
  for (const DecodeShape& shape : {bf16, fp8}) {
    if (hopper) {
      EXPECT_EQ(DecodePlan(shape, sm90, device).backend(), Backend::kSm90);
      continue;
    }
    try {  // a forced backend that cannot run is an error, never a silent fallback
      DecodePlan plan(shape, sm90, device);
      ADD_FAILURE() << "expected openmla::Error for the sm90 kernel on " << prop.name;
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), Status::kUnsupported);
      EXPECT_NE(std::string(e.what()).find("backend"), std::string::npos) << e.what();
    }
  }
  if (!saved.empty()) setenv("OPENMLA_BACKEND", saved.c_str(), 1);
}

}  // namespace
}  // namespace openmla::testing
