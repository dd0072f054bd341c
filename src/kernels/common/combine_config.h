// Launch shape of the combine kernel (combine.cu) and the host rule that picks its column tile
// (combine_config.cpp, tested on the CPU).
#pragma once

namespace openmla::kernels {

inline constexpr int kCombineThreads = 256;
// A column group: 4 columns of a partial row, 8 bytes of fp16 or 16 of fp32 (kernels/common/partial_rows.h).
inline constexpr int kCombineLoadsPerThread = 8;  // group loads in flight per thread (16 or 32 KB per CTA)
inline constexpr int kCombineMinCtasPerSm = 3;    // caps registers at 80 (no spills); 48-96 KB of loads in flight per SM
inline constexpr int kCombineTargetCtas = 384;    // about kCombineMinCtasPerSm CTAs on each of 132 SMs: one wave
inline constexpr int kCombineMinTile = 8;         // column groups: 64 or 128 bytes per split and row
inline constexpr int kCombineMaxTile = 1024;      // 8 rows: one warp per row, 16 columns per lane
inline constexpr int kCombineFewGroups = 16;      // up to this many groups the tile grows to one wave

// The combine kernel's groups: the requests that can be split. At most min(batch, num_parts - 1) requests
// are split (each owns >= 1 of the num_parts - 1 part boundaries).
int combine_groups(int batch_size, int num_parts) noexcept;

// The combine kernel's column tile, in column groups (4 columns) per CTA row (a power of two in [8, 1024]; from
// 128 on, tile / 128 whole rows, never more rows than `rows`). The host knows only the batch, rows, num_parts and
// the block table's width (max_pages), so it works from the splits a group can have: the slot bound over the
// groups, and what the table's width can span (a part takes at least kSm90MinUnitsPerPart units, plus a part
// boundary at each end). The tile is the widest whose lanes (256 / tile split lanes, 8 loads each) take those
// splits in one batch of loads: fewer lanes shorten the lanes' merge, and fewer CTAs start. With few groups
// (small batches) it grows further while the grid is larger than one wave of kCombineTargetCtas CTAs, accepting
// more batches of loads; with many groups a grid past one wave gains nothing, hence kCombineFewGroups.
int choose_combine_tile(int batch_size, int rows, int num_parts, int max_pages) noexcept;

}  // namespace openmla::kernels
