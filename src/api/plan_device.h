// The device a plan is made for: resolved, checked and queried once, by every plan's constructor.
#pragma once

#include <cuda_runtime_api.h>

#include "kernels/common/device_facts.h"

namespace openmla::detail {

struct PlanDevice {
  int index = 0;
  cudaDeviceProp prop{};
  // The launch choices' view of prop (its name points into prop: valid while this object is).
  kernels::DeviceFacts facts() const;
};

// device < 0: the current device. Throws Error(kUnsupported) without a CUDA device or below compute capability 8.0,
// Error(kInvalidArgument) for an index past the device count.
PlanDevice plan_device(int device);

}  // namespace openmla::detail
