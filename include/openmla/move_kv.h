// Move KV rows between slots of the paged cache: the compaction after a speculative tree verify.
//
// A tree of n draft tokens is written at n consecutive positions after a request's committed prefix
// (slots s_0 .. s_{n-1}). Verify accepts one root-to-node path, e.g. tree positions 0, 2, 5; its KV
// must end up at the first `accepted` positions (s_0, s_1, s_2) in every layer's cache, so the moves
// are 2 -> 1 and 5 -> 2 (PagePool::commit_path returns them). move_kv performs such moves for a
// batch of requests, in one or many caches (layers), in one kernel.
#pragma once

#include <cuda_runtime_api.h>

#include "openmla/kv_format.h"
#include "openmla/tensor.h"

namespace openmla {

// Most moves of one group (one request): a tree verify has at most kMaxQueryLen draft tokens.
inline constexpr int kMaxMoveRowsPerGroup = kMaxQueryLen;  // 128
// Most caches of one call (e.g. every layer of a model, target and draft). More caches: more calls.
inline constexpr int kMaxMoveCaches = 128;

struct MoveKVArgs {
  TensorView src_slots;   // [m] int32 or int64: page_id * 64 + offset_in_page of each row's source
  TensorView dst_slots;   // [m], same dtype: the row's destination
  TensorView row_indptr;  // [g + 1] int32: group j (one request) owns rows row_indptr[j] .. row_indptr[j+1] - 1
  // The caches receiving the same moves: caches[0 .. num_caches), num_caches in [1, kMaxMoveCaches],
  // all of one format, num_pages and page stride, and no two sharing memory. Read on the host only
  // (the pointer need not outlive the call; a captured graph keeps the caches' data pointers).
  const KVCache* caches = nullptr;
  int num_caches = 0;
};

// Semantics, per cache and per group j, with rows R = [row_indptr[j], row_indptr[j+1]):
//   every valid row r in R: cache[dst_slots[r]] = old cache[src_slots[r]] (the whole token row,
//   kv_bytes_per_token(format) raw bytes: any format, no conversion), where "old" is the cache
//   before the call: the group's sources are all read before any of its destinations is written,
//   so a destination may be another row's source (5 -> 2 while 2 -> 1).
// Requirements on the caller (not checked): within a group the destinations are distinct; no slot
// of one group (source or destination) appears in another group (groups run concurrently).
// Device-side guards (values are data, never trusted for addressing):
//   - a slot outside [0, num_pages * 64) (negative included) sets kDeviceErrorSlotOutOfRange; that
//     row is skipped (neither slot dereferenced), the group's other rows still move;
//   - a group whose row range is negative, decreasing, past m or longer than kMaxMoveRowsPerGroup
//     sets kDeviceErrorQueryOffsets and moves nothing;
//   - src == dst is a no-op.
// The row counts live only on the device (row_indptr), so a captured graph replays with new counts;
// the capacities m and g are fixed by the views. Rows past row_indptr[g] are never read.
//
// GPU: one kernel on `stream` (a block per group and cache), no host sync, no allocation,
// graph-capturable. device_error_word (optional, device pointer) gets the bits OR-ed in. m == 0 or
// g == 0: no launch.
void move_kv(const MoveKVArgs& args, cudaStream_t stream, unsigned* device_error_word = nullptr);

}  // namespace openmla
