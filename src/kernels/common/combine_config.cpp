#include "kernels/common/combine_config.h"

#include <algorithm>
#include <cstdint>

#include "kernels/common/schedule.h"
#include "kernels/common/workspace.h"

namespace openmla::kernels {

int combine_groups(int batch_size, int num_parts) noexcept { return std::max(1, std::min(batch_size, num_parts - 1)); }

int choose_combine_tile(int batch_size, int rows, int num_parts, int max_pages) noexcept {
  const int64_t groups = combine_groups(batch_size, num_parts);
  const int64_t slots = std::max(1, max_partials(batch_size, num_parts));
  const int64_t table_splits = (static_cast<int64_t>(max_pages) + kRequestOverheadUnits) / kSm90MinUnitsPerPart + 2;
  const int64_t splits = std::max<int64_t>(1, std::min(table_splits, (slots + groups - 1) / groups));
  const int64_t one_batch = static_cast<int64_t>(kCombineThreads) * kCombineLoadsPerThread / splits;
  const int64_t cols = static_cast<int64_t>(std::max(1, rows)) * 128;  // column groups of a request
  const int64_t max_tile = std::min<int64_t>(kCombineMaxTile, std::max<int64_t>(kCombineMinTile, cols));
  auto ctas = [&](int64_t tile) { return groups * ((cols + tile - 1) / tile); };
  int tile = kCombineMinTile;
  while (tile * 2 <= std::min(one_batch, max_tile)) tile *= 2;
  if (groups <= kCombineFewGroups) {
    while (ctas(tile) > kCombineTargetCtas && tile * 2 <= max_tile) tile *= 2;
  }
  return tile;
}

}  // namespace openmla::kernels
