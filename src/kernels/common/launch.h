// Host launchers of the kernels (defined in the .cu files of src/kernels). Each returns the launch
// status; DecodePlan turns failures into openmla::Error.
#pragma once

#include <cuda_runtime.h>

#include <utility>

#include "core/decode_config.h"
#include "kernels/common/decode_params.h"

namespace openmla::kernels {

// Split-KV schedule from device seqlens (one CTA; graph-capturable). A part gets at least
// min_units_per_part units; requests stay whole within max(kWholeRequestSlackUnits, whole_slack_percent % of
// the equal share, weighing a request kRequestOverheadUnits besides its blocks); a split plan weighs it
// split_overhead_units (schedule.h).
cudaError_t launch_plan(const int* seqlens, int batch, int num_parts, int min_units_per_part,
                        int whole_slack_percent, int split_overhead_units, SplitPart* parts, RequestSplit* splits,
                        cudaStream_t stream);

// Merges partial results of split requests into out / lse.
// programmatic: launch with programmatic stream serialization (sm_90+), so the launch overlaps the
// previous kernel's tail; the kernel waits (griddepcontrol.wait) before touching its inputs.
cudaError_t launch_combine(const DecodeParams& p, bool q_is_bf16, bool programmatic, cudaStream_t stream);

// Raises the kernel's dynamic shared-memory limit (once per process and device, on plan creation).
cudaError_t prepare_portable_decode(detail::PortableTile tile, KVFormat format, bool q_is_bf16);
// Resident CTAs per SM of the portable kernel for this tile (occupancy calculator).
cudaError_t portable_decode_ctas_per_sm(detail::PortableTile tile, KVFormat format, bool q_is_bf16, int* ctas);
// The portable split-KV kernel for every tile / query dtype / cache format; grid = (m_tiles, num_parts).
// Sets p.fp16_partials to the format of the partial rows the kernel writes (for the combine after it).
cudaError_t launch_portable_decode(DecodeParams& p, detail::PortableTile tile, KVFormat format,
                                   bool q_is_bf16, bool programmatic, cudaStream_t stream);

// The sm90a kernels (built when OPENMLA_HAS_SM90; every cache format), for the schedule that
// detail::choose_sm90_schedule picked: prepare raises its dynamic shared-memory limit; launch encodes
// the KV tensor maps and runs it, setting p.fp16_partials as launch_portable_decode does.
cudaError_t prepare_sm90_decode(KVFormat format, bool q_is_bf16, const detail::Sm90Schedule& schedule);
cudaError_t launch_sm90_decode(DecodeParams& p, KVFormat format, bool q_is_bf16,
                               const detail::Sm90Schedule& schedule, bool programmatic, cudaStream_t stream);

// cudaLaunchKernelEx with the programmatic-serialization attribute when asked.
template <typename... KernelArgs, typename... Args>
cudaError_t launch_kernel(void (*kernel)(KernelArgs...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                          bool programmatic, Args&&... args) {
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  cudaLaunchAttribute attribute[1];
  attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute[0].val.programmaticStreamSerializationAllowed = 1;
  config.attrs = attribute;
  config.numAttrs = programmatic ? 1 : 0;
  return cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
}

}  // namespace openmla::kernels
