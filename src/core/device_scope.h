// Makes a device current for a scope and restores the caller's on exit (also when an exception leaves
// it): the library's entry points run on their object's device whatever the caller's current one is.
#pragma once

#include <cuda_runtime_api.h>

#include <new>

#include "core/check.h"

namespace openmla::detail {

class DeviceScope {
 public:
  // Throws Error(kCudaError) when the device cannot be made current.
  explicit DeviceScope(int device) {
    OPENMLA_CUDA_CHECK(cudaGetDevice(&previous_));
    if (device != previous_) OPENMLA_CUDA_CHECK(cudaSetDevice(device));
  }
  // For destructors: never throws (a failed switch leaves the current device as it was).
  DeviceScope(int device, const std::nothrow_t&) noexcept {
    if (cudaGetDevice(&previous_) != cudaSuccess) return;
    if (device != previous_) cudaSetDevice(device);
  }
  ~DeviceScope() { cudaSetDevice(previous_); }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int previous_ = 0;
};

}  // namespace openmla::detail
