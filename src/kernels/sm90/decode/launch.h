// Host side of the sm90a decode kernels: the KV tensor map and the launches.
#pragma once

#include <cuda_runtime_api.h>

#include "kernels/common/decode_params.h"

namespace openmla::kernels::sm90 {

// The instantiations (instantiations/*.cu) behind kernels::prepare_sm90_decode and
// kernels::launch_sm90_decode (kernels/common/launch.h): grid (m_tiles of 64 rows, p.num_parts).
template <typename T>
cudaError_t run_wide_decode(const DecodeParams& p, const void* kv_map, bool programmatic,
                            cudaStream_t stream);
template <typename T>
cudaError_t prepare_wide_decode_kernel();

}  // namespace openmla::kernels::sm90
