// Host overhead of per-step decode planning at batch 128 (the serving runtime's hot path).
//
// Timed per step, with a host steady clock: ForwardBuffers::prepare_decode (staging fill from the
// PagePool + async header copy + async 2-D block-table copy + event record) and DecodePlan::plan
// (the split-KV planning kernel launch). Also timed: the same step through GraphRunner::decode
// (plan + upload + one cudaGraphLaunch of a graph holding the planning kernel and an empty layer
// callback). The pool's append() for every request happens before the timer starts.
//
// Also timed: one eager DecodePlan::run (no graph) per backend and cache format, host side only.
//
// Zero host-device synchronisation is shown two ways: (1) during the timed loop the stream is
// never drained by the host; (2) the stream is held by a host callback for 500 ms and
// num_staging - 1 steps are issued: they return in microseconds while the stream is still busy
// (cudaStreamQuery == cudaErrorNotReady). Any sync in the path would block for the 500 ms.
//
// Without a CUDA device it times only the host part (ForwardPlanner::plan_decode into ordinary
// memory), says so, and exits 0.
//
//   openmla-plan-overhead [--batch 128] [--context 4096] [--steps 20000] [--heads 16]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <cuda_runtime_api.h>

#include "openmla/decode.h"
#include "openmla/error.h"
#include "openmla/runtime/forward_buffers.h"
#include "openmla/runtime/forward_planner.h"
#include "openmla/runtime/graph_runner.h"
#include "openmla/runtime/page_pool.h"

namespace {

using namespace openmla;
using namespace openmla::runtime;
using Clock = std::chrono::steady_clock;

struct Options {
  int batch = 128;
  int context = 4096;  // initial tokens per request; grows by one per step
  int steps = 20000;
  int heads = 16;
};

struct Summary {
  double median_us, p90_us, p99_us, min_us;
};

Summary summarize(std::vector<double> us) {
  std::sort(us.begin(), us.end());
  auto at = [&](double q) { return us[static_cast<size_t>(q * static_cast<double>(us.size() - 1))]; };
  return Summary{at(0.5), at(0.9), at(0.99), us.front()};
}

void print(const char* what, const Summary& s, size_t n) {
  std::printf("  %-58s median %7.2f us  p90 %7.2f  p99 %7.2f  min %6.2f  (%zu steps)\n", what, s.median_us,
              s.p90_us, s.p99_us, s.min_us, n);
}

double since_us(Clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}

// `batch` live requests whose lengths stay in [context, context + 64): each step appends one
// token to every request, and a request that reaches context + 64 is released and replaced by a
// fresh one of context - 1 tokens (turnover, outside the timed region). Start lengths are
// staggered so that page boundaries and turnovers are spread over the steps.
struct Workload {
  explicit Workload(const Options& o)
      : context(o.context), pool(static_cast<int64_t>(o.batch) * (max_pages(o) + 1)) {
    for (int r = 0; r < o.batch; ++r) requests.push_back(pool.create(o.context - 1 + r % 64));
  }
  static int max_pages(const Options& o) { return (o.context + 64 + 63) / 64; }
  void grow() {
    for (RequestId& r : requests) {
      if (pool.total_tokens(r) + 1 >= context + 64) {
        pool.release(r);
        r = pool.create(context - 1);
      }
      pool.append(r);
    }
  }
  int context;
  PagePool pool;
  std::vector<RequestId> requests;
};

ForwardCapacity capacity_for(const Options& o) {
  ForwardCapacity c;
  c.max_batch = o.batch;
  c.max_pages_per_request = Workload::max_pages(o);
  return c;
}

int host_only(const Options& o) {
  std::printf("no CUDA device: timing only the host part (ForwardPlanner::plan_decode into ordinary memory);\n"
              "the async copies and the planning-kernel launch are not measured.\n");
  Workload w(o);
  ForwardPlanner planner(capacity_for(o));
  std::vector<char> staging(planner.layout().total_bytes);
  std::vector<double> us;
  us.reserve(static_cast<size_t>(o.steps));
  for (int step = 0; step < o.steps + 100; ++step) {
    w.grow();
    const auto t0 = Clock::now();
    planner.plan_decode(w.pool, w.requests.data(), o.batch, o.batch, staging.data());
    if (step >= 100) us.push_back(since_us(t0));
  }
  std::printf("decode planning, batch %d, context %d..%d tokens:\n", o.batch, o.context, o.context + 63);
  print("host fill (ForwardPlanner::plan_decode)", summarize(us), us.size());
  return 0;
}

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s failed: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

void CUDART_CB hold_stream(void* ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(*static_cast<int*>(ms)));
}

// (D) Host time of one eager DecodePlan::run (validation, parameters, the sm90 kernels' tensor maps,
// two launches) per backend and cache format, at the tool's batch and h_q with one page per request
// (the kernels are short, so the launch queue never fills). Every 64 calls the stream is drained
// outside the timer.
void time_eager_run(const Options& o, cudaStream_t stream) {
  std::printf("eager DecodePlan::run, host time per call (batch %d, h_q %d, 64 tokens per request):\n", o.batch,
              o.heads);
  const int calls = std::max(2000, o.steps / 4), warmup = 200;
  const int64_t rows = static_cast<int64_t>(o.batch) * o.heads;
  void *q = nullptr, *kv = nullptr, *table = nullptr, *seqlens = nullptr, *out = nullptr, *lse = nullptr;
  check(cudaMalloc(&q, rows * 576 * 2), "cudaMalloc");
  check(cudaMalloc(&kv, static_cast<size_t>(o.batch) * 64 * 1152), "cudaMalloc");
  check(cudaMalloc(&table, o.batch * sizeof(int)), "cudaMalloc");
  check(cudaMalloc(&seqlens, o.batch * sizeof(int)), "cudaMalloc");
  check(cudaMalloc(&out, rows * 512 * 2), "cudaMalloc");
  check(cudaMalloc(&lse, rows * sizeof(float)), "cudaMalloc");
  check(cudaMemset(q, 0, rows * 576 * 2), "cudaMemset");
  check(cudaMemset(kv, 0, static_cast<size_t>(o.batch) * 64 * 1152), "cudaMemset");
  std::vector<int> host(o.batch);
  for (int i = 0; i < o.batch; ++i) host[i] = i;
  check(cudaMemcpy(table, host.data(), o.batch * sizeof(int), cudaMemcpyHostToDevice), "cudaMemcpy");
  std::fill(host.begin(), host.end(), 64);
  check(cudaMemcpy(seqlens, host.data(), o.batch * sizeof(int), cudaMemcpyHostToDevice), "cudaMemcpy");
  for (Backend backend : {Backend::kSm90, Backend::kPortable}) {
    for (KVFormat format : {KVFormat::kBF16, KVFormat::kFP8E4M3, KVFormat::kFP8DsMla}) {
      DecodeShape shape;
      shape.batch_size = o.batch;
      shape.num_heads = o.heads;
      shape.kv_format = format;
      DecodeOptions options;
      options.backend = backend;
      std::unique_ptr<DecodePlan> plan;
      try {
        plan = std::make_unique<DecodePlan>(shape, options);
      } catch (const Error& e) {
        std::printf("  %-8s %-10s not available here: %s\n", backend_name(backend), kv_format_name(format), e.what());
        continue;
      }
      void* ws = nullptr;
      check(cudaMalloc(&ws, plan->workspace_bytes()), "cudaMalloc");
      plan->reset_device_errors(ws, stream);
      const DType kv_dtype = format == KVFormat::kBF16 ? DType::kBFloat16 : DType::kUInt8;
      const int64_t width = format == KVFormat::kBF16 ? 576 : kv_bytes_per_token(format);
      DecodeArgs args;
      args.q = make_tensor(q, DType::kBFloat16, {o.batch, 1, o.heads, 576}, DeviceType::kCUDA);
      args.kv.data = make_tensor(kv, kv_dtype, {o.batch, 64, width}, DeviceType::kCUDA);
      args.kv.format = format;
      args.block_table = make_tensor(table, DType::kInt32, {o.batch, 1}, DeviceType::kCUDA);
      args.cache_seqlens = make_tensor(seqlens, DType::kInt32, {o.batch}, DeviceType::kCUDA);
      args.softmax_scale = 0.0416667f;
      args.out = make_tensor(out, DType::kBFloat16, {o.batch, 1, o.heads, 512}, DeviceType::kCUDA);
      args.lse = make_tensor(lse, DType::kFloat32, {o.batch, 1, o.heads}, DeviceType::kCUDA);
      plan->plan(args.cache_seqlens, ws, plan->workspace_bytes(), stream);
      std::vector<double> us;
      us.reserve(calls);
      for (int i = 0; i < calls + warmup; ++i) {
        if (i % 64 == 0) check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
        const auto t0 = Clock::now();
        plan->run(args, ws, plan->workspace_bytes(), stream);
        if (i >= warmup) us.push_back(since_us(t0));
      }
      check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
      const unsigned errors = DecodePlan::read_device_errors(ws, stream);
      const std::string what = std::string(backend_name(backend)) + " " + kv_format_name(format) +
                               (errors ? " (device errors: " + describe_device_errors(errors) + ")" : "");
      print(what.c_str(), summarize(us), us.size());
      cudaFree(ws);
    }
  }
  for (void* ptr : {q, kv, table, seqlens, out, lse}) cudaFree(ptr);
}

int with_gpu(const Options& o) {
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  cudaStream_t stream;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  const int warmup = 200;
  Workload w(o);
  const ForwardCapacity cap = capacity_for(o);

  DecodeShape shape;
  shape.batch_size = o.batch;
  shape.q_len = 1;
  shape.num_heads = o.heads;
  DecodePlan plan(shape);
  ForwardBuffers buffers(cap, /*num_staging=*/4, /*device=*/-1, plan.workspace_bytes());

  std::printf("device %s (%d SMs); decode planning, batch %d, h_q %d, context %d..%d tokens\n", prop.name,
              prop.multiProcessorCount, o.batch, o.heads, o.context, o.context + 63);

  // (A) prepare_decode + plan(): what an engine without graphs pays per step.
  std::vector<double> fill_us, step_us;
  for (int step = 0; step < o.steps + warmup; ++step) {
    w.grow();
    const auto t0 = Clock::now();
    void* staging = buffers.acquire_staging();
    const ForwardMeta meta = buffers.planner().plan_decode(w.pool, w.requests.data(), o.batch, o.batch, staging);
    const double fill = since_us(t0);
    buffers.upload(meta, stream);
    buffers.plan(plan, 0, o.batch, stream);
    const double total = since_us(t0);
    if (step >= warmup) {
      fill_us.push_back(fill);
      step_us.push_back(total);
    }
  }
  check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  print("host fill only (acquire_staging + ForwardPlanner::plan_decode)", summarize(fill_us), fill_us.size());
  print("per step: fill + async copies + DecodePlan::plan launch", summarize(step_us), step_us.size());

  // (B) The same step through GraphRunner (graph = planning kernel + empty layer callback).
  GraphRunnerConfig gc;
  gc.num_heads = o.heads;
  gc.max_batch = o.batch;
  gc.max_pages_per_request = cap.max_pages_per_request;
  GraphRunner runner(gc, [](const StepContext&, cudaStream_t) {});
  runner.capture(stream);
  std::vector<double> graph_us;
  for (int step = 0; step < o.steps + warmup; ++step) {
    w.grow();
    const auto t0 = Clock::now();
    runner.decode(w.pool, w.requests.data(), o.batch, stream);
    if (step >= warmup) graph_us.push_back(since_us(t0));
  }
  check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  print("per step: GraphRunner::decode (plan + upload + graph launch)", summarize(graph_us), graph_us.size());

  // (C) No host-device synchronisation: hold the stream, issue steps, they must not wait.
  static int hold_ms = 500;
  check(cudaLaunchHostFunc(stream, hold_stream, &hold_ms), "cudaLaunchHostFunc");
  const int held_steps = runner.config().num_staging - 1;
  const auto t0 = Clock::now();
  for (int i = 0; i < held_steps; ++i) {
    w.grow();
    runner.decode(w.pool, w.requests.data(), o.batch, stream);
  }
  const double held_us = since_us(t0);
  const bool busy = cudaStreamQuery(stream) == cudaErrorNotReady;
  check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  std::printf("  no-sync check: %d steps issued behind a %d ms stream hold took %.1f us in total; stream still busy "
              "afterwards: %s -> %s\n",
              held_steps, hold_ms, held_us, busy ? "yes" : "no",
              busy && held_us < 1000.0 * hold_ms / 2 ? "PASS (no host-device sync in the decode path)" : "FAIL");
  const unsigned errors =
      runner.read_device_errors(stream) | DecodePlan::read_device_errors(buffers.workspace(), stream);
  if (errors != 0) std::printf("  device errors: %s\n", describe_device_errors(errors).c_str());
  time_eager_run(o, stream);
  cudaStreamDestroy(stream);
  return busy && errors == 0 ? 0 : 1;
}

bool parse(int argc, char** argv, Options* o) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string key = argv[i];
    const int value = std::atoi(argv[i + 1]);
    if (value < 1) return false;
    if (key == "--batch") o->batch = value;
    else if (key == "--context") o->context = value;
    else if (key == "--steps") o->steps = value;
    else if (key == "--heads") o->heads = value;
    else return false;
  }
  return argc % 2 == 1;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parse(argc, argv, &o)) {
    std::fprintf(stderr, "usage: %s [--batch 128] [--context 4096] [--steps 20000] [--heads 16]\n", argv[0]);
    return 2;
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    cudaGetLastError();
    return host_only(o);
  }
  try {
    return with_gpu(o);
  } catch (const openmla::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
