// Launch shape of the combine kernel (combine.cu), shared with the host rule that picks its column tile
// (detail::choose_combine_tile, core/decode_config.cpp), which the CPU tests check.
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

}  // namespace openmla::kernels
