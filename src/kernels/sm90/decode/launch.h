// Host side of the sm90a decode kernels: the KV tensor map and the launches.
#pragma once

#include <cuda_runtime_api.h>

#include "kernels/common/decode_params.h"

namespace openmla::kernels::sm90 {

// The narrow schedule (operands swapped, kernel.cuh) serves up to this many query rows.
inline constexpr int kNarrowMaxRows = 16;

template <typename T, bool kNarrow>
cudaError_t run_decode(const DecodeParams& p, const void* kv_map, bool programmatic, cudaStream_t stream);
template <typename T, bool kNarrow>
cudaError_t prepare_decode_kernel();

}  // namespace openmla::kernels::sm90
