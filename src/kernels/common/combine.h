// The combine kernel (combine.cu): merges the partial results of split requests into out / lse.
#pragma once

#include <cuda_runtime_api.h>

#include "kernels/common/decode_params.h"

namespace openmla::kernels {

// Reads the partial rows in the format p.fp16_partials names (the one the decode kernel wrote).
// programmatic: launched with programmatic stream serialization (sm_90+); the kernel waits
// (griddepcontrol.wait) for the decode grid before it reads a partial.
cudaError_t launch_combine(const DecodeParams& p, bool q_is_bf16, bool programmatic, cudaStream_t stream);

}  // namespace openmla::kernels
