// Plain-old-data parameters of the GPU move_kv kernel, filled by openmla::move_kv from validated
// views, and its launcher (src/kernels/common/move_kv.cu).
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

#include "openmla/move_kv.h"

namespace openmla::kernels {

struct MoveKVParams {
  const void* src_slots;  // [num_rows] int32 or int64, contiguous
  const void* dst_slots;  // [num_rows], same dtype, contiguous
  bool slots_int64;
  const int32_t* row_indptr;  // [num_groups + 1], device values (checked by the kernel)
  int64_t num_rows;           // m: capacity of the slot arrays; a group's range must end at or before it
  int num_groups;             // g >= 1 (no launch for 0)

  uint8_t* caches[kMaxMoveCaches];  // page 0, token 0 of each cache; num_caches used
  int num_caches;                   // >= 1
  int64_t page_stride_bytes;        // shared by every cache (a multiple of 16)
  int row_bytes;                    // kv_bytes_per_token(format): a multiple of 16
  int64_t num_slots;                // num_pages * 64: slots outside [0, num_slots) are flagged

  unsigned* error_word;  // optional (nullptr)
};

// One kernel on `stream` (grid: groups x caches); no sync, no allocation (graph-capturable).
// Throws Error(kCudaError) when the launch fails.
void launch_move_kv(const MoveKVParams& params, cudaStream_t stream);

}  // namespace openmla::kernels
