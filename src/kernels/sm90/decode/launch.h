// The sm90 backend's host entry points (launch.cu): the dispatch from a launch configuration
// (launch_config.h) to the instantiations of the wide, narrow and FP8-math kernels, with the call's tensor
// maps (tensor_maps.h).
#pragma once

#include <cuda_runtime_api.h>

#include "kernels/common/decode_params.h"
#include "kernels/sm90/decode/launch_config.h"

namespace openmla::kernels::sm90 {

// Raises the configured kernel's dynamic shared-memory limit and checks that its register budget can be
// paid (once per plan).
cudaError_t prepare_decode(const LaunchConfig& config);
// Encodes the tensor maps and runs the configured kernel; grid (m_tiles, p.num_parts). p.fp16_partials must be
// fp16_partials(config, ...) for this call (the wide seesaw is instantiated once per partial-row form).
cudaError_t launch_decode(const DecodeParams& p, const LaunchConfig& config, bool programmatic, cudaStream_t stream);

}  // namespace openmla::kernels::sm90
