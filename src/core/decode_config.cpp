#include "core/decode_config.h"

#include <algorithm>
#include <cstdint>

#include "core/check.h"
#include "kernels/common/combine_config.h"
#include "kernels/common/partial_rows.h"
#include "kernels/common/schedule.h"
#include "kernels/portable/decode/tiles.h"

namespace openmla {

const char* fp8_math_name(Fp8Math m) noexcept {
  switch (m) {
    case Fp8Math::kOff: return "off";
    case Fp8Math::kQkAndPv: return "qk_and_pv";
  }
  return "unknown";
}

}  // namespace openmla

namespace openmla::detail {
namespace {

// The kernels' shared-memory plans are plain structs: their sizeof is the launch's smem size.
// uint16_t stands in for bf16/fp16 (same size and alignment).
template <class Cfg>
size_t smem_of(KVFormat format) {
  using namespace kernels::portable;
  using namespace kernels;  // KvKind
  switch (format) {
    case KVFormat::kFP8E4M3: return sizeof(SharedStorage<Cfg, uint16_t, kKvE4M3>);
    case KVFormat::kFP8DsMla: return sizeof(SharedStorage<Cfg, uint16_t, kKvDsMla>);
    default: return sizeof(SharedStorage<Cfg, uint16_t, kKv16Bit>);
  }
}

constexpr size_t align_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

}  // namespace

PortableTileInfo portable_tile_info(PortableTile t) noexcept {
  using namespace kernels::portable;
  switch (t) {
    case PortableTile::kRows16Tokens64: return {TileRows16Tokens64::M, TileRows16Tokens64::N, TileRows16Tokens64::kNumWarps};
    case PortableTile::kRows64Tokens64: return {TileRows64Tokens64::M, TileRows64Tokens64::N, TileRows64Tokens64::kNumWarps};
    case PortableTile::kRows64Tokens32: return {TileRows64Tokens32::M, TileRows64Tokens32::N, TileRows64Tokens32::kNumWarps};
    case PortableTile::kRows16Tokens32Warps4: return {TileRows16Tokens32Warps4::M, TileRows16Tokens32Warps4::N, TileRows16Tokens32Warps4::kNumWarps};
  }
  return {0, 0, 0};
}

size_t portable_tile_smem_bytes(PortableTile t, KVFormat format) noexcept {
  using namespace kernels::portable;
  switch (t) {
    case PortableTile::kRows16Tokens64: return smem_of<TileRows16Tokens64>(format);
    case PortableTile::kRows64Tokens64: return smem_of<TileRows64Tokens64>(format);
    case PortableTile::kRows64Tokens32: return smem_of<TileRows64Tokens32>(format);
    case PortableTile::kRows16Tokens32Warps4: return smem_of<TileRows16Tokens32Warps4>(format);
  }
  return 0;
}

const char* portable_tile_name(PortableTile t) noexcept {
  switch (t) {
    case PortableTile::kRows16Tokens64: return "rows16_tokens64";
    case PortableTile::kRows64Tokens64: return "rows64_tokens64";
    case PortableTile::kRows64Tokens32: return "rows64_tokens32";
    case PortableTile::kRows16Tokens32Warps4: return "rows16_tokens32_warps4";
  }
  return "unknown";
}

PortableTile choose_portable_tile(int rows, KVFormat format, size_t max_smem_per_block) {
  // Few rows (h_q * s_q <= 32, the memory-bound TP8/TP4 decode): 16-row tiles, several m-tiles
  // re-read the same KV from L2 rather than wasting MMA rows. More rows: 64-row tiles.
  static constexpr PortableTile kFewRows[] = {PortableTile::kRows16Tokens64, PortableTile::kRows16Tokens32Warps4};
  static constexpr PortableTile kManyRows[] = {PortableTile::kRows64Tokens64, PortableTile::kRows64Tokens32,
                                               PortableTile::kRows16Tokens32Warps4};
  if (rows <= 32) {
    for (PortableTile t : kFewRows)
      if (portable_tile_smem_bytes(t, format) <= max_smem_per_block) return t;
  } else {
    for (PortableTile t : kManyRows)
      if (portable_tile_smem_bytes(t, format) <= max_smem_per_block) return t;
  }
  fail(Status::kUnsupported, "device: expected at least ",
       portable_tile_smem_bytes(PortableTile::kRows16Tokens32Warps4, format),
       " bytes of shared memory per block for the portable decode kernel, got ", max_smem_per_block);
}

Sm90Schedule choose_sm90_schedule(KVFormat format, bool q_is_bf16, int rows, int batch_size, int requested_rows,
                                  Fp8Math math) noexcept {
  if (math != Fp8Math::kOff) {
    const bool runs = format == KVFormat::kFP8E4M3 && (requested_rows == 0 || requested_rows == 64);
    return runs ? kSm90WideFp8Math : Sm90Schedule{};
  }
  // ds_mla's rope is bf16, and the narrow kernel multiplies it with the query as stored.
  const bool narrow_format = format == KVFormat::kFP8E4M3 || (format == KVFormat::kFP8DsMla && q_is_bf16);
  const Sm90Schedule wide = kv_format_is_16bit(format) && rows >= kSm90SeesawMinRows ? kSm90WideSeesaw : kSm90Wide;
  const Sm90Schedule narrow16 =
      format == KVFormat::kFP8DsMla && batch_size >= kSm90Narrow16SplitMinBatch ? kSm90Narrow16Split : kSm90Narrow16;
  switch (requested_rows) {
    case 0:
      if (kv_format_is_16bit(format)) {
        if (rows <= 16 && (batch_size >= kSm90Narrow16BitMinBatch || batch_size <= kSm90Narrow16BitMaxFewBatch))
          return kSm90Narrow16Bit16;
        if (rows <= 32 && batch_size >= kSm90Narrow16Bit32MinBatch) return kSm90Narrow16Bit32;
        return wide;
      }
      if (narrow_format && rows <= 16) return narrow16;
      if (narrow_format && rows <= 32 && batch_size >= kSm90Narrow32MinBatch) return kSm90Narrow32;
      return wide;
    case 16:
      if (kv_format_is_16bit(format)) return rows <= 16 ? kSm90Narrow16Bit16 : Sm90Schedule{};
      return narrow_format && rows <= 16 ? narrow16 : Sm90Schedule{};
    case 32:
      if (kv_format_is_16bit(format)) return rows <= 32 ? kSm90Narrow16Bit32 : Sm90Schedule{};
      return narrow_format && rows <= 32 ? kSm90Narrow32 : Sm90Schedule{};
    case 64: return wide;
    default: return Sm90Schedule{};
  }
}

int choose_num_parts(int num_sms, int ctas_per_sm, int m_tiles) noexcept {
  const int slots = std::max(1, num_sms) * std::max(1, ctas_per_sm);
  return std::max(1, slots / std::max(1, m_tiles));
}

int max_partials(int batch_size, int num_parts) noexcept {
  if (num_parts <= 1) return 0;
  return std::min(batch_size + num_parts - 1, 2 * (num_parts - 1));
}

int combine_groups(int batch_size, int num_parts) noexcept { return std::max(1, std::min(batch_size, num_parts - 1)); }

int choose_combine_tile(int batch_size, int rows, int num_parts, int max_pages) noexcept {
  using namespace kernels;
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

DecodeWorkspace carve_decode_workspace(void* base, int batch_size, int rows, int num_parts) {
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
  ws.parts = take(sizeof(kernels::SplitPart) * static_cast<size_t>(num_parts));
  ws.request_splits = take(sizeof(kernels::RequestSplit) * static_cast<size_t>(batch_size));
  ws.o_partial = take(sizeof(float) * slots * static_cast<size_t>(rows) * 512);  // room for either format
  ws.o_partial_scale =
      static_cast<float*>(take(sizeof(float) * slots * static_cast<size_t>(rows) * kernels::kPartialBlocks));
  ws.lse_partial = static_cast<float*>(take(sizeof(float) * slots * static_cast<size_t>(rows)));
  ws.bytes = align_up(offset, 256);
  return ws;
}

}  // namespace openmla::detail
