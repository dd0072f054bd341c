// The split-KV planner (plan_kernel.cu): the schedule of schedule.h from device seqlens, in one CTA with no
// host sync (graph-capturable).
#pragma once

#include <cuda_runtime_api.h>

#include "kernels/common/schedule.h"

namespace openmla::kernels {

cudaError_t launch_plan(const int* seqlens, int batch, int num_parts, const SplitTuning& tuning, SplitPart* parts,
                        RequestSplit* splits, cudaStream_t stream);

}  // namespace openmla::kernels
