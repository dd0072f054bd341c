#include "kernels/common/workspace.h"

#include <algorithm>
#include <cstdint>

#include "kernels/common/partial_rows.h"
#include "kernels/common/schedule.h"

namespace openmla::kernels {
namespace {

constexpr size_t align_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

}  // namespace

int max_partials(int batch_size, int num_parts) noexcept {
  if (num_parts <= 1) return 0;
  return std::min(batch_size + num_parts - 1, 2 * (num_parts - 1));
}

DecodeWorkspace carve_decode_workspace(void* base, int batch_size, int rows, int num_parts,
                                       size_t widened_query_elems, int sparse_requests) {
  // Counting mode (base == nullptr) and carving share this code, so size and layout cannot differ.
  DecodeWorkspace ws;
  size_t offset = 0;
  auto take = [&](size_t bytes) -> void* {
    offset = align_up(offset, 256);
    void* p = base ? static_cast<char*>(base) + offset : nullptr;
    offset += bytes;
    return p;
  };
  const size_t slots = static_cast<size_t>(max_partials(batch_size, num_parts));
  ws.error_word = static_cast<unsigned*>(take(sizeof(unsigned)));
  ws.parts = take(sizeof(SplitPart) * static_cast<size_t>(num_parts));
  ws.request_splits = take(sizeof(RequestSplit) * static_cast<size_t>(batch_size));
  ws.o_partial = take(sizeof(float) * slots * static_cast<size_t>(rows) * 512);  // room for either format
  ws.o_partial_scale = static_cast<float*>(take(sizeof(float) * slots * static_cast<size_t>(rows) * kPartialBlocks));
  ws.lse_partial = static_cast<float*>(take(sizeof(float) * slots * static_cast<size_t>(rows)));
  ws.widened_query = take(sizeof(uint16_t) * widened_query_elems);
  ws.sparse_seqlens = static_cast<int*>(take(sizeof(int) * static_cast<size_t>(sparse_requests)));
  ws.sparse_main_len = static_cast<int*>(take(sizeof(int) * static_cast<size_t>(sparse_requests)));
  ws.bytes = align_up(offset, 256);
  return ws;
}

}  // namespace openmla::kernels
