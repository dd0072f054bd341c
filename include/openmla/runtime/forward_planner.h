// Per-step attention metadata for every forward mode of a speculative-decoding engine, written
// into fixed-capacity int32 arrays so that each mode can run inside a CUDA graph.
//
// The planner is host-only: it reads a PagePool and fills a caller-owned staging area (normally
// pinned host memory owned by ForwardBuffers, forward_buffers.h, which also uploads it). The
// staging area has the same byte layout as the device buffers (ForwardLayout), so a step's upload
// is one contiguous copy of the header (seqlens + slots of the steps in use) plus one 2-D copy of
// the block-table columns in use.
//
// Rows: every array has padded_batch request rows. Rows [batch_size, padded_batch) are padding
// (a batch grown to its CUDA-graph bucket): seqlen 0 (no attention work: out 0, lse -inf), every
// write slot -1 (write_kv skips it), block-table row not read.
//
// Query placement: decode attention puts query i (0 <= i < s_q) of a request at KV position
// seqlen - s_q + i (the KV of the new tokens is written first, at the write slots). So:
//   kDecode        s_q = 1. seqlen = total_tokens (the request's last position is the new token:
//                  pool.append() it first). Write slot: that position.
//   kTargetVerify  s_q = D = num_draft. seqlen = committed + D; queries = the D draft positions
//                  [committed, committed + D) (reserved with pool.reserve(r, >= D)); causal.
//   kDraftDecode   num_steps steps of s_q = 1, all prepared at once: step j has
//                  seqlen = committed + j + 1 and writes position committed + j (reserved >= steps).
//                  Step j's arrays are separate (cache_seqlens / write_slots per step); the block
//                  table is shared (the reservation already holds every step's pages).
//   kDraftExtend   ragged new-token counts n_r (after partial acceptance) expressed with a uniform
//                  s_q = q_len >= max n_r: the real tokens are the LAST n_r positions of the request,
//                  [total - n_r, total), and sit LAST in its window (rows q_len - n_r .. q_len - 1),
//                  so each gets exactly its own position. The first q_len - n_r rows are padding:
//                  they sit at earlier, already written positions [total - q_len, total - n_r),
//                  read only valid KV (finite results the engine must ignore), and have write
//                  slot -1 so they never overwrite that KV. Requires total_tokens >= q_len for
//                  every real request (else a padding row would sit before position 0).
//
// Tree verify (EAGLE topk > 1) is kTargetVerify with num_draft = n tree tokens per request (the
// tree at positions [committed, committed + n), tree position i at committed + i; the engine passes
// its TreeMask to decode, which takes n <= kMaxTreeQueryLen). After the accept, PagePool::commit_path() returns each request's slot
// moves; plan_moves() stages them as move_kv's arrays beside the next step's metadata, so the moves
// run (in a CUDA graph or eagerly) before that step's attention. Group r of the move arrays is
// request row r of that step.
//
// Write slots of one step are request-major, dense as [padded_batch, q_len], i.e. the row order of
// q [padded_batch, q_len, h_q, 576] flattened to tokens, which is what write_kv takes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "openmla/runtime/page_pool.h"

namespace openmla::runtime {

enum class ForwardMode : uint8_t {
  kDecode = 0,
  kTargetVerify = 1,
  kDraftDecode = 2,
  kDraftExtend = 3,
};
const char* forward_mode_name(ForwardMode mode) noexcept;  // "decode", "target_verify", ...

// Buffer capacities, fixed for the lifetime of the buffers (and of every graph captured on them).
struct ForwardCapacity {
  int max_batch = 0;              // request rows (the largest bucket), >= 1
  int max_pages_per_request = 0;  // block-table columns, >= 1 (= ceil(max context / 64))
  int max_q_len = 1;              // largest s_q (verify draft tokens, draft-extend window), 1..128;
                                  // also the most slot moves of one request (plan_moves)
  int max_steps = 1;              // draft-decode steps prepared at once, >= 1
};

// Byte layout shared by the host staging area and the device buffers (all int32):
//   step j (0 <= j < max_steps) at j * step_bytes:
//       seqlens [max_batch]                    at + seqlens_offset
//       write slots [max_batch * max_q_len]    at + slots_offset (dense [padded_batch, q_len])
//   block table [max_batch, max_pages_per_request] at block_table_offset (row stride = max_pages)
//   move_kv arrays (plan_moves): row_indptr [max_batch + 1] at move_indptr_offset, src slots
//       [max_moves] at move_src_offset, dst slots [max_moves] at move_dst_offset, where
//       max_moves = max_batch * max_q_len
// Offsets are 256-byte aligned (decode's cache_seqlens and slot tensors start aligned).
struct ForwardLayout {
  size_t seqlens_offset = 0;
  size_t slots_offset = 0;
  size_t step_bytes = 0;
  size_t block_table_offset = 0;
  size_t move_indptr_offset = 0;
  size_t move_src_offset = 0;
  size_t move_dst_offset = 0;
  size_t total_bytes = 0;
};
ForwardLayout forward_layout(const ForwardCapacity& capacity);

// What a planning call wrote, and what the upload must move.
struct ForwardMeta {
  ForwardMode mode = ForwardMode::kDecode;
  int batch_size = 0;    // real request rows [0, batch_size)
  int padded_batch = 0;  // total rows; the rest are padding
  int q_len = 1;         // s_q of every step
  int num_steps = 1;     // steps with metadata (draft decode), else 1
  int table_width = 0;   // block-table columns in use: max pages over the real rows (<= capacity)
  bool has_moves = false;  // plan_moves() staged move_kv arrays (row_indptr for every padded row)
  int num_moves = 0;       // slot moves staged (rows of src / dst slots in use)
};

// Slot moves riding with a step (tree accept), request-major like the step's rows: request row r's
// moves are moves[indptr[r] .. indptr[r+1]) (what PagePool::commit_path wrote for that request).
struct StepMoves {
  const SlotMove* moves = nullptr;
  const int32_t* indptr = nullptr;  // [batch_size + 1], indptr[0] = 0; nullptr: no moves this step
  bool empty() const noexcept { return indptr == nullptr; }
};

class ForwardPlanner {
 public:
  // Validates the capacity (throws Error naming the field).
  explicit ForwardPlanner(const ForwardCapacity& capacity);

  const ForwardCapacity& capacity() const noexcept { return capacity_; }
  const ForwardLayout& layout() const noexcept { return layout_; }

  // Each call checks its input (unknown request, a request twice in one batch, pages beyond
  // capacity, missing reservation, too short for its window, padded_batch out of
  // [batch_size, max_batch]) and throws Error naming the request and row; the pool is never
  // modified, and after a throw the staging contents are unspecified (nothing was uploaded). On
  // success it fills the parts of `staging` (layout().total_bytes bytes) that the upload copies.
  // O(batch * pages per request) host work; no allocation.
  // padded_batch = 0 means batch_size (no padding). batch_size may be 0 (all rows padding).
  ForwardMeta plan_decode(const PagePool& pool, const RequestId* requests, int batch_size,
                          int padded_batch, void* staging) const;
  ForwardMeta plan_target_verify(const PagePool& pool, const RequestId* requests, int batch_size,
                                 int num_draft, int padded_batch, void* staging) const;
  ForwardMeta plan_draft_decode(const PagePool& pool, const RequestId* requests, int batch_size,
                                int num_steps, int padded_batch, void* staging) const;
  // new_tokens[r] in [0, q_len] real tokens of request r; q_len in [1, max_q_len].
  ForwardMeta plan_draft_extend(const PagePool& pool, const RequestId* requests,
                                const int* new_tokens, int batch_size, int q_len,
                                int padded_batch, void* staging) const;

  // Stages the step's slot moves as move_kv arrays (row_indptr [padded_batch + 1] with padding
  // rows empty, src / dst slots) into the staging area just planned by the call that returned
  // `meta` (same rows: moves.indptr has meta.batch_size + 1 entries), and records them in meta
  // (has_moves, num_moves). Checks: indptr starts at 0 and never decreases, at most max_q_len
  // moves per request; a throw leaves meta unchanged. The slots are not checked here (move_kv
  // checks them on the device). O(moves); no allocation. Empty moves: nothing staged.
  void plan_moves(const StepMoves& moves, ForwardMeta& meta, void* staging) const;

  // Contiguous prefix of the staging area holding every step in use (seqlens + slots).
  size_t upload_header_bytes(const ForwardMeta& meta) const noexcept;

  // Views into a staging area (host pointers; the same offsets apply to the device buffers).
  int32_t* seqlens(void* staging, int step) const noexcept;
  int32_t* write_slots(void* staging, int step) const noexcept;
  int32_t* block_table(void* staging) const noexcept;
  const int32_t* seqlens(const void* staging, int step) const noexcept;
  const int32_t* write_slots(const void* staging, int step) const noexcept;
  const int32_t* block_table(const void* staging) const noexcept;
  int32_t* move_row_indptr(void* staging) const noexcept;
  int32_t* move_src_slots(void* staging) const noexcept;
  int32_t* move_dst_slots(void* staging) const noexcept;
  const int32_t* move_row_indptr(const void* staging) const noexcept;
  const int32_t* move_src_slots(const void* staging) const noexcept;
  const int32_t* move_dst_slots(const void* staging) const noexcept;
  // Capacity of the move arrays: max_batch * max_q_len.
  int64_t max_moves() const noexcept {
    return static_cast<int64_t>(capacity_.max_batch) * capacity_.max_q_len;
  }

 private:
  // Validates the batch-level arguments (sizes, duplicates) and returns the meta to fill.
  ForwardMeta begin(ForwardMode mode, int batch_size, int padded_batch, int q_len, int num_steps,
                    const RequestId* requests) const;

  ForwardCapacity capacity_;
  ForwardLayout layout_;
  mutable std::vector<RequestId> sorted_scratch_;  // duplicate detection without allocation per step
};

// Smallest bucket >= batch_size among 1, 2, 4, ... (powers of two below max_batch) and max_batch
// itself. Throws for batch_size > max_batch or < 0 (0 maps to 1).
int bucket_for_batch(int batch_size, int max_batch);
// The buckets in increasing order: 1, 2, 4, ..., max_batch.
std::vector<int> batch_buckets(int max_batch);

}  // namespace openmla::runtime
