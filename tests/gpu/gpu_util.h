// Small helpers shared by the GPU tests: an owning device buffer and host <-> device copies.
// CUDA failures throw std::runtime_error naming the call, which GoogleTest reports as a failure.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <cuda_runtime_api.h>

namespace openmla::testing {

inline void cuda_check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) {
    throw std::runtime_error(std::string(what) + " failed: " + cudaGetErrorString(err));
  }
}
#define OPENMLA_TEST_CUDA(call) ::openmla::testing::cuda_check((call), #call)

// Properties of the current device (the one the tests run on).
inline cudaDeviceProp current_device_properties() {
  int device = 0;
  OPENMLA_TEST_CUDA(cudaGetDevice(&device));
  cudaDeviceProp prop{};
  OPENMLA_TEST_CUDA(cudaGetDeviceProperties(&prop, device));
  return prop;
}

// Owns `bytes` of device memory (cudaMalloc / cudaFree). Zero bytes holds no allocation.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes) {
    if (bytes_ > 0) OPENMLA_TEST_CUDA(cudaMalloc(&data_, bytes_));
  }
  ~DeviceBuffer() {
    if (data_ != nullptr) cudaFree(data_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(bytes_, other.bytes_);
    return *this;
  }

  void* get() const noexcept { return data_; }
  template <typename T>
  T* as() const noexcept { return static_cast<T*>(data_); }
  size_t bytes() const noexcept { return bytes_; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

// A device copy of a host vector.
template <typename T>
DeviceBuffer upload(const std::vector<T>& host) {
  DeviceBuffer buffer(host.size() * sizeof(T));
  if (!host.empty()) {
    OPENMLA_TEST_CUDA(cudaMemcpy(buffer.get(), host.data(), buffer.bytes(), cudaMemcpyHostToDevice));
  }
  return buffer;
}

// The first `count` elements of a device buffer (all of it by default), after a device sync.
template <typename T>
std::vector<T> download(const DeviceBuffer& buffer, size_t count = static_cast<size_t>(-1)) {
  if (count == static_cast<size_t>(-1)) count = buffer.bytes() / sizeof(T);
  if (count * sizeof(T) > buffer.bytes()) {
    throw std::runtime_error("download: expected at most " + std::to_string(buffer.bytes()) +
                             " bytes, got a request for " + std::to_string(count * sizeof(T)));
  }
  std::vector<T> host(count);
  OPENMLA_TEST_CUDA(cudaDeviceSynchronize());
  if (count > 0) {
    OPENMLA_TEST_CUDA(cudaMemcpy(host.data(), buffer.get(), count * sizeof(T), cudaMemcpyDeviceToHost));
  }
  return host;
}

// A stream owned for the duration of a test.
class Stream {
 public:
  Stream() { OPENMLA_TEST_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }
  ~Stream() { cudaStreamDestroy(stream_); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const noexcept { return stream_; }
  void sync() const { OPENMLA_TEST_CUDA(cudaStreamSynchronize(stream_)); }

 private:
  cudaStream_t stream_ = nullptr;
};

}  // namespace openmla::testing
