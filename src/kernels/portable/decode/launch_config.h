// The portable backend's launch choice: which tile (kernels/portable/decode/tiles.h) runs a shape on a
// device. Host code (launch_config.cpp), tested on the CPU; DecodePlan calls choose_launch once.
#pragma once

#include <cstddef>

#include "kernels/common/device_facts.h"
#include "kernels/common/schedule.h"
#include "openmla/decode.h"
#include "openmla/testing.h"

namespace openmla::kernels::portable {

using testing::PortableTile;

struct TileInfo {
  int rows;    // M: query rows per CTA (s_q * h_q packed, request-major)
  int tokens;  // N: KV tokens per pipeline stage
  int warps;
};
TileInfo tile_info(PortableTile tile) noexcept;  // tile != kAuto
// Shared memory of the tile's kernel for a cache format (quantized formats add a raw staging buffer and
// drop the second dequantized stage): the sizeof of its SharedStorage.
size_t tile_smem_bytes(PortableTile tile, KVFormat format) noexcept;

// The tile for rows = s_q * h_q given the per-block opt-in smem limit: few rows (<= 32, the memory-bound
// TP8 / TP4 decode) take 16-row tiles, whose m-tiles re-read the same pages from L2 rather than spend MMA
// rows on padding; more rows 64-row tiles; the first of each list that fits. Throws Error(kUnsupported)
// when none fits.
PortableTile choose_tile(int rows, KVFormat format, size_t max_smem_per_block);

struct LaunchConfig {
  PortableTile tile = PortableTile::kAuto;
  KVFormat kv_format = KVFormat::kBF16;
  bool q_is_bf16 = true;
  int rows_per_cta = 0;  // tile_info(tile).rows
  // The kernel's general-query variant: ragged queries or a tree mask (DecodeShape::query_layout, tree_mask).
  bool general_queries = false;
  // The sparse-key variant (SparseDecodePlan): set by the sparse plan on top of choose_launch's choice.
  bool sparse_keys = false;
  size_t smem_bytes = 0;
  SplitTuning split;     // the planner's arguments for this kernel
};

// The launch for a shape on a device: overrides.portable_tile if forced (kUnsupported when it does not fit
// the device), else choose_tile. (Resident CTAs per SM come from the occupancy calculator when the kernel
// is prepared: kernels/portable/decode/launch.h.)
LaunchConfig choose_launch(const DecodeShape& shape, const DeviceFacts& device, const testing::DecodeOverrides& overrides);

// Whether the kernel writes its partial rows as fp16 (kernels/common/partial_rows.h): always.
bool fp16_partials(const LaunchConfig& config) noexcept;

}  // namespace openmla::kernels::portable
