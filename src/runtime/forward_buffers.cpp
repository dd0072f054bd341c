// ForwardBuffers: device buffers allocated once, a pinned staging ring, and the per-step upload
// (one header copy + one 2-D block-table copy + one event record; no sync, no allocation).
#include "openmla/runtime/forward_buffers.h"

#include <algorithm>
#include <cstring>

#include "core/check.h"
#include "core/device_scope.h"

namespace openmla::runtime {

ForwardBuffers::ForwardBuffers(const ForwardCapacity& capacity, int num_staging, int device, size_t workspace_bytes)
    : planner_(capacity) {
  if (num_staging < 2) detail::fail_arg("ForwardBuffers: num_staging", ">= 2", num_staging);
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    cudaGetLastError();
    detail::fail(Status::kUnsupported, "ForwardBuffers: device: expected a CUDA device, got none");
  }
  if (device < 0) OPENMLA_CUDA_CHECK(cudaGetDevice(&device));
  if (device >= count) detail::fail_arg("ForwardBuffers: device", detail::concat("a CUDA device index < ", count), device);
  device_ = device;
  num_staging_ = num_staging;
  const ForwardLayout& layout = planner_.layout();
  entry_stride_ = layout.total_bytes;  // a multiple of 256

  detail::DeviceScope scope(device_);  // construction only: the per-step path never switches devices
  try {
    OPENMLA_CUDA_CHECK(cudaMalloc(&device_base_, layout.total_bytes));
    OPENMLA_CUDA_CHECK(cudaHostAlloc(&pinned_base_, entry_stride_ * static_cast<size_t>(num_staging_),
                                     cudaHostAllocDefault));
    copied_.assign(static_cast<size_t>(num_staging_), nullptr);
    in_flight_.assign(static_cast<size_t>(num_staging_), false);
    for (cudaEvent_t& e : copied_) OPENMLA_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    // Defined contents before the first upload: every row padding (seqlen 0, slots -1), table 0.
    std::memset(pinned_base_, 0, entry_stride_ * static_cast<size_t>(num_staging_));
    for (int entry = 0; entry < num_staging_; ++entry)
      for (int step = 0; step < capacity.max_steps; ++step)
        std::memset(planner_.write_slots(staging_entry(entry), step), 0xff,
                    sizeof(int32_t) * static_cast<size_t>(capacity.max_batch) * capacity.max_q_len);
    OPENMLA_CUDA_CHECK(cudaMemcpy(device_base_, pinned_base_, layout.total_bytes, cudaMemcpyHostToDevice));
    if (workspace_bytes > 0) {
      OPENMLA_CUDA_CHECK(cudaMalloc(&workspace_, workspace_bytes));
      OPENMLA_CUDA_CHECK(cudaMemset(workspace_, 0, workspace_bytes));
      workspace_bytes_ = workspace_bytes;
    }
  } catch (...) {
    if (workspace_ != nullptr) cudaFree(workspace_);
    for (cudaEvent_t e : copied_)
      if (e != nullptr) cudaEventDestroy(e);
    if (pinned_base_ != nullptr) cudaFreeHost(pinned_base_);
    if (device_base_ != nullptr) cudaFree(device_base_);
    throw;
  }
}

ForwardBuffers::~ForwardBuffers() {
  // Copies may still read the pinned ring: wait for them before freeing it.
  for (size_t i = 0; i < copied_.size(); ++i)
    if (in_flight_[i]) cudaEventSynchronize(copied_[i]);
  for (cudaEvent_t e : copied_) cudaEventDestroy(e);
  cudaFreeHost(pinned_base_);
  cudaFree(device_base_);
  // Kernels may still use the workspace; cudaFree alone does not promise to wait for them.
  if (workspace_ != nullptr) {
    detail::DeviceScope scope(device_, std::nothrow);
    cudaDeviceSynchronize();
    cudaFree(workspace_);
  }
}

void* ForwardBuffers::staging_entry(int index) const noexcept {
  return static_cast<char*>(pinned_base_) + entry_stride_ * static_cast<size_t>(index);
}

void* ForwardBuffers::acquire_staging() {
  const int entry = next_entry_;
  if (in_flight_[static_cast<size_t>(entry)]) {
    // The copy that last read this entry was enqueued num_staging - 1 uploads ago; normally it
    // has long run and this returns at once. Waiting here is back-pressure, never a device sync.
    cudaEvent_t e = copied_[static_cast<size_t>(entry)];
    const cudaError_t state = cudaEventQuery(e);
    if (state == cudaErrorNotReady) OPENMLA_CUDA_CHECK(cudaEventSynchronize(e));
    else OPENMLA_CUDA_CHECK(state);
    in_flight_[static_cast<size_t>(entry)] = false;
  }
  acquired_entry_ = entry;
  next_entry_ = (entry + 1) % num_staging_;
  return staging_entry(entry);
}

void ForwardBuffers::upload(const ForwardMeta& meta, cudaStream_t stream) {
  if (acquired_entry_ < 0)
    detail::fail(Status::kInvalidArgument, "ForwardBuffers::upload: no staging entry acquired (call acquire_staging() "
                 "and plan into it first)");
  const ForwardCapacity& c = capacity();
  if (meta.padded_batch < 1 || meta.padded_batch > c.max_batch || meta.batch_size < 0 ||
      meta.batch_size > meta.padded_batch || meta.q_len < 1 || meta.q_len > c.max_q_len || meta.num_steps < 1 ||
      meta.num_steps > c.max_steps || meta.table_width < 0 || meta.table_width > c.max_pages_per_request ||
      meta.num_moves < 0 || meta.num_moves > planner_.max_moves() || (!meta.has_moves && meta.num_moves != 0))
    detail::fail(Status::kInvalidArgument, "ForwardBuffers::upload: meta: expected batch_size <= padded_batch <= ",
                 c.max_batch, ", q_len <= ", c.max_q_len, ", num_steps <= ", c.max_steps, ", table_width <= ",
                 c.max_pages_per_request, ", num_moves <= ", planner_.max_moves(), " (0 without has_moves); got batch_size ",
                 meta.batch_size, ", padded_batch ", meta.padded_batch, ", q_len ", meta.q_len, ", num_steps ",
                 meta.num_steps, ", table_width ", meta.table_width, ", num_moves ", meta.num_moves);
  const int entry = acquired_entry_;
  acquired_entry_ = -1;
  char* src = static_cast<char*>(staging_entry(entry));
  char* dst = static_cast<char*>(device_base_);
  OPENMLA_CUDA_CHECK(cudaMemcpyAsync(dst, src, planner_.upload_header_bytes(meta), cudaMemcpyHostToDevice, stream));
  // Only the columns and rows the kernels read: real rows, up to the widest row's pages.
  if (meta.table_width > 0 && meta.batch_size > 0) {
    const size_t offset = planner_.layout().block_table_offset;
    const size_t pitch = sizeof(int32_t) * static_cast<size_t>(c.max_pages_per_request);
    OPENMLA_CUDA_CHECK(cudaMemcpy2DAsync(dst + offset, pitch, src + offset, pitch,
                                         sizeof(int32_t) * static_cast<size_t>(meta.table_width),
                                         static_cast<size_t>(meta.batch_size), cudaMemcpyHostToDevice, stream));
  }
  const ForwardLayout& layout = planner_.layout();
  if (meta.has_moves) {
    OPENMLA_CUDA_CHECK(cudaMemcpyAsync(dst + layout.move_indptr_offset, src + layout.move_indptr_offset,
                                       sizeof(int32_t) * (static_cast<size_t>(meta.padded_batch) + 1),
                                       cudaMemcpyHostToDevice, stream));
    if (meta.num_moves > 0) {  // src and dst slots in use: two rows of one 2-D copy
      const size_t pitch = layout.move_dst_offset - layout.move_src_offset;
      OPENMLA_CUDA_CHECK(cudaMemcpy2DAsync(dst + layout.move_src_offset, pitch, src + layout.move_src_offset, pitch,
                                           sizeof(int32_t) * static_cast<size_t>(meta.num_moves), 2,
                                           cudaMemcpyHostToDevice, stream));
    }
    device_moves_ = true;
  } else if (device_moves_) {
    // An earlier step's groups are still on the device: empty every group once, so graphs that
    // launch move_kv on this and later steps move nothing.
    int32_t* indptr = planner_.move_row_indptr(src);
    std::fill(indptr, indptr + c.max_batch + 1, 0);
    OPENMLA_CUDA_CHECK(cudaMemcpyAsync(dst + layout.move_indptr_offset, indptr,
                                       sizeof(int32_t) * (static_cast<size_t>(c.max_batch) + 1),
                                       cudaMemcpyHostToDevice, stream));
    device_moves_ = false;
  }
  OPENMLA_CUDA_CHECK(cudaEventRecord(copied_[static_cast<size_t>(entry)], stream));
  in_flight_[static_cast<size_t>(entry)] = true;
}

ForwardMeta ForwardBuffers::prepare_decode(const PagePool& pool, const RequestId* requests, int batch_size,
                                           int padded_batch, cudaStream_t stream, const StepMoves& moves) {
  void* staging = acquire_staging();
  ForwardMeta meta = planner_.plan_decode(pool, requests, batch_size, padded_batch, staging);
  planner_.plan_moves(moves, meta, staging);
  upload(meta, stream);
  return meta;
}

ForwardMeta ForwardBuffers::prepare_target_verify(const PagePool& pool, const RequestId* requests, int batch_size,
                                                  int num_draft, int padded_batch, cudaStream_t stream,
                                                  const StepMoves& moves) {
  void* staging = acquire_staging();
  ForwardMeta meta = planner_.plan_target_verify(pool, requests, batch_size, num_draft, padded_batch, staging);
  planner_.plan_moves(moves, meta, staging);
  upload(meta, stream);
  return meta;
}

ForwardMeta ForwardBuffers::prepare_draft_decode(const PagePool& pool, const RequestId* requests, int batch_size,
                                                 int num_steps, int padded_batch, cudaStream_t stream,
                                                 const StepMoves& moves) {
  void* staging = acquire_staging();
  ForwardMeta meta = planner_.plan_draft_decode(pool, requests, batch_size, num_steps, padded_batch, staging);
  planner_.plan_moves(moves, meta, staging);
  upload(meta, stream);
  return meta;
}

ForwardMeta ForwardBuffers::prepare_draft_extend(const PagePool& pool, const RequestId* requests,
                                                 const int* new_tokens, int batch_size, int q_len, int padded_batch,
                                                 cudaStream_t stream, const StepMoves& moves) {
  void* staging = acquire_staging();
  ForwardMeta meta = planner_.plan_draft_extend(pool, requests, new_tokens, batch_size, q_len, padded_batch, staging);
  planner_.plan_moves(moves, meta, staging);
  upload(meta, stream);
  return meta;
}

static void check_view_args(const ForwardCapacity& c, const char* view, int padded_batch, int step, int q_len) {
  if (padded_batch < 1 || padded_batch > c.max_batch)
    detail::fail(Status::kInvalidArgument, "ForwardBuffers::", view, ": padded_batch: expected in [1, ", c.max_batch,
                 "], got ", padded_batch);
  if (step < 0 || step >= c.max_steps)
    detail::fail(Status::kInvalidArgument, "ForwardBuffers::", view, ": step: expected in [0, ", c.max_steps,
                 "), got ", step);
  if (q_len < 1 || q_len > c.max_q_len)
    detail::fail(Status::kInvalidArgument, "ForwardBuffers::", view, ": q_len: expected in [1, ", c.max_q_len,
                 "], got ", q_len);
}

void ForwardBuffers::plan(const DecodePlan& plan, int step, int padded_batch, cudaStream_t stream) const {
  if (workspace_ == nullptr)
    detail::fail(Status::kInvalidArgument, "ForwardBuffers::plan: no workspace (construct with workspace_bytes >= ",
                 plan.workspace_bytes(), ")");
  if (plan.shape().batch_size != padded_batch)
    detail::fail(Status::kInvalidArgument, "ForwardBuffers::plan: plan.shape().batch_size: expected padded_batch = ",
                 padded_batch, ", got ", plan.shape().batch_size);
  plan.plan(cache_seqlens(step, padded_batch), workspace_, workspace_bytes_, stream);
}

TensorView ForwardBuffers::block_table(int padded_batch) const {
  check_view_args(capacity(), "block_table", padded_batch, 0, 1);
  const int64_t cols = capacity().max_pages_per_request;
  return make_tensor_strided(planner_.block_table(device_base_), DType::kInt32, {padded_batch, cols}, {cols, 1},
                             DeviceType::kCUDA, device_);
}

TensorView ForwardBuffers::cache_seqlens(int step, int padded_batch) const {
  check_view_args(capacity(), "cache_seqlens", padded_batch, step, 1);
  return make_tensor(planner_.seqlens(device_base_, step), DType::kInt32, {padded_batch}, DeviceType::kCUDA, device_);
}

TensorView ForwardBuffers::write_slots(int step, int padded_batch, int q_len) const {
  check_view_args(capacity(), "write_slots", padded_batch, step, q_len);
  return make_tensor(planner_.write_slots(device_base_, step), DType::kInt32,
                     {static_cast<int64_t>(padded_batch) * q_len}, DeviceType::kCUDA, device_);
}

TensorView ForwardBuffers::move_row_indptr(int padded_batch) const {
  check_view_args(capacity(), "move_row_indptr", padded_batch, 0, 1);
  return make_tensor(planner_.move_row_indptr(device_base_), DType::kInt32, {padded_batch + 1}, DeviceType::kCUDA,
                     device_);
}

TensorView ForwardBuffers::move_src_slots() const {
  return make_tensor(planner_.move_src_slots(device_base_), DType::kInt32, {planner_.max_moves()}, DeviceType::kCUDA,
                     device_);
}

TensorView ForwardBuffers::move_dst_slots() const {
  return make_tensor(planner_.move_dst_slots(device_base_), DType::kInt32, {planner_.max_moves()}, DeviceType::kCUDA,
                     device_);
}

MoveKVArgs ForwardBuffers::move_args(int padded_batch, const KVCache* caches, int num_caches) const {
  MoveKVArgs args;
  args.src_slots = move_src_slots();
  args.dst_slots = move_dst_slots();
  args.row_indptr = move_row_indptr(padded_batch);
  args.caches = caches;
  args.num_caches = num_caches;
  return args;
}

}  // namespace openmla::runtime
