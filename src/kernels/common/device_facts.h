// What the launch choices need to know about the device, read once when a plan is made.
#pragma once

#include <cstddef>

namespace openmla::kernels {

struct DeviceFacts {
  int sm_count = 0;
  size_t max_smem_per_block = 0;  // the opt-in limit (cudaDeviceProp::sharedMemPerBlockOptin)
  int cc_major = 0, cc_minor = 0;
  const char* name = "";          // for messages
};

}  // namespace openmla::kernels
