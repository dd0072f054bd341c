// Host launchers of the kernels (defined in the .cu files of src/kernels). Each returns the launch
// status; DecodePlan turns failures into openmla::Error.
#pragma once

#include <cuda_runtime_api.h>

#include "core/decode_config.h"
#include "kernels/common/decode_params.h"

namespace openmla::kernels {

// Split-KV schedule from device seqlens (one CTA; graph-capturable).
cudaError_t launch_plan(const int* seqlens, int batch, int num_parts, SplitPart* parts,
                        RequestSplit* splits, cudaStream_t stream);

// Merges partial results of split requests into out / lse.
cudaError_t launch_combine(const DecodeParams& p, bool q_is_bf16, cudaStream_t stream);

// Raises the kernel's dynamic shared-memory limit (once per process and device, on plan creation).
cudaError_t prepare_portable_decode(detail::PortableTile tile, bool q_is_bf16);
// Resident CTAs per SM of the portable kernel for this tile (occupancy calculator).
cudaError_t portable_decode_ctas_per_sm(detail::PortableTile tile, bool q_is_bf16, int* ctas);
// The portable split-KV kernel for every tile / dtype; grid = (m_tiles, num_parts).
cudaError_t launch_portable_decode(const DecodeParams& p, detail::PortableTile tile, bool q_is_bf16,
                                   cudaStream_t stream);

}  // namespace openmla::kernels
