// The block table, the one place the kernels read it: request `req`'s row holds the page ids of its
// 64-token blocks ([b, max_pages] int32, rows block_table_stride apart). Ids are as the caller wrote them:
// every reader range-checks an id (0 <= id < num_pages) before it addresses memory with it, and a bad id
// poisons its segment (kDeviceErrorPageIdOutOfRange) instead of being used. (The check is written out where
// it is made: through a helper returning bool, the compiler schedules the surrounding code differently.)
#pragma once

#include "kernels/common/decode_params.h"

namespace openmla::kernels {

// The row of page ids of request `req`.
__device__ __forceinline__ const int* page_ids(const DecodeParams& p, int req) {
  return p.block_table + req * p.block_table_stride;
}

// The page id of block `block` (tokens [64 block, 64 block + 64)) of request `req`, unchecked.
__device__ __forceinline__ int page_id(const DecodeParams& p, int req, int block) {
  return p.block_table[req * p.block_table_stride + block];
}

}  // namespace openmla::kernels
