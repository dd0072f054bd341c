// GraphRunner: one DecodePlan and one CUDA graph per (mode, bucket), a shared workspace, and the
// per-step sequence plan -> upload -> replay (or the same work eagerly).
#include "openmla/runtime/graph_runner.h"

#include <algorithm>
#include <utility>

#include "core/check.h"
#include "core/device_scope.h"
#include "openmla/move_kv.h"

namespace openmla::runtime {

void StepContext::attention(const TensorView& q, const KVCache& kv, float softmax_scale, const TensorView& out,
                            const TensorView& lse, cudaStream_t stream) const {
  DecodeArgs args;
  args.q = q;
  args.kv = kv;
  args.block_table = block_table;
  args.cache_seqlens = cache_seqlens;
  args.softmax_scale = softmax_scale;
  args.out = out;
  args.lse = lse;
  plan->run(args, workspace, workspace_bytes, stream);
}

void StepContext::move_kv(const KVCache* caches, int num_caches, cudaStream_t stream) const {
  if (step != 0) return;
  MoveKVArgs args;
  args.src_slots = move_src_slots;
  args.dst_slots = move_dst_slots;
  args.row_indptr = move_row_indptr;
  args.caches = caches;
  args.num_caches = num_caches;
  openmla::move_kv(args, stream, DecodePlan::device_error_word(workspace));
}

GraphRunner::GraphRunner(const GraphRunnerConfig& config, ForwardCallback forward)
    : config_(config), forward_(std::move(forward)) {
  if (!forward_) detail::fail_arg("GraphRunner: forward", "a callable", "an empty std::function");
  if (config.max_batch < 1) detail::fail_arg("GraphRunnerConfig.max_batch", ">= 1", config.max_batch);
  if (config.verify_q_len < 0 || config.verify_q_len > kMaxQueryLen)
    detail::fail_arg("GraphRunnerConfig.verify_q_len", detail::concat("in [0, ", kMaxQueryLen, "] (0: no verify)"),
                     config.verify_q_len);
  if (config.draft_steps < 0) detail::fail_arg("GraphRunnerConfig.draft_steps", ">= 0 (0: no draft decode)",
                                               config.draft_steps);
  buckets_ = batch_buckets(config.max_batch);

  ForwardCapacity capacity;
  capacity.max_batch = config.max_batch;
  capacity.max_pages_per_request = config.max_pages_per_request;
  capacity.max_q_len = std::max(1, config.verify_q_len);
  capacity.max_steps = std::max(1, config.draft_steps);
  // Plans first (the first one resolves device -1 and reports a missing device), then the
  // buffers with one workspace large enough for every plan: they run in stream order.
  size_t workspace_bytes = 0;
  for (ForwardMode mode : modes()) {
    for (int bucket : buckets_) {
      DecodeShape shape;
      shape.batch_size = bucket;
      shape.q_len = q_len_of(mode);
      shape.num_heads = config.num_heads;
      shape.q_dtype = config.q_dtype;
      shape.kv_format = config.kv_format;
      shape.causal = true;
      auto plan = std::make_unique<DecodePlan>(shape, config.options, config_.device);
      config_.device = plan->device();
      workspace_bytes = std::max(workspace_bytes, plan->workspace_bytes());
      plans_.emplace(Key{mode, bucket}, std::move(plan));
    }
  }
  buffers_ = std::make_unique<ForwardBuffers>(capacity, config.num_staging, config_.device, workspace_bytes);
}

GraphRunner::~GraphRunner() { destroy_graphs(); }

void GraphRunner::destroy_graphs() noexcept {
  for (auto& entry : graphs_) cudaGraphExecDestroy(entry.second);
  graphs_.clear();
}

std::vector<ForwardMode> GraphRunner::modes() const {
  std::vector<ForwardMode> m{ForwardMode::kDecode};
  if (config_.verify_q_len > 0) m.push_back(ForwardMode::kTargetVerify);
  if (config_.draft_steps > 0) m.push_back(ForwardMode::kDraftDecode);
  return m;
}

int GraphRunner::q_len_of(ForwardMode mode) const noexcept {
  return mode == ForwardMode::kTargetVerify ? config_.verify_q_len : 1;
}

int GraphRunner::steps_of(ForwardMode mode) const noexcept {
  return mode == ForwardMode::kDraftDecode ? config_.draft_steps : 1;
}

void GraphRunner::issue(ForwardMode mode, int bucket, cudaStream_t stream) {
  const DecodePlan& plan = *plans_.at(Key{mode, bucket});
  const int q_len = q_len_of(mode);
  for (int step = 0; step < steps_of(mode); ++step) {
    StepContext ctx;
    ctx.mode = mode;
    ctx.step = step;
    ctx.padded_batch = bucket;
    ctx.q_len = q_len;
    ctx.plan = &plan;
    ctx.workspace = buffers_->workspace();
    ctx.workspace_bytes = buffers_->workspace_bytes();
    ctx.block_table = buffers_->block_table(bucket);
    ctx.cache_seqlens = buffers_->cache_seqlens(step, bucket);
    ctx.write_slots = buffers_->write_slots(step, bucket, q_len);
    ctx.move_src_slots = buffers_->move_src_slots();
    ctx.move_dst_slots = buffers_->move_dst_slots();
    ctx.move_row_indptr = buffers_->move_row_indptr(bucket);
    // Steps share the workspace: stream order puts step j's run before step j + 1's plan.
    plan.plan(ctx.cache_seqlens, ctx.workspace, ctx.workspace_bytes, stream);
    forward_(ctx, stream);
  }
}

void GraphRunner::capture(cudaStream_t stream) {
  if (stream == nullptr)
    detail::fail_arg("GraphRunner::capture: stream", "a created stream (CUDA graphs cannot be captured on the "
                     "legacy default stream)", "the default stream (0)");
  destroy_graphs();
  detail::DeviceScope scope(config_.device);
  for (ForwardMode mode : modes()) {
    for (int bucket : buckets_) {
      // Warm-up with every row padding (seqlen 0, slots -1: nothing written, no attention work):
      // one-time setup inside the callback or the kernels happens outside the capture.
      void* staging = buffers_->acquire_staging();
      ForwardMeta meta;
      switch (mode) {
        case ForwardMode::kTargetVerify:
          meta = buffers_->planner().plan_target_verify(PagePool(1), nullptr, 0, config_.verify_q_len, bucket,
                                                        staging);
          break;
        case ForwardMode::kDraftDecode:
          meta = buffers_->planner().plan_draft_decode(PagePool(1), nullptr, 0, config_.draft_steps, bucket, staging);
          break;
        default:
          meta = buffers_->planner().plan_decode(PagePool(1), nullptr, 0, bucket, staging);
      }
      buffers_->upload(meta, stream);
      issue(mode, bucket, stream);

      OPENMLA_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
      cudaGraph_t graph = nullptr;
      try {
        issue(mode, bucket, stream);
      } catch (...) {
        cudaStreamEndCapture(stream, &graph);
        if (graph != nullptr) cudaGraphDestroy(graph);
        throw;
      }
      OPENMLA_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
      cudaGraphExec_t exec = nullptr;
      const cudaError_t err = cudaGraphInstantiate(&exec, graph, 0);
      cudaGraphDestroy(graph);
      OPENMLA_CUDA_CHECK(err);
      graphs_.emplace(Key{mode, bucket}, exec);
    }
  }
  OPENMLA_CUDA_CHECK(cudaStreamSynchronize(stream));
  // Warm-up rows were padding; whatever a kernel flagged for them is not the engine's error.
  DecodePlan::reset_device_errors(buffers_->workspace(), stream);
  OPENMLA_CUDA_CHECK(cudaStreamSynchronize(stream));
}

static void replay_or_run(const std::map<std::pair<ForwardMode, int>, cudaGraphExec_t>& graphs, ForwardMode mode,
                          int bucket, bool use_graph, cudaStream_t stream, const std::function<void()>& eager) {
  if (!use_graph) return eager();
  auto it = graphs.find({mode, bucket});
  if (it == graphs.end())
    detail::fail(Status::kInvalidArgument, forward_mode_name(mode), ": use_graph = true but no graph for bucket ",
                 bucket, " was captured (call capture() first)");
  OPENMLA_CUDA_CHECK(cudaGraphLaunch(it->second, stream));
}

ForwardMeta GraphRunner::decode(const PagePool& pool, const RequestId* requests, int batch_size, cudaStream_t stream,
                                bool use_graph, const StepMoves& moves) {
  const int bucket = bucket_for(batch_size);
  const ForwardMeta meta = buffers_->prepare_decode(pool, requests, batch_size, bucket, stream, moves);
  replay_or_run(graphs_, ForwardMode::kDecode, bucket, use_graph, stream,
                [&] { issue(ForwardMode::kDecode, bucket, stream); });
  return meta;
}

ForwardMeta GraphRunner::target_verify(const PagePool& pool, const RequestId* requests, int batch_size,
                                       cudaStream_t stream, bool use_graph, const StepMoves& moves) {
  if (config_.verify_q_len == 0)
    detail::fail(Status::kInvalidArgument, "target_verify: GraphRunnerConfig.verify_q_len is 0 (not configured)");
  const int bucket = bucket_for(batch_size);
  const ForwardMeta meta =
      buffers_->prepare_target_verify(pool, requests, batch_size, config_.verify_q_len, bucket, stream, moves);
  replay_or_run(graphs_, ForwardMode::kTargetVerify, bucket, use_graph, stream,
                [&] { issue(ForwardMode::kTargetVerify, bucket, stream); });
  return meta;
}

ForwardMeta GraphRunner::draft_decode(const PagePool& pool, const RequestId* requests, int batch_size,
                                      cudaStream_t stream, bool use_graph, const StepMoves& moves) {
  if (config_.draft_steps == 0)
    detail::fail(Status::kInvalidArgument, "draft_decode: GraphRunnerConfig.draft_steps is 0 (not configured)");
  const int bucket = bucket_for(batch_size);
  const ForwardMeta meta = buffers_->prepare_draft_decode(pool, requests, batch_size, config_.draft_steps, bucket,
                                                          stream, moves);
  replay_or_run(graphs_, ForwardMode::kDraftDecode, bucket, use_graph, stream,
                [&] { issue(ForwardMode::kDraftDecode, bucket, stream); });
  return meta;
}

unsigned GraphRunner::read_device_errors(cudaStream_t stream) const {
  return DecodePlan::read_device_errors(buffers_->workspace(), stream);
}

void GraphRunner::reset_device_errors(cudaStream_t stream) {
  DecodePlan::reset_device_errors(buffers_->workspace(), stream);
}

}  // namespace openmla::runtime
