#include "openmla/tensor.h"

#include <string>

#include "core/check.h"

namespace openmla {

int dtype_size(DType t) noexcept {
  switch (t) {
    case DType::kFloat32: return 4;
    case DType::kBFloat16: return 2;
    case DType::kFloat16: return 2;
    case DType::kFloat8E4M3: return 1;
    case DType::kUInt8: return 1;
    case DType::kInt32: return 4;
    case DType::kInt64: return 8;
    case DType::kFloat64: return 8;
    case DType::kUndefined: return 0;
  }
  return 0;
}

const char* dtype_name(DType t) noexcept {
  switch (t) {
    case DType::kUndefined: return "undefined";
    case DType::kFloat32: return "float32";
    case DType::kBFloat16: return "bfloat16";
    case DType::kFloat16: return "float16";
    case DType::kFloat8E4M3: return "float8_e4m3";
    case DType::kUInt8: return "uint8";
    case DType::kInt32: return "int32";
    case DType::kInt64: return "int64";
    case DType::kFloat64: return "float64";
  }
  return "invalid_dtype";
}

int64_t TensorView::numel() const noexcept {
  if (ndim <= 0) return 0;  // an undefined view holds nothing (no 0-d scalars in this API)
  int64_t n = 1;
  for (int d = 0; d < ndim; ++d) n *= shape[d];
  return n;
}

bool TensorView::is_contiguous() const noexcept {
  if (ndim <= 0) return false;
  // Row-major without gaps; the stride of a size-1 dimension is never used, so it may be anything
  // (framework tensors often carry arbitrary strides there).
  int64_t expected = 1;
  for (int d = ndim - 1; d >= 0; --d) {
    if (shape[d] == 0) return true;
    if (shape[d] != 1 && strides[d] != expected) return false;
    expected *= shape[d];
  }
  return true;
}

namespace {
std::string int_list(const int64_t* values, int n) {
  std::string s = "[";
  for (int d = 0; d < n; ++d) {
    if (d > 0) s += ", ";
    s += std::to_string(values[d]);
  }
  s += ']';
  return s;
}

TensorView make_view(void* data, DType dtype, std::initializer_list<int64_t> shape,
                     DeviceType device, int device_id) {
  if (shape.size() == 0 || shape.size() > static_cast<size_t>(kMaxTensorDims))
    detail::fail_arg("shape", detail::concat("1 to ", kMaxTensorDims, " dimensions"),
                     detail::concat(shape.size(), " dimensions"));
  TensorView t;
  t.data = data;
  t.dtype = dtype;
  t.device = device;
  t.device_id = device_id;
  t.ndim = static_cast<int>(shape.size());
  int d = 0;
  for (int64_t extent : shape) {
    if (extent < 0) detail::fail_arg("shape", "non-negative extents", int_list(shape.begin(), t.ndim));
    t.shape[d++] = extent;
  }
  return t;
}
}  // namespace

std::string TensorView::shape_str() const { return int_list(shape, ndim); }
std::string TensorView::strides_str() const { return int_list(strides, ndim); }

TensorView make_tensor(void* data, DType dtype, std::initializer_list<int64_t> shape,
                       DeviceType device, int device_id) {
  TensorView t = make_view(data, dtype, shape, device, device_id);
  int64_t stride = 1;
  for (int d = t.ndim - 1; d >= 0; --d) {
    t.strides[d] = stride;
    stride *= t.shape[d];
  }
  return t;
}

TensorView make_tensor_strided(void* data, DType dtype, std::initializer_list<int64_t> shape,
                               std::initializer_list<int64_t> strides, DeviceType device,
                               int device_id) {
  TensorView t = make_view(data, dtype, shape, device, device_id);
  if (strides.size() != shape.size())
    detail::fail_arg("strides", detail::concat(shape.size(), " strides (one per dimension of ",
                                               t.shape_str(), ")"),
                     int_list(strides.begin(), static_cast<int>(strides.size())));
  int d = 0;
  for (int64_t s : strides) t.strides[d++] = s;
  return t;
}

}  // namespace openmla
