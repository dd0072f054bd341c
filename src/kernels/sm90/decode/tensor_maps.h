// Encoding the sm90 kernels' tensor maps (TensorMaps, common.h) for a call, on the host (tensor_maps.cu).
// Each returns cudaErrorNotSupported when the driver has no cuTensorMapEncodeTiled, cudaErrorInvalidValue when
// the driver rejects a map.
#pragma once

#include <cuda_runtime_api.h>

#include "kernels/common/decode_params.h"
#include "kernels/sm90/decode/common.h"
#include "openmla/kv_format.h"

namespace openmla::kernels::sm90 {

// The wide kernel: `kv` (and for ds_mla `scales` and `rope`) for the cache format, and its Q map `q`.
cudaError_t encode_wide_kv_maps(const DecodeParams& p, KVFormat format, TensorMaps* maps);
cudaError_t encode_q_map(const DecodeParams& p, bool q_is_bf16, CUtensorMap* map);
// The narrow kernel's page maps (narrow/config.h, NarrowPage).
cudaError_t encode_narrow_kv_maps(const DecodeParams& p, KVFormat format, TensorMaps* maps);
// The FP8-math kernel's `kv` map.
cudaError_t encode_fp8_math_kv_map(const DecodeParams& p, TensorMaps* maps);

}  // namespace openmla::kernels::sm90
