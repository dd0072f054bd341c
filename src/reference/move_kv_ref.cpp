// CPU move_kv: the same moves, guards and error bits as the GPU kernel (openmla/move_kv.h).
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/validate.h"
#include "openmla/error.h"
#include "openmla/reference.h"

namespace openmla::reference {

unsigned move_kv(const MoveKVArgs& args) {
  detail::validate_move_kv_args(args, DeviceType::kCPU, 0);
  const int64_t m = args.src_slots.shape[0];
  const int64_t groups = args.row_indptr.shape[0] - 1;
  const bool wide = args.src_slots.dtype == DType::kInt64;
  auto slot_at = [wide](const TensorView& t, int64_t i) -> int64_t {
    return wide ? static_cast<const int64_t*>(t.data)[i] : static_cast<const int32_t*>(t.data)[i];
  };
  const int32_t* indptr = static_cast<const int32_t*>(args.row_indptr.data);
  const TensorView& first = args.caches[0].data;
  const int64_t num_slots = first.shape[0] * kPageSize;
  const int64_t page_stride = first.strides[0] * dtype_size(first.dtype);
  const int64_t row_bytes = kv_bytes_per_token(args.caches[0].format);
  unsigned errors = kDeviceErrorNone;
  if (m == 0) return errors;  // the GPU path launches nothing: row_indptr is not read

  std::vector<int64_t> from, to;  // byte offsets of one group's moving rows
  std::vector<uint8_t> gathered;
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t begin = indptr[g], end = indptr[g + 1];
    if (begin < 0 || end < begin || end > m || end - begin > kMaxMoveRowsPerGroup) {
      errors |= kDeviceErrorQueryOffsets;
      continue;
    }
    from.clear();
    to.clear();
    for (int64_t r = begin; r < end; ++r) {
      const int64_t src = slot_at(args.src_slots, r), dst = slot_at(args.dst_slots, r);
      if (src < 0 || src >= num_slots || dst < 0 || dst >= num_slots) {
        errors |= kDeviceErrorSlotOutOfRange;
        continue;
      }
      if (src == dst) continue;
      from.push_back(src / kPageSize * page_stride + src % kPageSize * row_bytes);
      to.push_back(dst / kPageSize * page_stride + dst % kPageSize * row_bytes);
    }
    gathered.resize(from.size() * static_cast<size_t>(row_bytes));
    for (int c = 0; c < args.num_caches; ++c) {
      uint8_t* base = static_cast<uint8_t*>(args.caches[c].data.data);
      for (size_t i = 0; i < from.size(); ++i)  // gather every source first ...
        std::memcpy(gathered.data() + i * row_bytes, base + from[i], static_cast<size_t>(row_bytes));
      for (size_t i = 0; i < to.size(); ++i)  // ... then scatter
        std::memcpy(base + to[i], gathered.data() + i * row_bytes, static_cast<size_t>(row_bytes));
    }
  }
  return errors;
}

}  // namespace openmla::reference
