// openmla::move_kv on the GPU: validate on the host, then one kernel (src/kernels/common/move_kv.cu).
#include "openmla/move_kv.h"

#include <cstdint>

#include <cuda_runtime_api.h>

#include "core/check.h"
#include "core/validate.h"
#include "kernels/common/move_kv_launch.h"

namespace openmla {

void move_kv(const MoveKVArgs& args, cudaStream_t stream, unsigned* device_error_word) {
  // The kernel runs on the current device, so every tensor must live there.
  int device = 0;
  OPENMLA_CUDA_CHECK(cudaGetDevice(&device));
  detail::validate_move_kv_args(args, DeviceType::kCUDA, device);

  const int64_t num_rows = args.src_slots.shape[0];
  const int64_t num_groups = args.row_indptr.shape[0] - 1;
  if (num_rows == 0 || num_groups == 0) return;  // nothing can move: no launch

  const TensorView& first = args.caches[0].data;
  kernels::MoveKVParams p{};
  p.src_slots = args.src_slots.data;
  p.dst_slots = args.dst_slots.data;
  p.slots_int64 = args.src_slots.dtype == DType::kInt64;
  p.row_indptr = static_cast<const int32_t*>(args.row_indptr.data);
  p.num_rows = num_rows;
  p.num_groups = static_cast<int>(num_groups);
  for (int i = 0; i < args.num_caches; ++i) p.caches[i] = static_cast<uint8_t*>(args.caches[i].data.data);
  p.num_caches = args.num_caches;
  p.page_stride_bytes = first.strides[0] * dtype_size(first.dtype);
  p.row_bytes = kv_bytes_per_token(args.caches[0].format);
  p.num_slots = first.shape[0] * kPageSize;
  p.error_word = device_error_word;
  kernels::launch_move_kv(p, stream);
}

}  // namespace openmla
