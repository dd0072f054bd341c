// The FP8-math kernel's entry points (defined in instantiate.cuh, one instantiation file per query type),
// called by the sm90 dispatch (kernels/sm90/decode/launch.cu).
#pragma once

#include <cuda_runtime_api.h>

#include "kernels/common/decode_params.h"
#include "kernels/sm90/decode/common.h"

namespace openmla::kernels::sm90 {

// Per-tensor e4m3 caches: grid (m_tiles of 64 rows, p.num_parts), the `kv` map of encode_fp8_math_kv_map
// (tensor_maps.cu). T: the query type.
template <typename T>
cudaError_t run_fp8_math_decode(const DecodeParams& p, const TensorMaps& maps, bool programmatic, cudaStream_t stream);
template <typename T>
cudaError_t prepare_fp8_math_decode_kernel();

}  // namespace openmla::kernels::sm90
