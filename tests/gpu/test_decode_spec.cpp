// GPU decode of speculative query shapes (ragged query counts, tree masks, up to 128 tokens, any head count) against the
// float64 reference: fresh random inputs, NaN in unused pages, outputs poisoned with NaN (rows no request owns
// must stay so), every cache format, the automatic plan and a 7-part split, graph replay with new counts and
// masks, and the device guards of the new arguments.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/spec_data.h"
#include "gpu/gpu_util.h"
#include "openmla/openmla.h"
#include "openmla/testing.h"

namespace openmla::testing {
namespace {

uint64_t fresh_seed() {
  static std::random_device rd;
  return (uint64_t(rd()) << 32) ^ rd();
}

// The environment's overrides, except a forced sm90 backend: these shapes run on the portable kernel
// everywhere (SpecDecode.Sm90IsRefusedForTheseShapes checks that the sm90 backend says so).
DecodePlan make_spec_plan(const DecodeShape& shape, int num_parts) {
  DecodeOverrides overrides = environment_overrides();
  if (overrides.backend == Backend::kSm90) overrides.backend = Backend::kAuto;
  DecodeOptions options;
  options.num_parts = num_parts;
  int device = 0;
  OPENMLA_TEST_CUDA(cudaGetDevice(&device));
  return make_decode_plan(shape, options, overrides, device);
}

struct DeviceSpec {
  DeviceBuffer q, cache, block_table, seqlens, q_indptr, mask, out, lse, workspace;
  DecodeArgs args;
};

DecodeArgs to_device(const SpecData& d, DeviceSpec& ds) {
  int device = 0;
  OPENMLA_TEST_CUDA(cudaGetDevice(&device));
  DecodeArgs a = d.host_args();
  auto on_device = [device](TensorView v, const DeviceBuffer& buffer) {
    v.data = buffer.get();
    v.device = DeviceType::kCUDA;
    v.device_id = device;
    return v;
  };
  ds.q = upload(d.q);
  ds.cache = upload(d.data.cache);
  ds.block_table = upload(d.data.block_table);
  ds.seqlens = upload(d.data.seqlens);
  a.q = on_device(a.q, ds.q);
  a.kv.data = on_device(a.kv.data, ds.cache);
  a.block_table = on_device(a.block_table, ds.block_table);
  a.cache_seqlens = on_device(a.cache_seqlens, ds.seqlens);
  if (d.c.ragged) {
    ds.q_indptr = upload(d.q_indptr);
    a.q_indptr = on_device(a.q_indptr, ds.q_indptr);
  }
  if (d.c.tree != TreeMask::kNone) {
    ds.mask = upload(d.mask);
    a.mask = on_device(a.mask, ds.mask);
  }
  const int64_t rows = d.total_q * d.c.base.num_heads;
  ds.out = DeviceBuffer(static_cast<size_t>(rows) * kHeadDimV * 2);
  ds.lse = DeviceBuffer(static_cast<size_t>(rows) * sizeof(float));
  const int64_t b = d.c.base.batch_size, s = d.c.base.q_len, h = d.c.base.num_heads;
  if (d.c.ragged) {
    a.out = make_tensor(ds.out.get(), d.c.base.q_dtype, {d.total_q, h, kHeadDimV}, DeviceType::kCUDA, device);
    a.lse = make_tensor(ds.lse.get(), DType::kFloat32, {d.total_q, h}, DeviceType::kCUDA, device);
  } else {
    a.out = make_tensor(ds.out.get(), d.c.base.q_dtype, {b, s, h, kHeadDimV}, DeviceType::kCUDA, device);
    a.lse = make_tensor(ds.lse.get(), DType::kFloat32, {b, s, h}, DeviceType::kCUDA, device);
  }
  return a;
}

void poison(DeviceSpec& ds, cudaStream_t stream) {
  OPENMLA_TEST_CUDA(cudaMemsetAsync(ds.out.get(), 0xFF, ds.out.bytes(), stream));
  OPENMLA_TEST_CUDA(cudaMemsetAsync(ds.lse.get(), 0xFF, ds.lse.bytes(), stream));
}

void expect_spec_matches_reference(const SpecCase& c, int num_parts) {
  SCOPED_TRACE(c.describe() + " num_parts=" + std::to_string(num_parts));
  const SpecData d = make_spec_data(c);
  const ReferenceResult ref = run_spec_reference(d);
  DecodePlan plan = make_spec_plan(d.shape, num_parts);
  EXPECT_EQ(plan.backend(), Backend::kPortable);
  DeviceSpec ds;
  const DecodeArgs a = to_device(d, ds);
  ds.workspace = DeviceBuffer(plan.workspace_bytes());
  DecodePlan::reset_device_errors(ds.workspace.get(), nullptr);
  poison(ds, nullptr);
  plan.plan(a.cache_seqlens, ds.workspace.get(), ds.workspace.bytes(), nullptr);
  plan.run(a, ds.workspace.get(), ds.workspace.bytes(), nullptr);
  OPENMLA_TEST_CUDA(cudaGetLastError());
  const CompareResult cmp = compare_spec(d, ref, download<uint16_t>(ds.out), download<float>(ds.lse));
  EXPECT_TRUE(cmp.ok) << cmp.message;
  const unsigned errors = DecodePlan::read_device_errors(ds.workspace.get(), nullptr);
  EXPECT_EQ(errors, ref.device_errors) << describe_device_errors(errors) << " vs reference "
                                       << describe_device_errors(ref.device_errors);
}

void expect_planned_and_split(const SpecCase& c) {
  expect_spec_matches_reference(c, 0);
  expect_spec_matches_reference(c, 7);
}

DecodeCase base(int q_len, int h_q, std::vector<int> seqlens, KVFormat format, DType q_dtype = DType::kBFloat16) {
  return spec_base_case(q_len, h_q, std::move(seqlens), format, fresh_seed(), q_dtype);
}

constexpr KVFormat kFormats[] = {KVFormat::kBF16, KVFormat::kFP16, KVFormat::kFP8E4M3, KVFormat::kFP8DsMla};
DType query_type(KVFormat f, bool fp16) {
  return f == KVFormat::kFP16 || (fp16 && f != KVFormat::kBF16) ? DType::kFloat16 : DType::kBFloat16;
}

// Decode, verify and draft-extend requests in one launch: 0, 1, 7, 16, 64 and 128 query tokens, KV lengths from
// the request's count to 20K (not multiples of 64), every head count and format.
TEST(SpecDecode, RaggedBatchesMatchReference) {
  for (int h : {8, 16, 32, 64, 128})
    for (KVFormat f : kFormats) {
      SpecCase c;
      const bool big = h >= 64;
      c.base = base(big ? 64 : 128, h, big ? std::vector<int>{64, 1, 20000, 71, 0, 300}
                                            : std::vector<int>{128, 1, 20000, 16, 0, 1000, 700},
                    f, query_type(f, h == 32));
      c.ragged = true;
      c.q_counts = big ? std::vector<int>{64, 1, 7, 16, 0, 33} : std::vector<int>{128, 1, 7, 16, 0, 64, 100};
      expect_planned_and_split(c);
    }
}

TEST(SpecDecode, RaggedNonCausal) {
  SpecCase c;
  c.base = base(16, 16, {5, 1, 0, 900, 64}, KVFormat::kBF16);
  c.base.causal = false;
  c.ragged = true;
  c.q_counts = {16, 1, 3, 9, 0};  // non-causal: a request may have more tokens than keys
  expect_planned_and_split(c);
}

TEST(SpecDecode, UniformQueriesUpTo128Tokens) {
  for (int s : {17, 64, 128})
    for (KVFormat f : {KVFormat::kBF16, KVFormat::kFP8DsMla}) {
      SpecCase c;
      c.base = base(s, s == 128 ? 8 : 16, {s, s + 1, 1000, 0, 4000}, f);
      expect_planned_and_split(c);
    }
}

// Head counts the sm90 kernels do not take (4 heads per rank at TP16, 1, 12, 100): the general-query variant pads the
// row layout to a power of two and neither reads nor writes the padding heads, uniform and ragged, split or not.
TEST(SpecDecode, AnyHeadCountMatchesReference) {
  for (int h : {1, 4, 12, 100})
    for (KVFormat f : {KVFormat::kBF16, KVFormat::kFP8DsMla}) {
      SpecCase uniform;
      uniform.base = base(2, h, {2, 65, 1000, 0}, f);
      expect_planned_and_split(uniform);
      SpecCase ragged = uniform;
      ragged.base.q_len = 8;
      ragged.base.seqlens = {8, 65, 1000, 0, 300};
      ragged.base.batch_size = 5;
      ragged.ragged = true;
      ragged.q_counts = {8, 1, 5, 0, 2};
      expect_planned_and_split(ragged);
    }
}

TEST(SpecDecode, TreeMasksMatchReference) {
  struct Variant {
    bool ragged;
    TreeMask kind;
    MaskRows rows;
  };
  const Variant variants[] = {{false, TreeMask::kShared, MaskRows::kTree},
                              {false, TreeMask::kPerRequest, MaskRows::kTree},
                              {false, TreeMask::kPerRequest, MaskRows::kRandomBits},
                              {true, TreeMask::kPacked, MaskRows::kTree},
                              {true, TreeMask::kPacked, MaskRows::kRandomBits},
                              {true, TreeMask::kShared, MaskRows::kTree}};
  for (const Variant& v : variants)
    for (int h : {16, 128})
      for (KVFormat f : kFormats) {
        SpecCase c;
        // Length = count: rows without a mask bit see nothing; lengths around page edges; 64-token trees.
        c.base = base(h == 128 ? 16 : 64, h, {16, 17, 64, 65, 0, 4000, 127}, f, query_type(f, h == 16));
        c.ragged = v.ragged;
        c.q_counts = {16, 5, 16, 1, 0, 16, 9};
        if (h != 128) c.q_counts = {16, 5, 64, 1, 0, 64, 33};
        if (!c.ragged) c.base.seqlens = {16, 17, 100, 65, 0, 4000, 127};
        if (!c.ragged && h != 128) c.base.seqlens = {64, 65, 100, 129, 0, 4000, 127};
        c.tree = v.kind;
        c.mask_rows = v.rows;
        expect_planned_and_split(c);
      }
}

// EAGLE's topk 4, depth 4 tree (16 draft tokens, parents before children) in every request.
TEST(SpecDecode, EagleTreeTopk4Depth4) {
  const std::vector<int> eagle = {-1, -1, -1, -1, 0, 0, 1, 2, 4, 4, 6, 7, 8, 9, 10, 11};
  for (KVFormat f : kFormats) {
    SpecCase c;
    c.base = base(16, 16, {4096 + 16, 16384 + 16, 100, 1000}, f);
    c.tree = TreeMask::kShared;
    c.parents = {eagle};
    expect_planned_and_split(c);
  }
}

TEST(SpecDecode, GuardsFlagBadOffsetsAndShortRequests) {
  SpecCase c;
  c.base = base(8, 16, {10, 3, 30, 40, 50}, KVFormat::kBF16);
  c.ragged = true;
  c.q_counts = {1, 8, 3, 4, 2};  // request 1: 8 tokens over 3 keys (causal): NaN rows
  const SpecData good = make_spec_data(c);
  SpecData bad = good;
  bad.q_indptr[5] = static_cast<int32_t>(bad.total_q) + 1;  // request 4 ends past q's rows
  bad.q_indptr[1] = -1;                                      // request 0 starts before them
  for (const SpecData* d : {&good, static_cast<const SpecData*>(&bad)}) {
    const ReferenceResult ref = run_spec_reference(*d);
    DecodePlan plan = make_spec_plan(d->shape, 0);
    DeviceSpec ds;
    const DecodeArgs a = to_device(*d, ds);
    ds.workspace = DeviceBuffer(plan.workspace_bytes());
    DecodePlan::reset_device_errors(ds.workspace.get(), nullptr);
    poison(ds, nullptr);
    plan.plan(a.cache_seqlens, ds.workspace.get(), ds.workspace.bytes(), nullptr);
    plan.run(a, ds.workspace.get(), ds.workspace.bytes(), nullptr);
    const CompareResult cmp = compare_spec(*d, ref, download<uint16_t>(ds.out), download<float>(ds.lse));
    EXPECT_TRUE(cmp.ok) << cmp.message;
    const unsigned errors = DecodePlan::read_device_errors(ds.workspace.get(), nullptr);
    EXPECT_EQ(errors, ref.device_errors) << describe_device_errors(errors);
    if (d == &bad) {  // requests 0, 1 and 4 malformed (request 1's short length is then not looked at)
      EXPECT_EQ(errors, unsigned(kDeviceErrorQueryOffsets));
    } else {
      EXPECT_EQ(errors, unsigned(kDeviceErrorSeqlenBelowQueryLen));
    }
  }
}

// One captured graph (plan + run), replayed with new query counts, masks and lengths written into the same
// device buffers, equals the reference every time.
TEST(SpecDecode, GraphReplayWithNewCountsAndMasks) {
  Stream stream;
  SpecCase c;
  c.base = base(16, 16, {500, 40, 1000, 16, 77, 2000}, KVFormat::kFP8DsMla);
  c.ragged = true;
  c.q_counts = {1, 16, 4, 16, 0, 9};
  c.total_q_padding = 40;  // room for the later counts
  c.tree = TreeMask::kPacked;
  SpecData d = make_spec_data(c);
  DecodePlan plan = make_spec_plan(d.shape, 0);
  DeviceSpec ds;
  const DecodeArgs a = to_device(d, ds);
  ds.workspace = DeviceBuffer(plan.workspace_bytes());
  DecodePlan::reset_device_errors(ds.workspace.get(), stream.get());
  cudaGraph_t graph;
  OPENMLA_TEST_CUDA(cudaStreamBeginCapture(stream.get(), cudaStreamCaptureModeThreadLocal));
  plan.plan(a.cache_seqlens, ds.workspace.get(), ds.workspace.bytes(), stream.get());
  plan.run(a, ds.workspace.get(), ds.workspace.bytes(), stream.get());
  OPENMLA_TEST_CUDA(cudaStreamEndCapture(stream.get(), &graph));
  cudaGraphExec_t exec;
  OPENMLA_TEST_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  std::mt19937_64 rng(c.base.seed);
  for (int step = 0; step < 4; ++step) {
    SCOPED_TRACE("replay " + std::to_string(step));
    if (step > 0) {  // new counts (within total_q), lengths (within the table) and tree rows
      int total = 0;
      for (int r = 0; r < c.base.batch_size; ++r) {
        const int n = std::uniform_int_distribution<int>(0, 16)(rng);
        d.q_indptr[r + 1] = d.q_indptr[r] + n;
        total += n;
        const int pages = d.data.max_pages - 1;  // the last column is an out-of-range filler
        int table_pages = 0;
        while (table_pages < pages && d.data.block_table[r * d.data.max_pages + table_pages] < d.data.num_pages)
          ++table_pages;
        d.data.seqlens[r] = std::uniform_int_distribution<int>(n, std::max(n, table_pages * kPageSize))(rng);
      }
      ASSERT_LE(total, d.total_q);
      for (int64_t t = 0; t < d.total_q; ++t) d.mask[t] = static_cast<int64_t>(rng());
      OPENMLA_TEST_CUDA(cudaMemcpyAsync(ds.q_indptr.get(), d.q_indptr.data(), ds.q_indptr.bytes(),
                                        cudaMemcpyHostToDevice, stream.get()));
      OPENMLA_TEST_CUDA(cudaMemcpyAsync(ds.seqlens.get(), d.data.seqlens.data(), ds.seqlens.bytes(),
                                        cudaMemcpyHostToDevice, stream.get()));
      OPENMLA_TEST_CUDA(cudaMemcpyAsync(ds.mask.get(), d.mask.data(), ds.mask.bytes(), cudaMemcpyHostToDevice,
                                        stream.get()));
    }
    poison(ds, stream.get());
    OPENMLA_TEST_CUDA(cudaGraphLaunch(exec, stream.get()));
    stream.sync();
    const ReferenceResult ref = run_spec_reference(d);
    const CompareResult cmp = compare_spec(d, ref, download<uint16_t>(ds.out), download<float>(ds.lse));
    EXPECT_TRUE(cmp.ok) << cmp.message;
  }
  EXPECT_EQ(DecodePlan::read_device_errors(ds.workspace.get(), stream.get()), 0u);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
}

TEST(SpecDecode, Sm90IsRefusedForTheseShapes) {
  const cudaDeviceProp prop = current_device_properties();
  if (prop.major != 9 || prop.minor != 0) GTEST_SKIP() << "sm90 backend needs compute capability 9.0";
  DecodeShape shape;
  shape.batch_size = 2;
  shape.q_len = 4;
  shape.num_heads = 16;
  shape.query_layout = QueryLayout::kRagged;
  DecodeOptions options;
  options.backend = Backend::kSm90;
  try {
    DecodePlan plan(shape, options);
    ADD_FAILURE() << "expected kUnsupported";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::kUnsupported) << e.what();
    EXPECT_NE(std::string(e.what()).find("ragged"), std::string::npos) << e.what();
  }
  options.backend = Backend::kAuto;
  EXPECT_EQ(DecodePlan(shape, options).backend(), Backend::kPortable);
}

}  // namespace
}  // namespace openmla::testing
