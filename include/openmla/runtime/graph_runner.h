// CUDA-graph runner for the decode-path forward modes: one graph per (mode, batch bucket), each
// holding the split-KV planning kernel plus the engine's layer work, replayed every step after a
// host-side plan + async upload of that step's metadata.
//
//   GraphRunner runner(config, [&](const StepContext& ctx, cudaStream_t s) {
//     for (int l = 0; l < num_layers; ++l) {
//       engine_kernels_before_attention(l, ctx.padded_batch, s);          // fills q, new kv
//       write_kv({kv_latent[l], k_rope[l], ctx.write_slots, cache[l]}, s);
//       ctx.attention(q, cache[l], scale, out, lse, s);                   // DecodePlan::run
//       engine_kernels_after_attention(l, ctx.padded_batch, s);
//     }
//   });
//   runner.capture(stream);                          // once: every (mode, bucket)
//   per step: pool.append(r)...; runner.decode(pool, reqs, n, stream);     // plan, upload, replay
//
// Tree accept: the moves PagePool::commit_path() returned ride with the next step (StepMoves
// argument of decode()/target_verify()/draft_decode()); a callback that starts with
// ctx.move_kv(layer_caches, num_layers, s) performs them inside that step's graph (empty groups,
// no work, on steps without moves).
//
// Buckets: 1, 2, 4, 8, ... below max_batch, then max_batch. A batch of n requests runs in the
// smallest bucket >= n; rows n .. bucket-1 are empty requests (seqlen 0: out 0, lse -inf, no
// attention work, write slots -1). The callback must size its own per-row work by
// ctx.padded_batch and use buffers whose addresses do not change between capture and replay.
//
// Exactness: with use_graph = false the runner issues the same work eagerly (same bucket, same
// plan objects, same buffers), so graph replay and eager execution give bit-identical results.
//
// Synchronisation: decode()/target_verify()/draft_decode() never synchronize the device; see
// forward_buffers.h for the one event wait (staging ring back-pressure). capture() synchronizes.
// Single-threaded use; one stream per runner (all graphs share one workspace).
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include <cuda_runtime_api.h>

#include "openmla/decode.h"
#include "openmla/runtime/forward_buffers.h"
#include "openmla/runtime/forward_planner.h"
#include "openmla/runtime/page_pool.h"

namespace openmla::runtime {

struct GraphRunnerConfig {
  int num_heads = 0;                    // h_q
  DType q_dtype = DType::kBFloat16;
  KVFormat kv_format = KVFormat::kBF16;
  DecodeOptions options;                // backend, num_parts (shared by every plan)
  int max_batch = 0;                    // largest bucket
  int max_pages_per_request = 0;        // block-table columns (= ceil(max context / 64))
  int verify_q_len = 0;                 // draft tokens per target-verify step (0: no verify graphs)
  int draft_steps = 0;                  // steps per draft-decode graph (0: no draft-decode graphs)
  int num_staging = 4;                  // staging ring depth (forward_buffers.h)
  int device = -1;                      // -1: current device
};

// Everything the forward callback needs for one step (one draft step in draft decode).
struct StepContext {
  ForwardMode mode = ForwardMode::kDecode;
  int step = 0;                         // draft-decode step index, else 0
  int padded_batch = 0;                 // rows of this graph (the bucket)
  int q_len = 1;                        // s_q
  const DecodePlan* plan = nullptr;     // planned (split-KV schedule written) before the callback
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  TensorView block_table;               // [padded_batch, max_pages] int32 (device)
  TensorView cache_seqlens;             // [padded_batch] int32 (device)
  TensorView write_slots;               // [padded_batch * q_len] int32 (device), -1 = skip
  TensorView move_src_slots;            // move_kv arrays staged with this step (ForwardBuffers::move_args)
  TensorView move_dst_slots;
  TensorView move_row_indptr;           // [padded_batch + 1]

  // One layer's attention with this step's metadata: plan->run() with q [padded_batch, q_len,
  // h_q, 576], out [padded_batch, q_len, h_q, 512], lse [padded_batch, q_len, h_q] (any strides).
  void attention(const TensorView& q, const KVCache& kv, float softmax_scale, const TensorView& out,
                 const TensorView& lse, cudaStream_t stream) const;

  // The step's slot moves (tree accept) in caches[0 .. num_caches), e.g. every layer, before the
  // step's first write_kv or attention; errors go to the plans' device error word. The moves belong
  // to step 0: in later draft-decode steps this does nothing (their positions were rewritten).
  void move_kv(const KVCache* caches, int num_caches, cudaStream_t stream) const;
};

using ForwardCallback = std::function<void(const StepContext& ctx, cudaStream_t stream)>;

class GraphRunner {
 public:
  // Validates the config, allocates the buffers and the shared workspace, builds one DecodePlan
  // per (mode, bucket) (querying the device once per plan). No capture yet.
  GraphRunner(const GraphRunnerConfig& config, ForwardCallback forward);
  ~GraphRunner();
  GraphRunner(const GraphRunner&) = delete;
  GraphRunner& operator=(const GraphRunner&) = delete;

  const GraphRunnerConfig& config() const noexcept { return config_; }
  const std::vector<int>& buckets() const noexcept { return buckets_; }
  int bucket_for(int batch_size) const { return bucket_for_batch(batch_size, config_.max_batch); }
  ForwardBuffers& buffers() noexcept { return *buffers_; }

  // Captures every configured (mode, bucket) graph on `stream` (must not be the legacy default
  // stream). Runs with all rows padding during capture (nothing is written: slots -1). The
  // callback is invoked once per captured step. Synchronizes `stream` at the end. May be called
  // again (recaptures).
  void capture(cudaStream_t stream);
  bool captured() const noexcept { return !graphs_.empty(); }

  // One step: plan + upload the batch's metadata, then replay the bucket's graph (use_graph and
  // captured) or run the same work eagerly. Returns the planned metadata (bucket in padded_batch).
  // `moves`: slot moves of the previous tree accept, staged with this step (ForwardPlanner::plan_moves).
  ForwardMeta decode(const PagePool& pool, const RequestId* requests, int batch_size,
                     cudaStream_t stream, bool use_graph = true, const StepMoves& moves = {});
  ForwardMeta target_verify(const PagePool& pool, const RequestId* requests, int batch_size,
                            cudaStream_t stream, bool use_graph = true, const StepMoves& moves = {});
  ForwardMeta draft_decode(const PagePool& pool, const RequestId* requests, int batch_size,
                           cudaStream_t stream, bool use_graph = true, const StepMoves& moves = {});

  // Device error word shared by every plan (DeviceErrorBits): read syncs `stream`.
  unsigned read_device_errors(cudaStream_t stream) const;
  void reset_device_errors(cudaStream_t stream);

 private:
  using Key = std::pair<ForwardMode, int>;  // (mode, bucket)
  void issue(ForwardMode mode, int bucket, cudaStream_t stream);  // plan + callback per step
  int q_len_of(ForwardMode mode) const noexcept;
  int steps_of(ForwardMode mode) const noexcept;
  std::vector<ForwardMode> modes() const;
  void destroy_graphs() noexcept;

  GraphRunnerConfig config_;
  ForwardCallback forward_;
  std::vector<int> buckets_;
  std::unique_ptr<ForwardBuffers> buffers_;
  std::map<Key, std::unique_ptr<DecodePlan>> plans_;
  std::map<Key, cudaGraphExec_t> graphs_;  // the workspace is buffers_->workspace()
};

}  // namespace openmla::runtime
