// Host side of the sm90a decode kernels: the KV tensor map and the launches.
#pragma once

#include <cuda_runtime_api.h>

#include "kernels/common/decode_params.h"

namespace openmla::kernels::sm90 {

// Raises the dynamic shared-memory limit of the kernel for this query type (once per device).
cudaError_t prepare_wide_decode(bool q_is_bf16);
// Grid (m_tiles of 64 rows, p.num_parts); the KV tensor map is encoded from p (16-bit caches).
cudaError_t launch_wide_decode(const DecodeParams& p, bool q_is_bf16, bool programmatic,
                               cudaStream_t stream);

template <typename T>
cudaError_t run_wide_decode(const DecodeParams& p, const void* kv_map, bool programmatic,
                            cudaStream_t stream);
template <typename T>
cudaError_t prepare_wide_decode_kernel();

}  // namespace openmla::kernels::sm90
