// CPU write_kv: the same conversion and skip rules as the GPU writer (docs/kv-formats.md).
#include <cmath>
#include <cstring>

#include "core/validate.h"
#include "openmla/error.h"
#include "openmla/fp8.h"
#include "openmla/reference.h"

namespace openmla::reference {
namespace {

// One row of a bf16 / fp16 / float32 tensor as floats (the conversions are exact).
void load_row_as_float(const TensorView& t, int64_t row, int count, float* out) {
  const int64_t offset = row * t.strides[0];
  switch (t.dtype) {
    case DType::kFloat32: {
      std::memcpy(out, static_cast<const float*>(t.data) + offset, count * sizeof(float));
      break;
    }
    case DType::kBFloat16: {
      const uint16_t* src = static_cast<const uint16_t*>(t.data) + offset;
      for (int i = 0; i < count; ++i) out[i] = fp8::bf16_to_float(src[i]);
      break;
    }
    case DType::kFloat16: {
      const uint16_t* src = static_cast<const uint16_t*>(t.data) + offset;
      for (int i = 0; i < count; ++i) out[i] = fp8::fp16_to_float(src[i]);
      break;
    }
    default:
      throw Error(Status::kInternal, "write_kv reference: unexpected input dtype after validation");
  }
}

}  // namespace

unsigned write_kv(const WriteKVArgs& args) {
  detail::validate_write_kv_args(args, DeviceType::kCPU, 0);
  const KVCache& cache = args.cache;
  const TensorView& data = cache.data;
  const int64_t n = args.kv_latent.shape[0];
  const int64_t num_slots = data.shape[0] * kPageSize;
  const int64_t elem = dtype_size(data.dtype);
  unsigned errors = kDeviceErrorNone;
  if (n == 0) return errors;  // as the GPU writer, which launches nothing

  // The device scale (here in host memory) replaces cache.scale; a bad one writes nothing.
  float fp8_scale = cache.scale;
  if (cache.format == KVFormat::kFP8E4M3 && cache.device_scale.defined()) {
    std::memcpy(&fp8_scale, cache.device_scale.data, sizeof(float));
    if (!(std::isfinite(fp8_scale) && fp8_scale > 0.0f)) return kDeviceErrorScale;
  }
  const bool nan_overflow = args.e4m3_overflow == E4M3Overflow::kNaN;

  float values[kHeadDimQK];  // 512 latent then 64 rope
  for (int64_t i = 0; i < n; ++i) {
    const int64_t slot = args.slots.dtype == DType::kInt32 ? static_cast<const int32_t*>(args.slots.data)[i]
                                                           : static_cast<const int64_t*>(args.slots.data)[i];
    if (slot < 0) continue;  // padding token
    if (slot >= num_slots) {
      errors |= kDeviceErrorSlotOutOfRange;
      continue;
    }
    const int64_t page = slot / kPageSize;
    const int64_t offset = slot % kPageSize;
    uint8_t* dst = static_cast<uint8_t*>(data.data) + (page * data.strides[0] + offset * data.strides[1]) * elem;
    load_row_as_float(args.kv_latent, i, kHeadDimV, values);
    load_row_as_float(args.k_rope, i, kRopeDim, values + kHeadDimV);
    switch (cache.format) {
      case KVFormat::kBF16:
      case KVFormat::kFP16: {
        uint16_t bits[kHeadDimQK];
        for (int j = 0; j < kHeadDimQK; ++j)
          bits[j] = cache.format == KVFormat::kBF16 ? fp8::float_to_bf16(values[j]) : fp8::float_to_fp16(values[j]);
        std::memcpy(dst, bits, sizeof(bits));
        break;
      }
      case KVFormat::kFP8E4M3: {
        for (int j = 0; j < kHeadDimQK; ++j)
          dst[j] = nan_overflow ? fp8::e4m3_encode_scaled_nan_overflow(values[j], fp8_scale)
                                : fp8::e4m3_encode_scaled(values[j], fp8_scale);
        break;
      }
      case KVFormat::kFP8DsMla: {
        fp8::ds_mla_encode_token(values, values + kHeadDimV, dst);
        break;
      }
    }
  }
  return errors;
}

}  // namespace openmla::reference
