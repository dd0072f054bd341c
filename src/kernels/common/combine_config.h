// Launch shape of the combine kernel (combine.cu), shared with the host rule that picks its column tile
// (detail::choose_combine_tile, core/decode_config.cpp), which the CPU tests check.
#pragma once

namespace openmla::kernels {

inline constexpr int kCombineThreads = 256;
inline constexpr int kCombineLoadsPerThread = 8;  // float4 loads in flight per thread (32 KB per CTA)
inline constexpr int kCombineMinCtasPerSm = 3;    // caps registers at 80 (no spills); 96 KB of loads in flight per SM
inline constexpr int kCombineTargetCtas = 384;    // about kCombineMinCtasPerSm CTAs on each of 132 SMs: one wave
inline constexpr int kCombineMinTile = 8;         // float4 columns: 128 bytes, one cache line per split and row
inline constexpr int kCombineMaxTile = 1024;      // 8 rows: one warp per row, 16 columns per lane
inline constexpr int kCombineFewGroups = 16;      // up to this many groups the tile grows to one wave

}  // namespace openmla::kernels
