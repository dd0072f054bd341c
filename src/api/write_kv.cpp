// openmla::write_kv on the GPU: validate on the host, then one kernel (src/kernels/common/write_kv.cu).
#include "openmla/write_kv.h"

#include <cstdint>

#include <cuda_runtime_api.h>

#include "core/check.h"
#include "core/validate.h"
#include "kernels/common/write_kv_launch.h"

namespace openmla {
namespace {

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }
bool aligned16(int64_t bytes) { return bytes % 16 == 0; }

}  // namespace

void write_kv(const WriteKVArgs& args, cudaStream_t stream, unsigned* device_error_word) {
  // The kernel runs on the current device, so every tensor must live there.
  int device = 0;
  OPENMLA_CUDA_CHECK(cudaGetDevice(&device));
  detail::validate_write_kv_args(args, DeviceType::kCUDA, device);

  const int64_t num_tokens = args.slots.shape[0];
  if (num_tokens == 0) return;  // nothing to write: no launch

  const TensorView& cache = args.cache.data;
  const int cache_elem = dtype_size(cache.dtype);
  const int input_elem = dtype_size(args.kv_latent.dtype);

  kernels::WriteKVParams p{};
  p.num_tokens = num_tokens;
  p.latent = args.kv_latent.data;
  p.latent_row_stride = args.kv_latent.strides[0];
  p.rope = args.k_rope.data;
  p.rope_row_stride = args.k_rope.strides[0];
  p.input_dtype = args.kv_latent.dtype;
  p.slots = args.slots.data;
  p.slots_stride = args.slots.strides[0];
  p.slots_int64 = args.slots.dtype == DType::kInt64;
  p.cache = static_cast<uint8_t*>(cache.data);
  p.page_stride_bytes = cache.strides[0] * cache_elem;
  p.token_stride_bytes = cache.strides[1] * cache_elem;
  p.num_slots = cache.shape[0] * kPageSize;
  p.format = args.cache.format;
  p.fp8_scale = args.cache.scale;
  p.device_scale = args.cache.device_scale.defined() ? static_cast<const float*>(args.cache.device_scale.data)
                                                     : nullptr;
  p.e4m3_nan_overflow = args.e4m3_overflow == E4M3Overflow::kNaN;
  p.error_word = device_error_word;
  p.vectorized = aligned16(p.latent) && aligned16(p.latent_row_stride * input_elem) &&
                 aligned16(p.rope) && aligned16(p.rope_row_stride * input_elem) &&
                 aligned16(p.cache) && aligned16(p.page_stride_bytes) &&
                 aligned16(p.token_stride_bytes);
  kernels::launch_write_kv(p, stream);
}

}  // namespace openmla
