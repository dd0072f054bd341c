// Fixed-capacity device buffers for the forward planner, and the per-step upload into them.
// Part of the `openmla` library (needs the CUDA runtime); the planning itself is host-only
// (forward_planner.h).
//
//   ForwardBuffers buffers(capacity, 4, -1, plan.workspace_bytes());  // cudaMalloc + pinned, ONCE
//   per step:
//     ForwardMeta m = buffers.prepare_decode(pool, reqs, n, bucket, stream);   // fill + async copy
//     buffers.plan(decode_plan, 0, m.padded_batch, stream);   // DecodePlan::plan on cache_seqlens(0)
//     per layer: write_kv(... slots = buffers.write_slots(0, m.padded_batch, 1) ...);
//                decode_plan.run({... block_table = buffers.block_table(m.padded_batch),
//                                     cache_seqlens = buffers.cache_seqlens(0, m.padded_batch) ...},
//                                buffers.workspace(), buffers.workspace_bytes(), stream);
//
// Tree accept: pass the moves PagePool::commit_path() returned as StepMoves to the next step's
// prepare_*(); they are uploaded with its metadata and the step runs them first:
//     move_kv(buffers.move_args(m.padded_batch, layer_caches, num_layers), stream, error_word);
// A step prepared without moves uploads empty groups wherever an earlier step left moves, so a
// graph that always contains the move_kv launch replays it as a no-op.
//
// What is synchronous: prepare_*() fills pinned host memory on the calling thread and enqueues
// cudaMemcpyAsync calls on `stream`; it never synchronizes the device or the stream and never
// allocates. The staging area is a ring of num_staging entries; an entry is rewritten only after
// the copy that last read it has run (an event recorded after that copy). In steady state that copy
// finished num_staging - 1 steps ago and the check costs one cudaEventQuery; only a host running
// more than num_staging - 1 steps ahead of the GPU waits (back-pressure, on that event only).
//
// The device views below have fixed addresses for the lifetime of the object, so kernels captured
// in a CUDA graph read each step's freshly uploaded values. Not copyable or movable (graphs hold
// its addresses).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include <cuda_runtime_api.h>

#include "openmla/decode.h"
#include "openmla/move_kv.h"
#include "openmla/runtime/forward_planner.h"
#include "openmla/tensor.h"

namespace openmla::runtime {

class ForwardBuffers {
 public:
  // device = -1: the current device. num_staging >= 2. workspace_bytes > 0 also allocates a
  // DecodePlan workspace of that size (the largest workspace_bytes() of the plans that will use
  // it; plans on one stream can share it), zeroed once (device error word clear).
  explicit ForwardBuffers(const ForwardCapacity& capacity, int num_staging = 4, int device = -1,
                          size_t workspace_bytes = 0);
  ~ForwardBuffers();
  ForwardBuffers(const ForwardBuffers&) = delete;
  ForwardBuffers& operator=(const ForwardBuffers&) = delete;

  const ForwardPlanner& planner() const noexcept { return planner_; }
  const ForwardCapacity& capacity() const noexcept { return planner_.capacity(); }
  int device() const noexcept { return device_; }

  // Plan (see ForwardPlanner for each mode's meaning and checks) into the next staging entry and
  // enqueue its upload on `stream`, with `moves` staged by ForwardPlanner::plan_moves (optional).
  // On a planning error nothing is enqueued.
  ForwardMeta prepare_decode(const PagePool& pool, const RequestId* requests, int batch_size,
                             int padded_batch, cudaStream_t stream, const StepMoves& moves = {});
  ForwardMeta prepare_target_verify(const PagePool& pool, const RequestId* requests,
                                    int batch_size, int num_draft, int padded_batch,
                                    cudaStream_t stream, const StepMoves& moves = {});
  ForwardMeta prepare_draft_decode(const PagePool& pool, const RequestId* requests,
                                   int batch_size, int num_steps, int padded_batch,
                                   cudaStream_t stream, const StepMoves& moves = {});
  ForwardMeta prepare_draft_extend(const PagePool& pool, const RequestId* requests,
                                   const int* new_tokens, int batch_size, int q_len,
                                   int padded_batch, cudaStream_t stream,
                                   const StepMoves& moves = {});

  // Lower level, for custom planning: the next ring entry (host, pinned, layout().total_bytes),
  // then upload() of what was written into it. Each acquire_staging() must be followed by one
  // upload() before the next acquire.
  void* acquire_staging();
  void upload(const ForwardMeta& meta, cudaStream_t stream);

  // Device views (int32, on device()). Valid for 1 <= padded_batch <= max_batch,
  // 0 <= step < max_steps, 1 <= q_len <= max_q_len.
  TensorView block_table(int padded_batch) const;               // [padded_batch, max_pages], row stride max_pages
  TensorView cache_seqlens(int step, int padded_batch) const;   // [padded_batch]
  TensorView write_slots(int step, int padded_batch, int q_len) const;  // [padded_batch * q_len]; -1 = skip
  // move_kv arrays of the last upload: row_indptr [padded_batch + 1] (group r = request row r),
  // src / dst slots [max_batch * max_q_len] (rows past row_indptr[padded_batch] are not read).
  TensorView move_row_indptr(int padded_batch) const;
  TensorView move_src_slots() const;
  TensorView move_dst_slots() const;
  // MoveKVArgs over those arrays for caches[0 .. num_caches) (e.g. every layer).
  MoveKVArgs move_args(int padded_batch, const KVCache* caches, int num_caches) const;

  // Raw device base pointer of the buffers (layout: planner().layout()).
  void* device_base() const noexcept { return device_base_; }

  // The DecodePlan workspace (nullptr / 0 when none was requested).
  void* workspace() const noexcept { return workspace_; }
  size_t workspace_bytes() const noexcept { return workspace_bytes_; }
  // plan.plan(cache_seqlens(step, padded_batch), workspace(), workspace_bytes(), stream): the
  // split-KV schedule of this step's uploaded seqlens (a kernel; no sync). plan's batch_size must
  // equal padded_batch.
  void plan(const DecodePlan& plan, int step, int padded_batch, cudaStream_t stream) const;

 private:
  void* staging_entry(int index) const noexcept;

  ForwardPlanner planner_;
  int device_ = 0;
  int num_staging_ = 0;
  int next_entry_ = 0;
  int acquired_entry_ = -1;
  void* device_base_ = nullptr;
  void* pinned_base_ = nullptr;          // num_staging entries of layout().total_bytes (rounded)
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  size_t entry_stride_ = 0;
  std::vector<cudaEvent_t> copied_;      // per entry: recorded after its upload
  std::vector<bool> in_flight_;          // per entry: an event was recorded and not yet waited on
  bool device_moves_ = false;            // the device row_indptr may hold non-empty groups
};

}  // namespace openmla::runtime
