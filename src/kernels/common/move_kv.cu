// GPU move_kv: copy token rows between slots of paged caches as raw bytes, with gather-then-scatter
// semantics per group. Byte-identical with openmla::reference::move_kv.
//
// One block per (group, cache). The group's slots are checked once and turned into byte offsets in
// shared memory (-1: the row does not move). The row bytes are then moved in rounds over column
// ranges of 16-byte chunks: every (row, chunk) of a round is loaded into registers, the block
// synchronizes, and every chunk is stored. A round writes only its own columns, which no later round
// reads, so one barrier per round gives "all of the group's sources read before any destination is
// written" for every byte. A round covers as many columns as kThreads * kChunksPerThread registers
// hold for the group's rows: one round for a short path, 9 rounds of 8 columns for 128 bf16 rows.
#include "kernels/common/move_kv_launch.h"

#include <cstdint>

#include "core/check.h"
#include "openmla/error.h"

namespace openmla::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kChunksPerThread = 4;  // 16-byte vectors a thread holds between a round's load and store
constexpr int kChunkBytes = 16;
static_assert(kMaxMoveRowsPerGroup <= kThreads, "one pass of the block checks every row's slots");
static_assert(kMaxMoveRowsPerGroup <= kThreads * kChunksPerThread, "a round covers at least one column");
static_assert(kv_bytes_per_token(KVFormat::kBF16) % kChunkBytes == 0 &&
              kv_bytes_per_token(KVFormat::kFP8E4M3) % kChunkBytes == 0 &&
              kv_bytes_per_token(KVFormat::kFP8DsMla) % kChunkBytes == 0,
              "token rows are whole 16-byte chunks");

__device__ __forceinline__ int64_t load_slot(const void* slots, bool is_int64, int64_t i) {
  return is_int64 ? static_cast<const int64_t*>(slots)[i]
                  : static_cast<int64_t>(static_cast<const int32_t*>(slots)[i]);
}

__global__ void __launch_bounds__(kThreads) move_kv_kernel(const MoveKVParams p) {
  __shared__ int64_t src_offset[kMaxMoveRowsPerGroup];  // bytes from the cache base; -1: skip the row
  __shared__ int64_t dst_offset[kMaxMoveRowsPerGroup];

  const int group = static_cast<int>(blockIdx.x);
  // Errors are the same for every cache: the first cache's blocks report them.
  const bool reports = blockIdx.y == 0 && p.error_word != nullptr;
  const int64_t begin = p.row_indptr[group];
  const int64_t end = p.row_indptr[group + 1];
  if (begin < 0 || end < begin || end > p.num_rows || end - begin > kMaxMoveRowsPerGroup) {
    if (reports && threadIdx.x == 0) atomicOr(p.error_word, kDeviceErrorQueryOffsets);
    return;  // uniform: every thread read the same range
  }
  const int rows = static_cast<int>(end - begin);
  if (rows == 0) return;

  if (static_cast<int>(threadIdx.x) < rows) {
    const int64_t src = load_slot(p.src_slots, p.slots_int64, begin + threadIdx.x);
    const int64_t dst = load_slot(p.dst_slots, p.slots_int64, begin + threadIdx.x);
    const bool in_range = src >= 0 && src < p.num_slots && dst >= 0 && dst < p.num_slots;
    if (!in_range && reports) atomicOr(p.error_word, kDeviceErrorSlotOutOfRange);
    const bool moves = in_range && src != dst;
    src_offset[threadIdx.x] =
        moves ? (src / kPageSize) * p.page_stride_bytes + (src % kPageSize) * p.row_bytes : -1;
    dst_offset[threadIdx.x] =
        moves ? (dst / kPageSize) * p.page_stride_bytes + (dst % kPageSize) * p.row_bytes : -1;
  }
  __syncthreads();

  uint8_t* const cache = p.caches[blockIdx.y];
  const int chunks = p.row_bytes / kChunkBytes;
  const int round_width = max(1, min(chunks, kThreads * kChunksPerThread / rows));
  for (int first = 0; first < chunks; first += round_width) {
    const int width = min(round_width, chunks - first);
    const int items = rows * width;  // (row, column) pairs of this round, column fastest (coalesced)
    uint4 held[kChunksPerThread];
#pragma unroll
    for (int k = 0; k < kChunksPerThread; ++k) {
      const int item = static_cast<int>(threadIdx.x) + k * kThreads;
      if (item < items) {
        const int64_t from = src_offset[item / width];
        if (from >= 0) {
          held[k] = *reinterpret_cast<const uint4*>(cache + from +
                                                    static_cast<int64_t>(first + item % width) * kChunkBytes);
        }
      }
    }
    __syncthreads();  // every source chunk of these columns is read before any is overwritten
#pragma unroll
    for (int k = 0; k < kChunksPerThread; ++k) {
      const int item = static_cast<int>(threadIdx.x) + k * kThreads;
      if (item < items) {
        const int row = item / width;
        if (src_offset[row] >= 0) {
          *reinterpret_cast<uint4*>(cache + dst_offset[row] +
                                    static_cast<int64_t>(first + item % width) * kChunkBytes) = held[k];
        }
      }
    }
  }
}

}  // namespace

void launch_move_kv(const MoveKVParams& p, cudaStream_t stream) {
  if (p.num_groups < 1 || p.num_caches < 1 || p.num_caches > kMaxMoveCaches)
    detail::fail(Status::kInternal, "move_kv: launch with ", p.num_groups, " groups and ", p.num_caches, " caches");
  const dim3 grid(static_cast<unsigned>(p.num_groups), static_cast<unsigned>(p.num_caches));
  move_kv_kernel<<<grid, kThreads, 0, stream>>>(p);
  OPENMLA_CUDA_CHECK(cudaGetLastError());
}

}  // namespace openmla::kernels
