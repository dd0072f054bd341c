// Declarations of the portable kernel instantiations (one per file in instantiations/).
#pragma once

#include <cuda_runtime_api.h>

#include "kernels/common/decode_params.h"

namespace openmla::kernels::portable {

template <class Cfg, typename T, int kKind>
cudaError_t run_portable_decode(const DecodeParams& p, bool programmatic, cudaStream_t stream);
template <class Cfg, typename T, int kKind>
cudaError_t prepare_portable_decode_kernel();
template <class Cfg, typename T, int kKind>
cudaError_t portable_decode_occupancy(int* ctas);

}  // namespace openmla::kernels::portable
