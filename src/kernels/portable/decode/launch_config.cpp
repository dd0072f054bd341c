#include "kernels/portable/decode/launch_config.h"

#include <cstdint>

#include "core/check.h"
#include "kernels/common/kv_kind.h"
#include "kernels/portable/decode/config.h"
#include "kernels/portable/decode/tiles.h"

namespace openmla::kernels::portable {
namespace {

// Calls fn(Cfg{}) with the tile's TileConfig.
template <class Fn>
decltype(auto) with_tile(PortableTile tile, Fn&& fn) {
  switch (tile) {
    case PortableTile::kRows16Tokens64: return fn(TileRows16Tokens64{});
    case PortableTile::kRows64Tokens64: return fn(TileRows64Tokens64{});
    case PortableTile::kRows64Tokens32: return fn(TileRows64Tokens32{});
    case PortableTile::kRows16Tokens32Warps4:
    case PortableTile::kAuto: break;
  }
  return fn(TileRows16Tokens32Warps4{});
}

}  // namespace

TileInfo tile_info(PortableTile tile) noexcept {
  return with_tile(tile, [](auto cfg) {
    using Cfg = decltype(cfg);
    return TileInfo{Cfg::M, Cfg::N, Cfg::kNumWarps};
  });
}

size_t tile_smem_bytes(PortableTile tile, KVFormat format) noexcept {
  // The kernel's shared-memory plan is a plain struct: its sizeof is the launch's smem size. uint16_t stands
  // in for bf16 / fp16 (same size and alignment).
  return with_tile(tile, [&](auto cfg) {
    return with_kv_kind(format, [](auto kind) {
      return sizeof(SharedStorage<decltype(cfg), uint16_t, decltype(kind)::value>);
    });
  });
}

PortableTile choose_tile(int rows, KVFormat format, size_t max_smem_per_block) {
  static constexpr PortableTile kFewRows[] = {PortableTile::kRows16Tokens64, PortableTile::kRows16Tokens32Warps4};
  static constexpr PortableTile kManyRows[] = {PortableTile::kRows64Tokens64, PortableTile::kRows64Tokens32,
                                               PortableTile::kRows16Tokens32Warps4};
  if (rows <= 32) {
    for (PortableTile t : kFewRows)
      if (tile_smem_bytes(t, format) <= max_smem_per_block) return t;
  } else {
    for (PortableTile t : kManyRows)
      if (tile_smem_bytes(t, format) <= max_smem_per_block) return t;
  }
  detail::fail(Status::kUnsupported, "device: expected at least ",
               tile_smem_bytes(PortableTile::kRows16Tokens32Warps4, format),
               " bytes of shared memory per block for the portable decode kernel, got ", max_smem_per_block);
}

LaunchConfig choose_launch(const DecodeShape& shape, const DeviceFacts& device,
                           const testing::DecodeOverrides& overrides) {
  LaunchConfig c;
  c.kv_format = shape.kv_format;
  c.q_is_bf16 = shape.q_dtype == DType::kBFloat16;
  if (overrides.portable_tile == PortableTile::kAuto) {
    c.tile = choose_tile(shape.q_len * row_layout_heads(shape.num_heads), shape.kv_format, device.max_smem_per_block);
  } else {
    c.tile = overrides.portable_tile;
    if (tile_smem_bytes(c.tile, shape.kv_format) > device.max_smem_per_block)
      detail::fail(Status::kUnsupported, "overrides.portable_tile: ", testing::portable_tile_name(c.tile), " needs ",
                   tile_smem_bytes(c.tile, shape.kv_format), " bytes of shared memory for ",
                   kv_format_name(shape.kv_format), ", device has ", device.max_smem_per_block);
  }
  c.rows_per_cta = tile_info(c.tile).rows;
  c.general_queries = shape.query_layout != QueryLayout::kUniform || shape.tree_mask != TreeMask::kNone ||
                      row_layout_heads(shape.num_heads) != shape.num_heads;
  c.smem_bytes = tile_smem_bytes(c.tile, shape.kv_format);
  c.split = SplitTuning{kMinUnitsPerPart, 0, kRequestOverheadUnits};
  return c;
}

bool fp16_partials(const LaunchConfig&) noexcept { return kPortableFp16Partials; }

}  // namespace openmla::kernels::portable
