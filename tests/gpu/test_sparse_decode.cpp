// GPU sparse top-k decode against the float64 CPU reference (reference::sparse_decode): fresh random caches of
// every format and page block size, index lists with skips, duplicates and slots beyond the cache, per-request
// lengths, the attention sink and the extra cache; outputs poisoned with NaN before every run.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gpu_util.h"
#include "openmla/fp8.h"
#include "openmla/openmla.h"

namespace openmla::testing {
namespace {

// One cache of `pages` pages of `block` tokens in `format`: every token finite random data (values N(0, 1)).
struct HostCache {
  KVFormat format;
  int pages = 0, block = 0;
  std::vector<uint8_t> bytes;
  int64_t slots() const { return static_cast<int64_t>(pages) * block; }
  TensorView view(void* data, DeviceType device, int device_id) const {
    const int64_t w = format == KVFormat::kFP8DsMla ? 656 : 576;
    const DType t = format == KVFormat::kBF16 ? DType::kBFloat16
                    : format == KVFormat::kFP16 ? DType::kFloat16
                                                : DType::kUInt8;
    return make_tensor(data, t, {pages, block, 1, w}, device, device_id);
  }
};

HostCache make_cache(KVFormat format, int pages, int block, float e4m3_scale, std::mt19937_64& rng) {
  HostCache c{format, pages, block, {}};
  const int64_t token_bytes = kv_bytes_per_token(format);
  c.bytes.resize(static_cast<size_t>(c.slots() * token_bytes));
  std::normal_distribution<float> normal(0.f, 1.f);
  float v[576];
  for (int64_t t = 0; t < c.slots(); ++t) {
    for (float& x : v) x = normal(rng);
    uint8_t* token = c.bytes.data() + t * token_bytes;
    switch (format) {
      case KVFormat::kBF16:
      case KVFormat::kFP16:
        for (int j = 0; j < 576; ++j) {
          const uint16_t bits = format == KVFormat::kBF16 ? fp8::float_to_bf16(v[j]) : fp8::float_to_fp16(v[j]);
          std::memcpy(token + 2 * j, &bits, 2);
        }
        break;
      case KVFormat::kFP8E4M3:
        for (int j = 0; j < 576; ++j) token[j] = fp8::e4m3_encode_scaled(v[j], e4m3_scale);
        break;
      case KVFormat::kFP8DsMla: fp8::ds_mla_encode_token(v, v + 512, token); break;
    }
  }
  return c;
}

struct SparseCase {
  int b = 3, s_q = 1, h_q = 16;
  DType q_dtype = DType::kBFloat16;
  KVFormat format = KVFormat::kFP8DsMla;
  int pages = 40, block = 64;
  int topk = 2048;
  int extra_topk = 0, extra_pages = 8, extra_block = 2;
  bool topk_length = false, extra_topk_length = false, sink = false;
  float skip_fraction = 0.1f;      // indices set to -1
  bool bad_index = false;          // one index of request 1, token 0 beyond the cache
  bool all_skipped = false;        // every index of request 0 is -1
  bool negative_length = false;    // topk_length[2] = -1 (with topk_length)
  bool sink_inf_head = false;      // sink of head 1 = +inf
  uint64_t seed = 1;
  std::string describe() const {
    return "b=" + std::to_string(b) + " s_q=" + std::to_string(s_q) + " h_q=" + std::to_string(h_q) + " " +
           kv_format_name(format) + " block=" + std::to_string(block) + " topk=" + std::to_string(topk) +
           " extra_topk=" + std::to_string(extra_topk) + (topk_length ? " topk_length" : "") +
           (sink ? " sink" : "") + (bad_index ? " bad_index" : "") + (all_skipped ? " all_skipped" : "") +
           " seed=" + std::to_string(seed);
  }
};

// Host data of a case: inputs, and its reference outputs.
struct SparseData {
  SparseCase c;
  SparseDecodeShape shape;
  HostCache cache, extra;
  std::vector<uint16_t> q;
  std::vector<int32_t> indices, extra_indices, topk_length, extra_topk_length;
  std::vector<float> sink;
  float e4m3_scale = 0.37f;
  float softmax_scale = 0.0417f;
  std::vector<double> ref_out, ref_lse;
  unsigned ref_errors = 0;
};

std::vector<int32_t> random_indices(int rows, int topk, int64_t slots, float skip, std::mt19937_64& rng) {
  std::vector<int32_t> v(static_cast<size_t>(rows) * topk);
  std::uniform_int_distribution<int64_t> slot(0, slots - 1);
  std::uniform_real_distribution<float> u(0.f, 1.f);
  for (int32_t& x : v) x = u(rng) < skip ? -1 : static_cast<int32_t>(slot(rng));
  // Duplicates: a few indices repeated within their row.
  for (int r = 0; r < rows; ++r)
    if (topk >= 4) v[static_cast<size_t>(r) * topk + 3] = v[static_cast<size_t>(r) * topk + 1];
  return v;
}

SparseData make_sparse_data(const SparseCase& c) {
  SparseData d;
  d.c = c;
  std::mt19937_64 rng(c.seed);
  d.shape.batch_size = c.b;
  d.shape.q_len = c.s_q;
  d.shape.num_heads = c.h_q;
  d.shape.q_dtype = c.q_dtype;
  d.shape.kv_format = c.format;
  d.shape.topk = c.topk;
  d.shape.extra_topk = c.extra_topk;
  d.shape.topk_length = c.topk_length;
  d.shape.extra_topk_length = c.extra_topk_length;
  d.shape.attn_sink = c.sink;
  d.cache = make_cache(c.format, c.pages, c.block, d.e4m3_scale, rng);
  if (c.extra_topk > 0) d.extra = make_cache(c.format, c.extra_pages, c.extra_block, d.e4m3_scale, rng);
  std::normal_distribution<float> normal(0.f, 1.f);
  d.q.resize(static_cast<size_t>(c.b) * c.s_q * c.h_q * 576);
  for (uint16_t& bits : d.q)
    bits = c.q_dtype == DType::kFloat16 ? fp8::float_to_fp16(normal(rng)) : fp8::float_to_bf16(normal(rng));
  const int rows = c.b * c.s_q;
  d.indices = random_indices(rows, c.topk, d.cache.slots(), c.skip_fraction, rng);
  if (c.all_skipped)
    for (int i = 0; i < c.s_q * c.topk; ++i) d.indices[i] = -1;
  if (c.bad_index && c.b > 1) d.indices[static_cast<size_t>(c.s_q) * c.topk + c.topk / 2] = static_cast<int32_t>(d.cache.slots());
  if (c.extra_topk > 0) d.extra_indices = random_indices(rows, c.extra_topk, d.extra.slots(), c.skip_fraction, rng);
  std::uniform_int_distribution<int> len(0, c.topk + 10);
  if (c.topk_length) {
    d.topk_length.resize(c.b);
    for (int32_t& n : d.topk_length) n = len(rng);
    d.topk_length[0] = c.topk;  // one whole list
    if (c.negative_length && c.b > 2) d.topk_length[2] = -1;
  }
  if (c.extra_topk_length) {
    std::uniform_int_distribution<int> elen(0, c.extra_topk);
    d.extra_topk_length.resize(c.b);
    for (int32_t& n : d.extra_topk_length) n = elen(rng);
  }
  if (c.sink) {
    d.sink.resize(c.h_q);
    for (float& x : d.sink) x = normal(rng) + 2.f;
    if (c.sink_inf_head && c.h_q > 1) d.sink[1] = std::numeric_limits<float>::infinity();
  }
  return d;
}

struct Views {
  SparseDecodeArgs args;
  TensorView topk_length, extra_topk_length;
};

// Views of the case's tensors over the given storage (host vectors for the reference, device buffers for the GPU).
Views views(const SparseData& d, DeviceType dev, int id, void* q, void* cache, void* indices, void* extra, void* extra_indices,
            void* sink, void* out, DType out_dtype, void* lse, DType lse_dtype, void* topk_length, void* extra_topk_length) {
  const SparseCase& c = d.c;
  Views v;
  v.args.q = make_tensor(q, c.q_dtype, {c.b, c.s_q, c.h_q, 576}, dev, id);
  v.args.kv.format = c.format;
  v.args.kv.scale = d.e4m3_scale;
  v.args.kv.data = d.cache.view(cache, dev, id);
  v.args.indices = make_tensor(indices, DType::kInt32, {c.b, c.s_q, c.topk}, dev, id);
  if (c.extra_topk > 0) {
    v.args.extra_kv.format = c.format;
    v.args.extra_kv.scale = d.e4m3_scale;
    v.args.extra_kv.data = d.extra.view(extra, dev, id);
    v.args.extra_indices = make_tensor(extra_indices, DType::kInt32, {c.b, c.s_q, c.extra_topk}, dev, id);
  }
  if (c.sink) v.args.attn_sink = make_tensor(sink, DType::kFloat32, {c.h_q}, dev, id);
  v.args.softmax_scale = d.softmax_scale;
  v.args.out = make_tensor(out, out_dtype, {c.b, c.s_q, c.h_q, 512}, dev, id);
  v.args.lse = make_tensor(lse, lse_dtype, {c.b, c.s_q, c.h_q}, dev, id);
  if (c.topk_length) v.topk_length = make_tensor(topk_length, DType::kInt32, {c.b}, dev, id);
  if (c.extra_topk_length) v.extra_topk_length = make_tensor(extra_topk_length, DType::kInt32, {c.b}, dev, id);
  return v;
}

void run_reference(SparseData& d) {
  const size_t rows = static_cast<size_t>(d.c.b) * d.c.s_q * d.c.h_q;
  d.ref_out.assign(rows * 512, 0.0);
  d.ref_lse.assign(rows, 0.0);
  Views v = views(d, DeviceType::kCPU, 0, d.q.data(), d.cache.bytes.data(), d.indices.data(), d.extra.bytes.data(),
                  d.extra_indices.data(), d.sink.data(), d.ref_out.data(), DType::kFloat64, d.ref_lse.data(),
                  DType::kFloat64, d.topk_length.data(), d.extra_topk_length.data());
  d.ref_errors = reference::sparse_decode(v.args, d.shape, v.topk_length, v.extra_topk_length);
}

struct GpuResult {
  std::vector<uint16_t> out;
  std::vector<float> lse;
  unsigned errors = 0;
};

struct DeviceData {
  DeviceBuffer q, cache, indices, extra, extra_indices, sink, out, lse, topk_length, extra_topk_length, workspace;
};

DeviceData upload_data(const SparseData& d) {
  DeviceData dd;
  dd.q = upload(d.q);
  dd.cache = upload(d.cache.bytes);
  dd.indices = upload(d.indices);
  dd.extra = upload(d.extra.bytes);
  dd.extra_indices = upload(d.extra_indices);
  dd.sink = upload(d.sink);
  dd.topk_length = upload(d.topk_length);
  dd.extra_topk_length = upload(d.extra_topk_length);
  const size_t rows = static_cast<size_t>(d.c.b) * d.c.s_q * d.c.h_q;
  dd.out = DeviceBuffer(rows * 512 * 2);
  dd.lse = DeviceBuffer(rows * 4);
  return dd;
}

Views device_views(const SparseData& d, DeviceData& dd, int device) {
  return views(d, DeviceType::kCUDA, device, dd.q.get(), dd.cache.get(), dd.indices.get(), dd.extra.get(),
               dd.extra_indices.get(), dd.sink.get(), dd.out.get(), d.c.q_dtype, dd.lse.get(), DType::kFloat32,
               dd.topk_length.get(), dd.extra_topk_length.get());
}

GpuResult run_gpu(const SparseData& d, int num_parts = 0) {
  int device = 0;
  OPENMLA_TEST_CUDA(cudaGetDevice(&device));
  DecodeOptions options;
  options.num_parts = num_parts;
  SparseDecodePlan plan(d.shape, options, device);
  DeviceData dd = upload_data(d);
  dd.workspace = DeviceBuffer(plan.workspace_bytes());
  SparseDecodePlan::reset_device_errors(dd.workspace.get(), nullptr);
  OPENMLA_TEST_CUDA(cudaMemset(dd.out.get(), 0xFF, dd.out.bytes()));
  OPENMLA_TEST_CUDA(cudaMemset(dd.lse.get(), 0xFF, dd.lse.bytes()));
  Views v = device_views(d, dd, device);
  plan.plan(v.topk_length, v.extra_topk_length, dd.workspace.get(), dd.workspace.bytes(), nullptr);
  plan.run(v.args, dd.workspace.get(), dd.workspace.bytes(), nullptr);
  OPENMLA_TEST_CUDA(cudaGetLastError());
  GpuResult r;
  r.out = download<uint16_t>(dd.out);
  r.lse = download<float>(dd.lse);
  r.errors = SparseDecodePlan::read_device_errors(dd.workspace.get(), nullptr);
  return r;
}

double half_value(uint16_t bits, DType t) {
  return t == DType::kFloat16 ? fp8::fp16_to_float(bits) : fp8::bf16_to_float(bits);
}

// NaN / inf positions identical; per query token, max|out - ref| <= out_tol * max|ref| and |lse - ref| <=
// lse_tol * max(1, |ref|).
void expect_matches(const SparseData& d, const GpuResult& g, double out_tol = 1e-2, double lse_tol = 1e-4) {
  ASSERT_EQ(g.errors, d.ref_errors) << "device errors " << describe_device_errors(g.errors) << " vs reference "
                                    << describe_device_errors(d.ref_errors);
  const int h = d.c.h_q;
  const int tokens = d.c.b * d.c.s_q;
  int64_t checked = 0;
  for (int t = 0; t < tokens; ++t) {
    double ref_max = 0.0;
    for (int k = t * h * 512; k < (t + 1) * h * 512; ++k)
      if (std::isfinite(d.ref_out[k])) ref_max = std::max(ref_max, std::fabs(d.ref_out[k]));
    for (int k = t * h * 512; k < (t + 1) * h * 512; ++k) {
      const double got = half_value(g.out[k], d.c.q_dtype), want = d.ref_out[k];
      ASSERT_EQ(std::isnan(got), std::isnan(want)) << "out[" << k << "] = " << got << ", reference " << want;
      if (std::isnan(want)) continue;
      ASSERT_LE(std::fabs(got - want), out_tol * std::max(ref_max, 1e-30)) << "out[" << k << "] token " << t;
      ++checked;
    }
    for (int k = t * h; k < (t + 1) * h; ++k) {
      const double got = g.lse[k], want = d.ref_lse[k];
      ASSERT_EQ(std::isnan(got), std::isnan(want)) << "lse[" << k << "] = " << got << ", reference " << want;
      if (std::isnan(want)) continue;
      if (std::isinf(want)) {
        ASSERT_EQ(got, want) << "lse[" << k << "]";
        continue;
      }
      ASSERT_LE(std::fabs(got - want), lse_tol * std::max(1.0, std::fabs(want))) << "lse[" << k << "]";
    }
  }
  EXPECT_GT(checked, 0);
}

uint64_t fresh_seed() {
  static std::random_device rd;
  return (uint64_t(rd()) << 32) ^ rd();
}

void expect_case(SparseCase c) {
  c.seed = fresh_seed();
  SCOPED_TRACE(c.describe());
  SparseData d = make_sparse_data(c);
  run_reference(d);
  expect_matches(d, run_gpu(d));
  expect_matches(d, run_gpu(d, 7));  // few parts: long segments, and partial rows for split tokens
}

TEST(SparseDecode, EveryFormatAndHeadCount) {
  for (KVFormat f : {KVFormat::kFP8DsMla, KVFormat::kBF16, KVFormat::kFP16, KVFormat::kFP8E4M3})
    for (int h : {16, 64, 128, 12}) {
      SparseCase c;
      c.format = f;
      c.q_dtype = f == KVFormat::kFP16 ? DType::kFloat16 : DType::kBFloat16;
      c.h_q = h;
      c.topk = 320;
      expect_case(c);
    }
}

TEST(SparseDecode, Topk2048AndOddTopkWithMtp) {
  for (int topk : {2048, 77}) {
    SparseCase c;
    c.s_q = 2;
    c.topk = topk;
    c.h_q = 64;
    expect_case(c);
  }
}

TEST(SparseDecode, LengthsSkipsDuplicatesAndEmptyTokens) {
  SparseCase c;
  c.b = 4;
  c.topk = 200;
  c.topk_length = true;
  c.all_skipped = true;
  c.skip_fraction = 0.3f;
  expect_case(c);
}

TEST(SparseDecode, AttentionSink) {
  SparseCase c;
  c.sink = true;
  c.sink_inf_head = true;
  c.topk = 130;
  c.all_skipped = true;
  expect_case(c);
}

TEST(SparseDecode, ExtraCacheWithItsOwnPageBlockAndLengths) {
  for (int extra_block : {2, 64}) {
    SparseCase c;
    c.extra_topk = 96;
    c.extra_block = extra_block;
    c.extra_pages = extra_block == 2 ? 300 : 12;
    c.topk = 128;
    c.topk_length = true;
    c.extra_topk_length = true;
    c.sink = true;
    expect_case(c);
  }
}

TEST(SparseDecode, MainCacheWithOtherPageBlocks) {
  for (int block : {1, 32, 256}) {
    SparseCase c;
    c.block = block;
    c.pages = 2560 / block;
    c.topk = 256;
    expect_case(c);
  }
}

TEST(SparseDecode, BadIndicesAndLengthsAreFlaggedAndPoisonOnlyTheirTokens) {
  SparseCase c;
  c.b = 3;
  c.s_q = 2;
  c.topk = 100;
  c.bad_index = true;
  c.topk_length = true;
  c.negative_length = true;
  c.seed = fresh_seed();
  SCOPED_TRACE(c.describe());
  SparseData d = make_sparse_data(c);
  run_reference(d);
  EXPECT_EQ(d.ref_errors, unsigned{kDeviceErrorSparseIndex | kDeviceErrorNegativeSeqlen});
  expect_matches(d, run_gpu(d));
}

TEST(SparseDecode, GraphReplayWithNewIndicesAndLengths) {
  int device = 0;
  OPENMLA_TEST_CUDA(cudaGetDevice(&device));
  SparseCase c;
  c.b = 4;
  c.topk = 256;
  c.topk_length = true;
  c.seed = fresh_seed();
  SparseData d = make_sparse_data(c);
  SparseDecodePlan plan(d.shape, {}, device);
  DeviceData dd = upload_data(d);
  dd.workspace = DeviceBuffer(plan.workspace_bytes());
  Stream stream;
  SparseDecodePlan::reset_device_errors(dd.workspace.get(), stream.get());
  Views v = device_views(d, dd, device);
  cudaGraph_t graph;
  OPENMLA_TEST_CUDA(cudaStreamBeginCapture(stream.get(), cudaStreamCaptureModeThreadLocal));
  plan.plan(v.topk_length, v.extra_topk_length, dd.workspace.get(), dd.workspace.bytes(), stream.get());
  plan.run(v.args, dd.workspace.get(), dd.workspace.bytes(), stream.get());
  OPENMLA_TEST_CUDA(cudaStreamEndCapture(stream.get(), &graph));
  cudaGraphExec_t exec;
  OPENMLA_TEST_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  for (int step = 0; step < 3; ++step) {
    SparseCase next = c;
    next.seed = c.seed + 1 + step;
    SparseData now = make_sparse_data(next);
    now.cache = d.cache;  // the same cache, new indices and lengths
    now.q = d.q;
    run_reference(now);
    OPENMLA_TEST_CUDA(cudaMemcpy(dd.indices.get(), now.indices.data(), now.indices.size() * 4, cudaMemcpyHostToDevice));
    OPENMLA_TEST_CUDA(
        cudaMemcpy(dd.topk_length.get(), now.topk_length.data(), now.topk_length.size() * 4, cudaMemcpyHostToDevice));
    OPENMLA_TEST_CUDA(cudaMemset(dd.out.get(), 0xFF, dd.out.bytes()));
    OPENMLA_TEST_CUDA(cudaGraphLaunch(exec, stream.get()));
    OPENMLA_TEST_CUDA(cudaStreamSynchronize(stream.get()));
    GpuResult g;
    g.out = download<uint16_t>(dd.out);
    g.lse = download<float>(dd.lse);
    g.errors = SparseDecodePlan::read_device_errors(dd.workspace.get(), stream.get());
    SCOPED_TRACE("step " + std::to_string(step));
    expect_matches(now, g);
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
}

TEST(SparseDecode, RejectsWhatCannotRun) {
  SparseDecodeShape shape;
  shape.batch_size = 2;
  shape.num_heads = 16;
  shape.topk = 64;
  DecodeOptions sm90;
  sm90.backend = Backend::kSm90;
  try {
    SparseDecodePlan plan(shape, sm90);
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::kUnsupported);
    EXPECT_NE(std::string(e.what()).find("portable"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace openmla::testing
