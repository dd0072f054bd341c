// A light, non-owning tensor view: pointer, dtype, shape, strides (in elements), device.
// Field-for-field what a DLPack DLTensor carries, so bindings wrap framework tensors without copies.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>

namespace openmla {

enum class DType : uint8_t {
  kUndefined = 0,
  kFloat32,
  kBFloat16,
  kFloat16,
  kFloat8E4M3,  // OCP e4m3 "fn" (max 448, no inf)
  kUInt8,       // raw bytes (FP8 caches may also be passed as uint8)
  kInt32,
  kInt64,
  kFloat64,  // CPU reference outputs only
};

int dtype_size(DType t) noexcept;
const char* dtype_name(DType t) noexcept;

enum class DeviceType : uint8_t { kCPU = 1, kCUDA = 2 };  // DLPack's kDLCPU = 1, kDLCUDA = 2

inline constexpr int kMaxTensorDims = 6;

struct TensorView {
  void* data = nullptr;
  DType dtype = DType::kUndefined;
  DeviceType device = DeviceType::kCPU;
  int device_id = 0;
  int ndim = 0;
  int64_t shape[kMaxTensorDims] = {};
  int64_t strides[kMaxTensorDims] = {};  // in elements, as in DLPack

  bool defined() const noexcept { return ndim > 0 || data != nullptr; }
  int64_t numel() const noexcept;
  bool is_contiguous() const noexcept;  // row-major, no gaps
  std::string shape_str() const;        // "[4, 1, 16, 576]"
  std::string strides_str() const;
};

// Row-major contiguous view.
TensorView make_tensor(void* data, DType dtype, std::initializer_list<int64_t> shape,
                       DeviceType device = DeviceType::kCPU, int device_id = 0);
// View with explicit strides (elements).
TensorView make_tensor_strided(void* data, DType dtype, std::initializer_list<int64_t> shape,
                               std::initializer_list<int64_t> strides,
                               DeviceType device = DeviceType::kCPU, int device_id = 0);

}  // namespace openmla
