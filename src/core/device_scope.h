// Makes a device current for a scope and restores the caller's on exit (also when an exception leaves
// it): the library's entry points run on their object's device whatever the caller's current one is.
#pragma once

#include <cuda_runtime_api.h>

#include "core/check.h"

namespace openmla::detail {

class DeviceScope {
 public:
  explicit DeviceScope(int device) {
    OPENMLA_CUDA_CHECK(cudaGetDevice(&previous_));
    if (device != previous_) OPENMLA_CUDA_CHECK(cudaSetDevice(device));
  }
  ~DeviceScope() { cudaSetDevice(previous_); }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int previous_ = 0;
};

}  // namespace openmla::detail
