// GraphRunner and ForwardBuffers on the GPU: decode, target-verify and draft-decode captured for
// every bucket and replayed over a speculative loop whose lengths change every step. Each step
// runs eagerly and from the graph on the same state; outputs must be bit-identical, padding rows
// must come out empty (out 0, lse -inf), real rows must match the float64 CPU oracle, the device
// error word must stay clear, and the pool invariant must hold. A separate test shows that the
// per-step path never waits for the device.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gpu/gpu_util.h"
#include "openmla/decode.h"
#include "openmla/error.h"
#include "openmla/fp8.h"
#include "openmla/reference.h"
#include "openmla/runtime/graph_runner.h"
#include "openmla/write_kv.h"

namespace openmla::testing {
namespace {

using runtime::ForwardMode;
using runtime::GraphRunner;
using runtime::GraphRunnerConfig;
using runtime::PagePool;
using runtime::RequestId;
using runtime::StepContext;

constexpr int kLayers = 2;
constexpr int kHeads = 16;
constexpr int kMaxBatch = 8;
constexpr int kVerifyLen = 4;   // draft tokens per verify (MTP 3 steps + 1)
constexpr int kDraftSteps = 3;
constexpr int kPoolPages = 256;
constexpr int kMaxPages = 40;   // 2560 tokens per request
constexpr uint16_t kBf16NaN = 0x7fc0;

// The engine side of the test: fixed device buffers (addresses never change, as graphs require)
// and the per-step callback that writes the new tokens' KV and runs attention, per layer.
struct Engine {
  static constexpr int kMaxRows = kMaxBatch * kVerifyLen;  // padded_batch * q_len at most
  DeviceBuffer cache[kLayers];
  DeviceBuffer q[kLayers];                    // [rows, h, 576] bf16
  DeviceBuffer kv_latent;                     // [rows, 512] bf16
  DeviceBuffer k_rope;                        // [rows, 64] bf16
  DeviceBuffer out[kLayers][kDraftSteps];     // [rows, h, 512] bf16, one per draft step
  DeviceBuffer lse[kLayers][kDraftSteps];     // [rows, h] float
  float scale = 1.0f / std::sqrt(192.0f);

  Engine() {
    const size_t cache_bytes = size_t{kPoolPages} * 64 * 576 * 2;
    for (int l = 0; l < kLayers; ++l) {
      cache[l] = DeviceBuffer(cache_bytes);
      std::vector<uint16_t> nan(cache_bytes / 2, kBf16NaN);  // never-written KV poisons any stray read
      OPENMLA_TEST_CUDA(cudaMemcpy(cache[l].get(), nan.data(), cache_bytes, cudaMemcpyHostToDevice));
      q[l] = DeviceBuffer(size_t{kMaxRows} * kHeads * 576 * 2);
      for (int s = 0; s < kDraftSteps; ++s) {
        out[l][s] = DeviceBuffer(size_t{kMaxRows} * kHeads * 512 * 2);
        lse[l][s] = DeviceBuffer(size_t{kMaxRows} * kHeads * 4);
      }
    }
    kv_latent = DeviceBuffer(size_t{kMaxRows} * 512 * 2);
    k_rope = DeviceBuffer(size_t{kMaxRows} * 64 * 2);
  }

  KVCache cache_view(int l) const {
    KVCache kv;
    kv.data = make_tensor(cache[l].get(), DType::kBFloat16, {kPoolPages, 64, 576}, DeviceType::kCUDA);
    kv.format = KVFormat::kBF16;
    return kv;
  }

  void forward(const StepContext& ctx, cudaStream_t stream) const {
    const int64_t b = ctx.padded_batch, s = ctx.q_len, rows = b * s;
    for (int l = 0; l < kLayers; ++l) {
      WriteKVArgs w;
      // Every layer stores the same new-token KV (enough to test slots; layers differ by q).
      w.kv_latent = make_tensor(kv_latent.get(), DType::kBFloat16, {rows, 512}, DeviceType::kCUDA);
      w.k_rope = make_tensor(k_rope.get(), DType::kBFloat16, {rows, 64}, DeviceType::kCUDA);
      w.slots = ctx.write_slots;
      w.cache = cache_view(l);
      write_kv(w, stream);
      ctx.attention(make_tensor(q[l].get(), DType::kBFloat16, {b, s, kHeads, 576}, DeviceType::kCUDA), cache_view(l),
                    scale, make_tensor(out[l][ctx.step].get(), DType::kBFloat16, {b, s, kHeads, 512}, DeviceType::kCUDA),
                    make_tensor(lse[l][ctx.step].get(), DType::kFloat32, {b, s, kHeads}, DeviceType::kCUDA), stream);
    }
  }
};

std::vector<uint16_t> random_bf16(std::mt19937_64& rng, size_t n) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<uint16_t> v(n);
  for (auto& x : v) x = fp8::float_to_bf16(u(rng));
  return v;
}

struct StepOutputs {
  std::vector<uint16_t> out[kLayers][kDraftSteps];
  std::vector<float> lse[kLayers][kDraftSteps];
};

class GraphRunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    GraphRunnerConfig config;
    config.num_heads = kHeads;
    config.max_batch = kMaxBatch;
    config.max_pages_per_request = kMaxPages;
    config.verify_q_len = kVerifyLen;
    config.draft_steps = kDraftSteps;
    runner = std::make_unique<GraphRunner>(config, [this](const StepContext& ctx, cudaStream_t s) {
      engine.forward(ctx, s);
    });
    runner->capture(stream.get());
  }

  // Fresh q and new-token KV for `rows` rows (padding rows included: they must not matter).
  void new_inputs(int rows) {
    for (int l = 0; l < kLayers; ++l) {
      q_host[l] = random_bf16(rng, size_t(rows) * kHeads * 576);
      OPENMLA_TEST_CUDA(cudaMemcpy(engine.q[l].get(), q_host[l].data(), q_host[l].size() * 2, cudaMemcpyHostToDevice));
    }
    const auto lat = random_bf16(rng, size_t(rows) * 512), rope = random_bf16(rng, size_t(rows) * 64);
    OPENMLA_TEST_CUDA(cudaMemcpy(engine.kv_latent.get(), lat.data(), lat.size() * 2, cudaMemcpyHostToDevice));
    OPENMLA_TEST_CUDA(cudaMemcpy(engine.k_rope.get(), rope.data(), rope.size() * 2, cudaMemcpyHostToDevice));
  }

  StepOutputs outputs(int rows, int steps) {
    stream.sync();
    StepOutputs o;
    for (int l = 0; l < kLayers; ++l)
      for (int s = 0; s < steps; ++s) {
        o.out[l][s] = download<uint16_t>(engine.out[l][s], size_t(rows) * kHeads * 512);
        o.lse[l][s] = download<float>(engine.lse[l][s], size_t(rows) * kHeads);
      }
    return o;
  }

  // Poison the outputs so that rows a run fails to write cannot match by accident.
  void poison_outputs() {
    for (int l = 0; l < kLayers; ++l)
      for (int s = 0; s < kDraftSteps; ++s) {
        OPENMLA_TEST_CUDA(cudaMemset(engine.out[l][s].get(), 0x7f, engine.out[l][s].bytes()));
        OPENMLA_TEST_CUDA(cudaMemset(engine.lse[l][s].get(), 0x7f, engine.lse[l][s].bytes()));
      }
  }

  // Runs one step eagerly then from the graph; returns the graph's outputs after checking that
  // they are bit-identical to the eager ones.
  StepOutputs run_both(ForwardMode mode, const std::vector<RequestId>& reqs, runtime::ForwardMeta* meta_out) {
    const int n = static_cast<int>(reqs.size());
    runtime::ForwardMeta meta;
    auto run = [&](bool graph) {
      poison_outputs();
      switch (mode) {
        case ForwardMode::kDecode: meta = runner->decode(pool, reqs.data(), n, stream.get(), graph); break;
        case ForwardMode::kTargetVerify: meta = runner->target_verify(pool, reqs.data(), n, stream.get(), graph); break;
        default: meta = runner->draft_decode(pool, reqs.data(), n, stream.get(), graph);
      }
      return outputs(meta.padded_batch * meta.q_len, meta.num_steps);
    };
    const StepOutputs eager = run(false);
    const StepOutputs graph = run(true);
    for (int l = 0; l < kLayers; ++l)
      for (int s = 0; s < meta.num_steps; ++s) {
        EXPECT_EQ(0, std::memcmp(eager.out[l][s].data(), graph.out[l][s].data(), eager.out[l][s].size() * 2))
            << forward_mode_name(mode) << " layer " << l << " step " << s << ": graph out differs from eager";
        EXPECT_EQ(0, std::memcmp(eager.lse[l][s].data(), graph.lse[l][s].data(), eager.lse[l][s].size() * 4))
            << forward_mode_name(mode) << " layer " << l << " step " << s << ": graph lse differs from eager";
      }
    *meta_out = meta;
    return graph;
  }

  // Padding rows empty; real rows of layer 0's last step against the CPU oracle.
  void check_rows(const runtime::ForwardMeta& meta, const StepOutputs& o, const std::vector<RequestId>& reqs,
                  const std::vector<int64_t>& seqlens, bool reference) {
    const int s_q = meta.q_len, step = meta.num_steps - 1;
    for (int l = 0; l < kLayers; ++l)
      for (int r = meta.batch_size; r < meta.padded_batch; ++r)
        for (int i = 0; i < s_q * kHeads; ++i) {
          const size_t row = size_t(r) * s_q * kHeads + i;
          ASSERT_EQ(o.lse[l][step][row], -std::numeric_limits<float>::infinity()) << "padding row " << r;
          for (int c = 0; c < 512; ++c) ASSERT_EQ(o.out[l][step][row * 512 + c] & 0x7fff, 0) << "padding row " << r;
        }
    if (!reference) return;
    const int n = meta.batch_size;
    std::vector<uint16_t> cache = download<uint16_t>(engine.cache[0]);
    std::vector<int32_t> table(size_t(n) * kMaxPages, 0), lens(n);
    for (int r = 0; r < n; ++r) {
      const auto& pages = pool.page_ids(reqs[r]);
      std::copy(pages.begin(), pages.end(), table.begin() + size_t(r) * kMaxPages);
      lens[r] = static_cast<int32_t>(seqlens[r]);
    }
    std::vector<float> ref_out(size_t(n) * s_q * kHeads * 512), ref_lse(size_t(n) * s_q * kHeads);
    DecodeShape shape;
    shape.batch_size = n;
    shape.q_len = s_q;
    shape.num_heads = kHeads;
    DecodeArgs a;
    a.q = make_tensor(q_host[0].data(), DType::kBFloat16, {n, s_q, kHeads, 576});
    a.kv.data = make_tensor(cache.data(), DType::kBFloat16, {kPoolPages, 64, 576});
    a.block_table = make_tensor(table.data(), DType::kInt32, {n, kMaxPages});
    a.cache_seqlens = make_tensor(lens.data(), DType::kInt32, {n});
    a.softmax_scale = engine.scale;
    a.out = make_tensor(ref_out.data(), DType::kFloat32, {n, s_q, kHeads, 512});
    a.lse = make_tensor(ref_lse.data(), DType::kFloat32, {n, s_q, kHeads});
    EXPECT_EQ(reference::decode(a, shape), 0u);
    for (int r = 0; r < n; ++r) {
      double max_ref = 0, max_err = 0, max_lse_err = 0;
      for (size_t i = size_t(r) * s_q * kHeads; i < size_t(r + 1) * s_q * kHeads; ++i) {
        max_lse_err = std::max(max_lse_err, std::abs(double(o.lse[0][step][i]) - ref_lse[i]) /
                                                std::max(1.0, std::abs(double(ref_lse[i]))));
        for (int c = 0; c < 512; ++c) {
          const double ref = ref_out[i * 512 + c];
          max_ref = std::max(max_ref, std::abs(ref));
          max_err = std::max(max_err, std::abs(double(fp8::bf16_to_float(o.out[0][step][i * 512 + c])) - ref));
        }
      }
      // bf16 output: one rounding of values <= max|ref| plus accumulation noise.
      EXPECT_LE(max_err, 1e-2 * max_ref + 1e-6) << forward_mode_name(meta.mode) << " row " << r;
      EXPECT_LE(max_lse_err, 1e-4) << forward_mode_name(meta.mode) << " row " << r;
    }
  }

  // A request whose prompt KV is written through the pool's slots (write_kv, layer by layer).
  RequestId add_request(int64_t prompt) {
    const RequestId id = pool.create(prompt);
    std::vector<int32_t> slots = pool.slots(id, 0, prompt);
    DeviceBuffer d_slots = upload(slots);
    DeviceBuffer lat = upload(random_bf16(rng, size_t(prompt) * 512));
    DeviceBuffer rope = upload(random_bf16(rng, size_t(prompt) * 64));
    for (int l = 0; l < kLayers; ++l) {
      WriteKVArgs w;
      w.kv_latent = make_tensor(lat.get(), DType::kBFloat16, {prompt, 512}, DeviceType::kCUDA);
      w.k_rope = make_tensor(rope.get(), DType::kBFloat16, {prompt, 64}, DeviceType::kCUDA);
      w.slots = make_tensor(d_slots.get(), DType::kInt32, {prompt}, DeviceType::kCUDA);
      w.cache = engine.cache_view(l);
      write_kv(w, stream.get());
    }
    stream.sync();
    return id;
  }

  Stream stream;
  Engine engine;
  PagePool pool{kPoolPages};
  std::unique_ptr<GraphRunner> runner;
  std::mt19937_64 rng{2024};
  std::vector<uint16_t> q_host[kLayers];
};

TEST_F(GraphRunnerTest, SpeculativeLoopGraphsMatchEagerAndTheOracle) {
  std::vector<RequestId> live;
  const int64_t prompts[] = {1, 63, 64, 65, 200, 300, 511, 640, 17, 128, 700, 5};
  for (int64_t p : prompts) live.push_back(add_request(p));
  int buckets_seen = 0;
  std::vector<bool> seen(kMaxBatch + 1, false);
  for (int iter = 0; iter < 24; ++iter) {
    std::shuffle(live.begin(), live.end(), rng);
    const int n = 1 + static_cast<int>(rng() % kMaxBatch);
    std::vector<RequestId> batch(live.begin(), live.begin() + n);
    const bool reference = iter % 3 == 0;
    runtime::ForwardMeta meta;
    std::vector<int64_t> seqlens;
    const int kind = iter % 3;
    if (kind == 0) {  // plain decode: one new token each
      for (RequestId r : batch) pool.append(r);
      for (RequestId r : batch) seqlens.push_back(pool.total_tokens(r));
      new_inputs(runner->bucket_for(n));
      const StepOutputs o = run_both(ForwardMode::kDecode, batch, &meta);
      check_rows(meta, o, batch, seqlens, reference);
    } else if (kind == 1) {  // draft decode over kDraftSteps steps, then verify kVerifyLen, then commit
      for (RequestId r : batch) pool.reserve(r, kVerifyLen);
      for (RequestId r : batch) seqlens.push_back(pool.committed_tokens(r) + kDraftSteps);
      new_inputs(runner->bucket_for(n));
      const StepOutputs d = run_both(ForwardMode::kDraftDecode, batch, &meta);
      check_rows(meta, d, batch, seqlens, false);
      seqlens.clear();
      for (RequestId r : batch) seqlens.push_back(pool.committed_tokens(r) + kVerifyLen);
      new_inputs(runner->bucket_for(n) * kVerifyLen);
      const StepOutputs v = run_both(ForwardMode::kTargetVerify, batch, &meta);
      check_rows(meta, v, batch, seqlens, true);
      for (RequestId r : batch) pool.commit(r, static_cast<int64_t>(rng() % (kVerifyLen + 1)));
    } else {  // verify alone with a reservation larger than the draft (only kVerifyLen are queries)
      for (RequestId r : batch) pool.reserve(r, kVerifyLen + 3);
      for (RequestId r : batch) seqlens.push_back(pool.committed_tokens(r) + kVerifyLen);
      new_inputs(runner->bucket_for(n) * kVerifyLen);
      const StepOutputs v = run_both(ForwardMode::kTargetVerify, batch, &meta);
      check_rows(meta, v, batch, seqlens, reference);
      for (RequestId r : batch) pool.commit(r, static_cast<int64_t>(rng() % (kVerifyLen + 1)));
    }
    if (!seen[meta.padded_batch]) ++buckets_seen, seen[meta.padded_batch] = true;
    ASSERT_EQ(pool.check_invariants(), "");
    ASSERT_EQ(runner->read_device_errors(stream.get()), 0u)
        << describe_device_errors(runner->read_device_errors(stream.get())) << " at iteration " << iter;
    if (HasFatalFailure()) return;
  }
  EXPECT_GE(buckets_seen, 3);
  for (RequestId r : live) pool.release(r);
  EXPECT_EQ(pool.free_pages(), kPoolPages);
}

TEST_F(GraphRunnerTest, UseGraphWithoutCaptureAndBadBatchesAreErrors) {
  RequestId a = add_request(10);
  pool.append(a);
  EXPECT_THROW(runner->decode(pool, &a, kMaxBatch + 1, stream.get()), Error);
  RequestId twice[] = {a, a};
  EXPECT_THROW(runner->decode(pool, twice, 2, stream.get()), Error);
  EXPECT_THROW(runner->target_verify(pool, &a, 1, stream.get()), Error);  // nothing reserved
  GraphRunnerConfig config;
  config.num_heads = kHeads;
  config.max_batch = 2;
  config.max_pages_per_request = kMaxPages;
  GraphRunner uncaptured(config, [this](const StepContext& ctx, cudaStream_t s) { engine.forward(ctx, s); });
  EXPECT_THROW(uncaptured.decode(pool, &a, 1, stream.get(), /*use_graph=*/true), Error);
  EXPECT_THROW(uncaptured.target_verify(pool, &a, 1, stream.get()), Error);  // not configured
  EXPECT_THROW(uncaptured.capture(nullptr), Error);
  uncaptured.decode(pool, &a, 1, stream.get(), /*use_graph=*/false);
  stream.sync();
}

// While the stream is held by a host callback for 400 ms, num_staging - 1 decode steps (plan,
// upload, graph launch) must all return: any host-device synchronisation in the path would block
// until the callback ends.
void CUDART_CB hold_stream(void* ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(*static_cast<int*>(ms)));
}

TEST_F(GraphRunnerTest, DecodePathNeverWaitsForTheDevice) {
  std::vector<RequestId> reqs;
  for (int i = 0; i < kMaxBatch; ++i) reqs.push_back(add_request(100 + 37 * i));
  for (RequestId r : reqs) pool.append(r);
  new_inputs(kMaxBatch);
  static int hold_ms = 400;
  OPENMLA_TEST_CUDA(cudaLaunchHostFunc(stream.get(), hold_stream, &hold_ms));
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < runner->config().num_staging - 1; ++i) runner->decode(pool, reqs.data(), kMaxBatch, stream.get());
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(cudaStreamQuery(stream.get()), cudaErrorNotReady) << "the stream finished: the test proves nothing";
  EXPECT_LT(ms, 200.0) << "decode steps waited for the device";
  stream.sync();
  EXPECT_EQ(runner->read_device_errors(stream.get()), 0u);
}

}  // namespace
}  // namespace openmla::testing
