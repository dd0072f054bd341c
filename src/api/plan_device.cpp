#include "api/plan_device.h"

#include <string>

#include "core/check.h"

namespace openmla::detail {

kernels::DeviceFacts PlanDevice::facts() const {
  kernels::DeviceFacts f;
  f.sm_count = prop.multiProcessorCount;
  f.max_smem_per_block = prop.sharedMemPerBlockOptin;
  f.cc_major = prop.major;
  f.cc_minor = prop.minor;
  f.name = prop.name;
  return f;
}

PlanDevice plan_device(int device) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    cudaGetLastError();
    fail(Status::kUnsupported, "device: expected a CUDA device, got none");
  }
  if (device < 0) OPENMLA_CUDA_CHECK(cudaGetDevice(&device));
  if (device >= count) fail_arg("device", std::string("a CUDA device index < ") + std::to_string(count), device);
  PlanDevice d;
  d.index = device;
  OPENMLA_CUDA_CHECK(cudaGetDeviceProperties(&d.prop, device));
  if (d.prop.major < 8)
    fail(Status::kUnsupported, "device: expected compute capability >= 8.0, got ", d.prop.major, ".", d.prop.minor,
         " (", d.prop.name, ")");
  return d;
}

}  // namespace openmla::detail
