// The wide kernel's entry points (defined in instantiate.cuh, one instantiation file per query type and
// cache kind), called by the sm90 dispatch (kernels/sm90/decode/launch.cu).
#pragma once

#include <cuda_runtime_api.h>

#include "kernels/common/decode_params.h"
#include "kernels/sm90/decode/common.h"

namespace openmla::kernels::sm90 {

// Grid (m_tiles of 64 rows, p.num_parts). kKind: kernels/common/kv_kind.h. seesaw: the consumers' schedule
// (Schedule::seesaw, launch_config.h); prepare readies both.
template <typename T, int kKind>
cudaError_t run_wide_decode(const DecodeParams& p, const TensorMaps& maps, bool seesaw, bool programmatic,
                            cudaStream_t stream);
template <typename T, int kKind>
cudaError_t prepare_wide_decode_kernel();

}  // namespace openmla::kernels::sm90
