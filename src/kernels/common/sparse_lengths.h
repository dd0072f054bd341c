// Sparse top-k decode's per-request key counts (sparse_lengths.cu): its requests are the call's query tokens,
// r = b * s_q + i, each with keys from the main index list, then the extra one's.
#pragma once

#include <cuda_runtime_api.h>

namespace openmla::kernels {

struct SparseLengthsParams {
  const int* topk_length;        // [batch] or nullptr (every query token has topk main keys)
  const int* extra_topk_length;  // [batch] or nullptr (extra_topk extra keys)
  int batch, q_len, topk, extra_topk;
  int* seqlens;   // [batch * q_len]: main + extra keys, -1 for a request with a negative length
  int* main_len;  // [batch * q_len]: main keys
};

// One small kernel on `stream`; no sync, no allocation (graph-capturable). Throws Error(kCudaError) when the
// launch fails.
void launch_sparse_lengths(const SparseLengthsParams& params, cudaStream_t stream);

}  // namespace openmla::kernels
