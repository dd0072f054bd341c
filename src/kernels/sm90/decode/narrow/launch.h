// The narrow kernel's entry points (defined in instantiate.cuh, one instantiation file per form), called by
// the sm90 dispatch (kernels/sm90/decode/launch.cu).
#pragma once

#include <cuda_runtime_api.h>

#include "kernels/common/decode_params.h"
#include "kernels/sm90/decode/common.h"

namespace openmla::kernels::sm90 {

// Grid (m_tiles of kRows rows, p.num_parts), its own maps (tensor_maps.cu, NarrowPage). kRows: 16 or 32;
// kProducerWarps: 1 or 2 (NarrowConfig).
template <typename T, int kKind, int kRows, int kProducerWarps>
cudaError_t run_narrow_decode(const DecodeParams& p, const TensorMaps& maps, bool programmatic, cudaStream_t stream);
template <typename T, int kKind, int kRows, int kProducerWarps>
cudaError_t prepare_narrow_decode_kernel();

}  // namespace openmla::kernels::sm90
