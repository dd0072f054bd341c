// Sparse decode key counts: n = min(topk_length[b], topk) main keys and m = min(extra_topk_length[b], extra_topk)
// extra keys for every query token of request b; a negative length makes the count -1, which the decode
// kernel's request check flags (kDeviceErrorNegativeSeqlen) and poisons. FlashMLA's rule, topk_length past topk
// keeps topk, is a clamp, not an error.
#include "kernels/common/sparse_lengths.h"

#include "core/check.h"

namespace openmla::kernels {
namespace {

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads) sparse_lengths_kernel(const SparseLengthsParams p) {
  const int r = blockIdx.x * kThreads + threadIdx.x;
  if (r >= p.batch * p.q_len) return;
  const int b = r / p.q_len;
  const int n = p.topk_length != nullptr ? p.topk_length[b] : p.topk;
  const int m = p.extra_topk_length != nullptr ? p.extra_topk_length[b] : p.extra_topk;
  const bool bad = n < 0 || m < 0;
  const int main = n < p.topk ? n : p.topk;
  const int extra = m < p.extra_topk ? m : p.extra_topk;
  p.main_len[r] = bad ? 0 : main;
  p.seqlens[r] = bad ? -1 : main + extra;
}

}  // namespace

void launch_sparse_lengths(const SparseLengthsParams& p, cudaStream_t stream) {
  const int requests = p.batch * p.q_len;
  if (requests <= 0) return;
  sparse_lengths_kernel<<<(requests + kThreads - 1) / kThreads, kThreads, 0, stream>>>(p);
  OPENMLA_CUDA_CHECK(cudaGetLastError());
}

}  // namespace openmla::kernels
