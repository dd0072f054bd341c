// The portable backend's host entry points (launch.cu), and the instantiations behind them (one per file
// in instantiations/, defined by instantiate.cuh).
#pragma once

#include <cuda_runtime_api.h>

#include "kernels/common/decode_params.h"
#include "kernels/portable/decode/launch_config.h"

namespace openmla::kernels::portable {

// Raises the chosen kernel's dynamic shared-memory limit (once per plan) and reports how many of its CTAs
// are resident on an SM (the occupancy calculator).
cudaError_t prepare_decode(const LaunchConfig& config, int* resident_ctas_per_sm);
// The split-KV kernel of the config; grid = (m_tiles, p.num_parts). Writes its partial rows in the format of
// fp16_partials(config).
cudaError_t launch_decode(const DecodeParams& p, const LaunchConfig& config, bool programmatic, cudaStream_t stream);

template <class Cfg, typename T, int kKind, int kQueries>
cudaError_t run_portable_decode(const DecodeParams& p, bool programmatic, cudaStream_t stream);
template <class Cfg, typename T, int kKind, int kQueries>
cudaError_t prepare_portable_decode_kernel();
template <class Cfg, typename T, int kKind, int kQueries>
cudaError_t portable_decode_occupancy(int* ctas);

}  // namespace openmla::kernels::portable
