// The launch every kernel of the library goes through: cudaLaunchKernelEx, with programmatic stream
// serialization (PDL, sm_90+) when asked, so that the launch overlaps the previous kernel's tail; the kernel
// then waits (griddepcontrol.wait, kernels/arch/sync.cuh) before it touches that kernel's outputs.
#pragma once

#include <cuda_runtime.h>

#include <utility>

namespace openmla::kernels {

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
