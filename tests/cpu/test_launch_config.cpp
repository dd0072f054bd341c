// Host-side launch choices of the backends (kernels/portable/decode/launch_config.h,
// kernels/sm90/decode/launch_config.h), split-part counts, the combine's tiling, the bound on partial results,
// workspace carving (the same code sizes and carves), and the testing surface's environment overrides.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "kernels/common/combine_config.h"
#include "kernels/common/partial_rows.h"
#include "kernels/common/schedule.h"
#include "kernels/common/workspace.h"
#include "kernels/portable/decode/launch_config.h"
#include "kernels/sm90/decode/launch_config.h"
#include "openmla/error.h"
#include "openmla/testing.h"

namespace openmla::kernels {
namespace {

using testing::PortableTile;

constexpr size_t kH100Smem = 232448;  // sharedMemPerBlockOptin of sm_90
constexpr size_t kA100Smem = 166912;  // sm_80
constexpr size_t kAdaSmem = 101376;   // sm_86 / sm_89

// The combine's tile: the widest whose 8-load lanes take the expected splits in one batch; with <= 16
// groups, wider until one wave of 384 CTAs.
TEST(LaunchConfig, CombineTileCoversTheSplitsInOneBatch) {
  // b = 1, h_q = 16, s_k = 4K: 132 parts, a 64-page table spans <= 34 splits: 8 lanes x 8 loads.
  EXPECT_EQ(choose_combine_tile(1, 16, 132, 64), 32);
  // ... 16K: ~130 splits need 32 lanes.
  EXPECT_EQ(choose_combine_tile(1, 16, 132, 256), 8);
  // b = 1, h_q = 64, 4K: 32 (256 CTAs, one wave).
  EXPECT_EQ(choose_combine_tile(1, 64, 132, 64), 32);
  // b = 1, h_q = 128, 32K: 66 splits fit 16 (1024 CTAs); grown to 64 (256 CTAs, three batches).
  EXPECT_EQ(choose_combine_tile(1, 128, 66, 512), 64);
  // b = 16, h_q = 16, 4K: about 10 splits per request: 128 (whole rows, 256 CTAs).
  EXPECT_EQ(choose_combine_tile(16, 16, 132, 64), 128);
  // Many groups keep one batch, whatever the grid: b = 128, h_q = 16 (3 splits: 512, 512 CTAs) and
  // b = 64, s_q = 2, h_q = 64 (128 rows, 2048 CTAs).
  EXPECT_EQ(choose_combine_tile(128, 16, 132, 256), 512);
  EXPECT_EQ(choose_combine_tile(64, 128, 66, 64), 512);
  // Never more rows than the request has, never outside [8, 1024], a power of two.
  for (int rows : {1, 2, 8, 16, 24, 64, 128, 256, 2048})
    for (int b : {1, 2, 16, 64, 128, 1024})
      for (int parts : {2, 33, 66, 132, 264})
        for (int pages : {1, 16, 64, 2048}) {
          const int t = choose_combine_tile(b, rows, parts, pages);
          EXPECT_GE(t, 8);
          EXPECT_LE(t, 1024);
          EXPECT_EQ(t & (t - 1), 0);
          if (t > 128) {
            EXPECT_LE(t / 128, rows) << "b " << b << " rows " << rows;
          }
        }
  EXPECT_EQ(combine_groups(1, 132), 1);
  EXPECT_EQ(combine_groups(128, 132), 128);
  EXPECT_EQ(combine_groups(128, 33), 32);
}

TEST(LaunchConfig, TileChoiceFollowsRowsAndSharedMemory) {
  EXPECT_EQ(portable::choose_tile(16, KVFormat::kBF16, kH100Smem), PortableTile::kRows16Tokens64);
  EXPECT_EQ(portable::choose_tile(32, KVFormat::kBF16, kH100Smem), PortableTile::kRows16Tokens64);
  EXPECT_EQ(portable::choose_tile(33, KVFormat::kBF16, kH100Smem), PortableTile::kRows64Tokens64);
  EXPECT_EQ(portable::choose_tile(256, KVFormat::kBF16, kA100Smem), PortableTile::kRows64Tokens32);
  EXPECT_EQ(portable::choose_tile(16, KVFormat::kBF16, kA100Smem), PortableTile::kRows16Tokens32Warps4);
  EXPECT_EQ(portable::choose_tile(2048, KVFormat::kFP16, kAdaSmem), PortableTile::kRows16Tokens32Warps4);
  // Quantized stages hold the tokens as stored (576 / 656 B, no dequantized copy): the 64x64 tile fits both FP8
  // layouts on sm_90 and e4m3 on sm_80, the 16x64 tile e4m3 on sm_86 / sm_89.
  EXPECT_EQ(portable::choose_tile(256, KVFormat::kFP8DsMla, kH100Smem), PortableTile::kRows64Tokens64);
  EXPECT_EQ(portable::choose_tile(256, KVFormat::kFP8E4M3, kH100Smem), PortableTile::kRows64Tokens64);
  EXPECT_EQ(portable::choose_tile(256, KVFormat::kFP8E4M3, kA100Smem), PortableTile::kRows64Tokens64);
  EXPECT_EQ(portable::choose_tile(256, KVFormat::kFP8DsMla, kA100Smem), PortableTile::kRows64Tokens32);
  EXPECT_EQ(portable::choose_tile(16, KVFormat::kFP8E4M3, kAdaSmem), PortableTile::kRows16Tokens64);
  EXPECT_EQ(portable::choose_tile(16, KVFormat::kFP8DsMla, kAdaSmem), PortableTile::kRows16Tokens32Warps4);
  EXPECT_EQ(portable::choose_tile(256, KVFormat::kFP8E4M3, kAdaSmem), PortableTile::kRows16Tokens32Warps4);
  for (int t = 0; t < testing::kNumPortableTiles; ++t)
    for (KVFormat f : {KVFormat::kBF16, KVFormat::kFP8E4M3, KVFormat::kFP8DsMla}) {
      const auto tile = static_cast<PortableTile>(t);
      EXPECT_GT(portable::tile_smem_bytes(tile, f), 0u);
      EXPECT_LE(portable::tile_smem_bytes(tile, f), kH100Smem + 16384) << testing::portable_tile_name(tile);
    }
}

TEST(LaunchConfig, TooLittleSharedMemoryIsUnsupportedNotACrash) {
  try {
    portable::choose_tile(16, KVFormat::kBF16, 48 * 1024);
    FAIL() << "expected openmla::Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::kUnsupported);
    EXPECT_NE(std::string(e.what()).find("shared memory"), std::string::npos) << e.what();
  }
}

TEST(LaunchConfig, Sm90ScheduleFollowsFormatRowsAndRequest) {
  const auto is = [](const sm90::Schedule& s, const sm90::Schedule& want) { return s == want; };
  // FP8 math: per-tensor e4m3 only, the 64-row schedule (automatic or requested), never narrow; its
  // consumers run the seesaw at every row count.
  for (int rows : {8, 16, 64, 127, 128, 2048}) {
    EXPECT_TRUE(sm90::choose_schedule(KVFormat::kFP8E4M3, true, rows, 1, 0, Fp8Math::kQkAndPv).seesaw) << rows;
    EXPECT_TRUE(is(sm90::choose_schedule(KVFormat::kFP8E4M3, true, rows, 1, 0, Fp8Math::kQkAndPv), sm90::kFp8Math));
    EXPECT_TRUE(is(sm90::choose_schedule(KVFormat::kFP8E4M3, false, rows, 1, 64, Fp8Math::kQkAndPv), sm90::kFp8Math));
    EXPECT_EQ(sm90::choose_schedule(KVFormat::kFP8E4M3, true, rows, 1, 16, Fp8Math::kQkAndPv).rows_per_cta, 0);
    for (KVFormat f : {KVFormat::kBF16, KVFormat::kFP16, KVFormat::kFP8DsMla})
      EXPECT_EQ(sm90::choose_schedule(f, true, rows, 1, 0, Fp8Math::kQkAndPv).rows_per_cta, 0);
  }
  // Automatic: narrow for <= 16 rows of e4m3 (either query) or ds_mla with a bf16 query, else wide (16-bit
  // caches at b = 16).
  for (int rows : {8, 16}) {
    EXPECT_TRUE(is(sm90::choose_schedule(KVFormat::kFP8E4M3, true, rows, 1, 0), sm90::kNarrow16));
    EXPECT_TRUE(is(sm90::choose_schedule(KVFormat::kFP8E4M3, false, rows, 1, 0), sm90::kNarrow16));
    EXPECT_TRUE(is(sm90::choose_schedule(KVFormat::kFP8DsMla, true, rows, 1, 0), sm90::kNarrow16));
    EXPECT_TRUE(is(sm90::choose_schedule(KVFormat::kFP8DsMla, false, rows, 1, 0), sm90::kWide));
    EXPECT_TRUE(is(sm90::choose_schedule(KVFormat::kBF16, true, rows, 16, 0), sm90::kWide));
    EXPECT_TRUE(is(sm90::choose_schedule(KVFormat::kFP16, false, rows, 16, 0), sm90::kWide));
  }
  // 16-bit caches: the narrow kernel for <= 16 rows up to sm90::kNarrow16BitMaxFewBatch requests and from
  // sm90::kNarrow16BitMinBatch, and for 17-32 rows from sm90::kNarrow16Bit32MinBatch; the wide kernel between,
  // below and for more rows.
  for (KVFormat f : {KVFormat::kBF16, KVFormat::kFP16}) {
    const bool bf16 = f == KVFormat::kBF16;
    for (int rows : {8, 16}) {
      for (int batch : {1, sm90::kNarrow16BitMaxFewBatch})
        EXPECT_TRUE(is(sm90::choose_schedule(f, bf16, rows, batch, 0), sm90::kNarrow16Bit16)) << rows << " " << batch;
      for (int batch : {sm90::kNarrow16BitMaxFewBatch + 1, 16, sm90::kNarrow16BitMinBatch - 1})
        EXPECT_TRUE(is(sm90::choose_schedule(f, bf16, rows, batch, 0), sm90::kWide)) << rows << " " << batch;
      for (int batch : {sm90::kNarrow16BitMinBatch, 128, 4096})
        EXPECT_TRUE(is(sm90::choose_schedule(f, bf16, rows, batch, 0), sm90::kNarrow16Bit16)) << rows << " " << batch;
    }
    for (int rows : {17, 24, 32}) {
      for (int batch : {1, 64, sm90::kNarrow16Bit32MinBatch - 1})
        EXPECT_TRUE(is(sm90::choose_schedule(f, bf16, rows, batch, 0), sm90::kWide)) << rows << " " << batch;
      for (int batch : {sm90::kNarrow16Bit32MinBatch, 4096})
        EXPECT_TRUE(is(sm90::choose_schedule(f, bf16, rows, batch, 0), sm90::kNarrow16Bit32)) << rows << " " << batch;
      EXPECT_TRUE(is(sm90::choose_schedule(f, bf16, rows, 4096, 64), sm90::kWide)) << rows;
    }
    for (int rows : {33, 64})
      EXPECT_TRUE(is(sm90::choose_schedule(f, bf16, rows, 4096, 0), sm90::kWide)) << rows;
  }
  // 17-32 rows: the 32-row narrow kernel from sm90::kNarrow32MinBatch requests (same formats and query
  // types as the 16-row one, and never for ds_mla with an fp16 query), the wide kernel below that.
  for (int rows : {17, 24, 32}) {
    for (int batch : {1, 16, sm90::kNarrow32MinBatch - 1}) {
      for (KVFormat f : {KVFormat::kFP8E4M3, KVFormat::kFP8DsMla})
        EXPECT_TRUE(is(sm90::choose_schedule(f, true, rows, batch, 0), sm90::kWide)) << rows << " " << batch;
    }
    for (int batch : {sm90::kNarrow32MinBatch, 128, 4096}) {
      EXPECT_TRUE(is(sm90::choose_schedule(KVFormat::kFP8E4M3, true, rows, batch, 0), sm90::kNarrow32)) << rows;
      EXPECT_TRUE(is(sm90::choose_schedule(KVFormat::kFP8E4M3, false, rows, batch, 0), sm90::kNarrow32)) << rows;
      EXPECT_TRUE(is(sm90::choose_schedule(KVFormat::kFP8DsMla, true, rows, batch, 0), sm90::kNarrow32)) << rows;
      EXPECT_TRUE(is(sm90::choose_schedule(KVFormat::kFP8DsMla, false, rows, batch, 0), sm90::kWide)) << rows;
      EXPECT_TRUE(is(sm90::choose_schedule(KVFormat::kFP8E4M3, true, rows, batch, 64), sm90::kWide)) << rows;
    }
  }
  for (int rows : {33, 48, 64})  // more rows, one query tile: the wide kernel's alternating schedule at any batch
    for (int batch : {1, 128})
      for (KVFormat f : {KVFormat::kBF16, KVFormat::kFP8E4M3, KVFormat::kFP8DsMla})
        EXPECT_TRUE(is(sm90::choose_schedule(f, true, rows, batch, 0), sm90::kWide)) << rows;
  // <= 16 rows stay on the 16-row narrow kernel at any batch; ds_mla takes its two-warp producer from
  // sm90::kNarrow16SplitMinBatch requests (automatic or requested), e4m3 keeps the single warp.
  // (format, bf16 query, requested rows) -> the schedule below that batch and from it.
  const struct {
    KVFormat format;
    bool bf16;
    int requested;
    sm90::Schedule below, from;
  } narrow16[] = {{KVFormat::kFP8E4M3, true, 0, sm90::kNarrow16, sm90::kNarrow16},
                  {KVFormat::kFP8E4M3, false, 16, sm90::kNarrow16, sm90::kNarrow16},
                  {KVFormat::kFP8DsMla, true, 0, sm90::kNarrow16, sm90::kNarrow16Split},
                  {KVFormat::kFP8DsMla, true, 16, sm90::kNarrow16, sm90::kNarrow16Split},
                  {KVFormat::kFP8DsMla, false, 0, sm90::kWide, sm90::kWide}};
  for (int rows : {8, 16}) {
    for (const auto& k : narrow16) {
      for (int batch : {1, sm90::kNarrow16SplitMinBatch - 1})
        EXPECT_TRUE(is(sm90::choose_schedule(k.format, k.bf16, rows, batch, k.requested), k.below))
            << rows << " " << batch;
      for (int batch : {sm90::kNarrow16SplitMinBatch, 128, 4096})
        EXPECT_TRUE(is(sm90::choose_schedule(k.format, k.bf16, rows, batch, k.requested), k.from))
            << rows << " " << batch;
    }
  }
  // The wide kernel's seesaw schedule for 16-bit caches from sm90::kSeesawMinRows rows (two query tiles),
  // automatic or requested; FP8 caches keep the alternating one.
  for (int rows : {65, 96, 128, 256, 2048}) {
    for (KVFormat f : {KVFormat::kBF16, KVFormat::kFP16}) {
      EXPECT_TRUE(is(sm90::choose_schedule(f, true, rows, 1, 0), sm90::kWideSeesaw)) << rows;
      EXPECT_TRUE(is(sm90::choose_schedule(f, false, rows, 1, 64), sm90::kWideSeesaw)) << rows;
    }
    for (KVFormat f : {KVFormat::kFP8E4M3, KVFormat::kFP8DsMla}) {
      EXPECT_TRUE(is(sm90::choose_schedule(f, true, rows, 1, 0), sm90::kWide)) << rows;
      EXPECT_TRUE(is(sm90::choose_schedule(f, false, rows, 1, 64), sm90::kWide)) << rows;
    }
  }
  // Requested: what the shape allows, or rows_per_cta 0.
  EXPECT_TRUE(is(sm90::choose_schedule(KVFormat::kFP8E4M3, true, 32, 1, 32), sm90::kNarrow32));
  EXPECT_TRUE(is(sm90::choose_schedule(KVFormat::kFP8DsMla, true, 8, 1, 32), sm90::kNarrow32));
  EXPECT_EQ(sm90::choose_schedule(KVFormat::kFP8E4M3, true, 33, 1, 32).rows_per_cta, 0);
  EXPECT_EQ(sm90::choose_schedule(KVFormat::kFP8E4M3, true, 17, 1, 16).rows_per_cta, 0);
  EXPECT_EQ(sm90::choose_schedule(KVFormat::kFP8DsMla, false, 16, 1, 16).rows_per_cta, 0);
  // 16-bit caches on the narrow kernel only when requested: 16 rows per CTA up to 16 rows, 32 up to 32.
  for (KVFormat f : {KVFormat::kBF16, KVFormat::kFP16}) {
    const bool bf16 = f == KVFormat::kBF16;
    for (int batch : {1, 128}) {
      EXPECT_TRUE(is(sm90::choose_schedule(f, bf16, 16, batch, 16), sm90::kNarrow16Bit16));
      EXPECT_TRUE(is(sm90::choose_schedule(f, bf16, 8, batch, 32), sm90::kNarrow16Bit32));
      EXPECT_TRUE(is(sm90::choose_schedule(f, bf16, 32, batch, 32), sm90::kNarrow16Bit32));
      EXPECT_EQ(sm90::choose_schedule(f, bf16, 17, batch, 16).rows_per_cta, 0);
      EXPECT_EQ(sm90::choose_schedule(f, bf16, 33, batch, 32).rows_per_cta, 0);
    }
  }
  EXPECT_TRUE(is(sm90::choose_schedule(KVFormat::kFP8E4M3, true, 16, 1, 64), sm90::kWide));
  EXPECT_TRUE(is(sm90::choose_schedule(KVFormat::kBF16, true, 64, 1, 64), sm90::kWide));
  EXPECT_EQ(sm90::choose_schedule(KVFormat::kFP8E4M3, true, 16, 1, 48).rows_per_cta, 0);
}

TEST(LaunchConfig, WidePartialRowsFollowRowsAndTheSplit) {
  // Up to 32 rows fp32, the alternating schedule fp16 from 33 rows whatever the split.
  for (int rows : {1, 16, 32}) {
    EXPECT_FALSE(sm90::wide_fp16_partials(rows, false, 1, 132, 512)) << rows;
    EXPECT_FALSE(sm90::wide_fp16_partials(rows, true, 1, 132, 512)) << rows;
  }
  for (int rows : {33, 64}) {
    EXPECT_TRUE(sm90::wide_fp16_partials(rows, false, 128, 132, 256)) << rows;
    EXPECT_TRUE(sm90::wide_fp16_partials(rows, false, 1, 1, 1)) << rows;
  }
  // The seesaw (here 128 rows: two query tiles, 66 parts): fp16 only where every request is split at least twice
  // and a part's share of the tables is 0.5-16 pages: b = 1 from 4K to 32K, b = 16 at 1K-4K; fp32 at b = 1, 1K,
  // at b = 16 from 16K and from b = 64 at every length.
  const int parts = 66;
  EXPECT_FALSE(sm90::wide_fp16_partials(128, true, 1, parts, 16));   // b = 1, 1K: 0.24 pages a part
  EXPECT_TRUE(sm90::wide_fp16_partials(128, true, 1, parts, 64));    // 4K
  EXPECT_TRUE(sm90::wide_fp16_partials(128, true, 1, parts, 512));   // 32K: 7.8
  EXPECT_TRUE(sm90::wide_fp16_partials(128, true, 16, parts, 16));   // b = 16, 1K
  EXPECT_TRUE(sm90::wide_fp16_partials(128, true, 16, parts, 64));   // 4K: 15.5
  EXPECT_FALSE(sm90::wide_fp16_partials(128, true, 16, parts, 256));  // 16K: 62
  EXPECT_FALSE(sm90::wide_fp16_partials(128, true, 64, parts, 16));   // b = 64: 2 b > num_parts
  EXPECT_TRUE(sm90::wide_fp16_partials(128, true, 33, parts, 16));   // 2 b = num_parts
  EXPECT_FALSE(sm90::wide_fp16_partials(128, true, 34, parts, 16));
  // The bounds themselves, and no overflow with the widest tables.
  EXPECT_TRUE(sm90::wide_fp16_partials(65, true, 1, 2, 1));
  EXPECT_FALSE(sm90::wide_fp16_partials(65, true, 1, 3, 1));
  EXPECT_TRUE(sm90::wide_fp16_partials(65, true, 2, 4, sm90::kSeesawFp16MaxPagesPerPart * 2));
  EXPECT_FALSE(sm90::wide_fp16_partials(65, true, 2, 4, sm90::kSeesawFp16MaxPagesPerPart * 2 + 1));
  EXPECT_FALSE(sm90::wide_fp16_partials(128, true, 1 << 20, 1 << 22, 1 << 30));
}

TEST(LaunchConfig, PartsFillTheSmsAcrossQueryTiles) {
  EXPECT_EQ(choose_num_parts(132, 1, 1), 132);
  EXPECT_EQ(choose_num_parts(132, 1, 4), 33);
  EXPECT_EQ(choose_num_parts(132, 2, 4), 66);
  EXPECT_EQ(choose_num_parts(132, 1, 512), 1);  // never zero
  EXPECT_EQ(choose_num_parts(0, 0, 0), 1);
}

TEST(LaunchConfig, PartialBoundCoversEveryPossibleSplit) {
  // sum over split requests of their splits <= 2 (parts - 1) and <= b + parts - 1.
  EXPECT_EQ(max_partials(128, 1), 0);
  EXPECT_EQ(max_partials(1, 132), 132);
  EXPECT_EQ(max_partials(128, 33), 64);
  // Exhaustive check of the bound on a unit model of the planner: units laid out request by
  // request, cut into equal part ranges; count the partials every cut produces.
  // Every minimum part size the planner is run with (portable, sm90) and 1: the bound must not
  // depend on it.
  for (int min_units : {kMinUnitsPerPart, kSm90MinUnitsPerPart, 1})
  for (int parts = 1; parts <= 40; ++parts)
    for (int b = 1; b <= 12; ++b)
      for (int len = 1; len <= 9; ++len) {
        std::vector<int> units(b);
        for (int r = 0; r < b; ++r) units[r] = 1 + (r * 7 + len) % len + kRequestOverheadUnits;
        long long total = 0;
        for (int u : units) total += u;
        const long long per_part = std::max<long long>((total + parts - 1) / parts, min_units);
        long long start = 0, partials = 0;
        for (int u : units) {
          const long long first = (start + kRequestOverheadUnits) / per_part;
          const long long last = (start + u - 1) / per_part;
          if (last > first) partials += last - first + 1;
          start += u;
        }
        ASSERT_LE(partials, max_partials(b, parts))
            << "b=" << b << " parts=" << parts << " len=" << len << " min_units=" << min_units;
      }
}

TEST(LaunchConfig, WorkspaceCarvingMatchesItsSizeAndAligns) {
  const DecodeWorkspace size_only = carve_decode_workspace(nullptr, 128, 256, 33);
  // Carve at a fake 256-aligned base: every region 256-aligned, inside the counted size, disjoint.
  auto* base = reinterpret_cast<void*>(uintptr_t{1} << 20);
  const DecodeWorkspace ws = carve_decode_workspace(base, 128, 256, 33);
  EXPECT_EQ(ws.bytes, size_only.bytes);
  const auto off = [&](const void* p) { return reinterpret_cast<uintptr_t>(p) - reinterpret_cast<uintptr_t>(base); };
  EXPECT_EQ(off(ws.error_word), 0u);  // DecodePlan::device_error_word relies on it
  std::vector<uintptr_t> offsets = {off(ws.parts), off(ws.request_splits), off(ws.o_partial),
                                    off(ws.o_partial_scale), off(ws.lse_partial)};
  uintptr_t previous = 0;
  for (uintptr_t o : offsets) {
    EXPECT_EQ(o % 256, 0u);
    EXPECT_GT(o, previous);
    previous = o;
  }
  const size_t slots = static_cast<size_t>(max_partials(128, 33));
  EXPECT_GE(off(ws.o_partial_scale) - off(ws.o_partial), slots * 256 * 512 * sizeof(float));  // fp32 or fp16 rows
  EXPECT_GE(off(ws.lse_partial) - off(ws.o_partial_scale), slots * 256 * kPartialBlocks * sizeof(float));
  EXPECT_LE(off(ws.lse_partial) + slots * 256 * sizeof(float), ws.bytes);
  EXPECT_EQ(ws.bytes % 256, 0u);
}


DecodeShape shape_of(int batch, int q_len, int num_heads, KVFormat format, DType q_dtype = DType::kBFloat16) {
  DecodeShape s;
  s.batch_size = batch;
  s.q_len = q_len;
  s.num_heads = num_heads;
  s.kv_format = format;
  s.q_dtype = q_dtype;
  return s;
}

DeviceFacts device_with_smem(size_t smem) {
  DeviceFacts d;
  d.sm_count = 132;
  d.max_smem_per_block = smem;
  d.cc_major = 9;
  return d;
}

TEST(LaunchConfig, PortableLaunchFollowsTheTileAndItsForcing) {
  testing::DecodeOverrides none;
  const portable::LaunchConfig c =
      portable::choose_launch(shape_of(4, 1, 128, KVFormat::kFP8E4M3), device_with_smem(kA100Smem), none);
  EXPECT_EQ(c.tile, PortableTile::kRows64Tokens64);
  EXPECT_EQ(c.rows_per_cta, 64);
  EXPECT_EQ(c.smem_bytes, portable::tile_smem_bytes(PortableTile::kRows64Tokens64, KVFormat::kFP8E4M3));
  EXPECT_EQ(c.kv_format, KVFormat::kFP8E4M3);
  EXPECT_TRUE(c.q_is_bf16);
  EXPECT_EQ(c.split.min_units_per_part, kMinUnitsPerPart);
  EXPECT_EQ(c.split.whole_slack_percent, 0);
  EXPECT_EQ(c.split.split_overhead_units, kRequestOverheadUnits);
  EXPECT_TRUE(portable::fp16_partials(c));
  // A forced tile runs where it fits, whatever the rows; one that does not fit is kUnsupported, naming the override.
  testing::DecodeOverrides forced;
  forced.portable_tile = PortableTile::kRows16Tokens32Warps4;
  EXPECT_EQ(portable::choose_launch(shape_of(4, 1, 128, KVFormat::kBF16), device_with_smem(kH100Smem), forced).tile,
            PortableTile::kRows16Tokens32Warps4);
  forced.portable_tile = PortableTile::kRows64Tokens64;
  try {
    portable::choose_launch(shape_of(4, 1, 128, KVFormat::kBF16), device_with_smem(kAdaSmem), forced);
    FAIL() << "expected openmla::Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::kUnsupported);
    EXPECT_NE(std::string(e.what()).find("overrides.portable_tile: rows64_tokens64"), std::string::npos) << e.what();
  }
}

TEST(LaunchConfig, Sm90LaunchCarriesTheScheduleAndItsSplitTuning) {
  testing::DecodeOverrides none;
  const DecodeOptions options;
  const DeviceFacts device = device_with_smem(kH100Smem);
  // One query tile (64 rows): the sm90 minimum part, the portable slack and segment cost.
  sm90::LaunchConfig c = sm90::choose_launch(shape_of(16, 1, 64, KVFormat::kBF16), options, device, none);
  EXPECT_TRUE(c.schedule == sm90::kWide);
  EXPECT_EQ(c.rows, 64);
  EXPECT_EQ(c.split.min_units_per_part, kSm90MinUnitsPerPart);
  EXPECT_EQ(c.split.whole_slack_percent, 0);
  EXPECT_EQ(c.split.split_overhead_units, kRequestOverheadUnits);
  // Two query tiles: the seesaw, and the multi-tile slack and segment cost (schedule.h).
  c = sm90::choose_launch(shape_of(16, 1, 128, KVFormat::kBF16), options, device, none);
  EXPECT_TRUE(c.schedule == sm90::kWideSeesaw);
  EXPECT_EQ(c.split.whole_slack_percent, kSm90WholeRequestSlackPercent);
  EXPECT_EQ(c.split.split_overhead_units, kSm90MultiTileOverheadUnits);
  // Forced: the narrow kernel where the shape fits it, an error naming the override where it does not.
  testing::DecodeOverrides forced;
  forced.sm90_rows_per_cta = 32;
  c = sm90::choose_launch(shape_of(2, 2, 16, KVFormat::kFP8E4M3), options, device, forced);
  EXPECT_TRUE(c.schedule == sm90::kNarrow32);
  forced.sm90_rows_per_cta = 16;
  try {
    sm90::choose_launch(shape_of(2, 2, 16, KVFormat::kFP8E4M3), options, device, forced);
    FAIL() << "expected openmla::Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("overrides.sm90_rows_per_cta"), std::string::npos) << e.what();
  }
  DecodeOptions fp8_math;
  fp8_math.fp8_math = Fp8Math::kQkAndPv;
  c = sm90::choose_launch(shape_of(2, 1, 16, KVFormat::kFP8E4M3), fp8_math, device, none);
  EXPECT_TRUE(c.schedule == sm90::kFp8Math);
}

TEST(LaunchConfig, Sm90PartialRowsFollowTheKernelAndTheCall) {
  const DeviceFacts device = device_with_smem(kH100Smem);
  const DecodeOptions options;
  testing::DecodeOverrides none;
  // The narrow kernel: fp16 rows on FP8 caches, fp32 on 16-bit caches, whatever the call.
  const sm90::LaunchConfig narrow_fp8 = sm90::choose_launch(shape_of(1, 1, 16, KVFormat::kFP8E4M3), options, device, none);
  const sm90::LaunchConfig narrow_16 = sm90::choose_launch(shape_of(1, 1, 16, KVFormat::kBF16), options, device, none);
  ASSERT_EQ(narrow_fp8.schedule.variant, sm90::Variant::kNarrow);
  ASSERT_EQ(narrow_16.schedule.variant, sm90::Variant::kNarrow);
  for (int pages : {1, 64, 4096}) {
    EXPECT_TRUE(sm90::fp16_partials(narrow_fp8, 1, 132, pages));
    EXPECT_FALSE(sm90::fp16_partials(narrow_16, 1, 132, pages));
  }
  // FP8 math: fp32. The wide kernel: wide_fp16_partials of the call's block-table width.
  DecodeOptions fp8_math;
  fp8_math.fp8_math = Fp8Math::kQkAndPv;
  EXPECT_FALSE(sm90::fp16_partials(sm90::choose_launch(shape_of(1, 1, 128, KVFormat::kFP8E4M3), fp8_math, device, none),
                                   1, 66, 64));
  const sm90::LaunchConfig seesaw = sm90::choose_launch(shape_of(1, 1, 128, KVFormat::kBF16), options, device, none);
  ASSERT_TRUE(seesaw.schedule == sm90::kWideSeesaw);
  EXPECT_FALSE(sm90::fp16_partials(seesaw, 1, 66, 16));
  EXPECT_TRUE(sm90::fp16_partials(seesaw, 1, 66, 64));
}

TEST(LaunchConfig, PortableTileNamesRoundTrip) {
  for (int t = -1; t < testing::kNumPortableTiles; ++t) {
    const auto tile = static_cast<PortableTile>(t);
    PortableTile parsed = PortableTile::kRows16Tokens64;
    ASSERT_TRUE(testing::parse_portable_tile(testing::portable_tile_name(tile), &parsed)) << t;
    EXPECT_EQ(parsed, tile);
  }
  PortableTile parsed = PortableTile::kAuto;
  EXPECT_FALSE(testing::parse_portable_tile("rows16_tokens32_w4", &parsed));
  EXPECT_FALSE(testing::parse_portable_tile(nullptr, &parsed));
}

// The environment's overrides: unset or empty is automatic; a value the library does not know is an error
// naming the variable.
TEST(LaunchConfig, EnvironmentOverrides) {
  struct Saved {
    const char* name;
    std::string value;
    bool set;
  } saved[] = {{"OPENMLA_BACKEND", "", false}, {"OPENMLA_PORTABLE_TILE", "", false}};
  for (Saved& v : saved) {
    if (const char* e = std::getenv(v.name)) {
      v.value = e;
      v.set = true;
    }
  }
  unsetenv("OPENMLA_BACKEND");
  unsetenv("OPENMLA_PORTABLE_TILE");
  testing::DecodeOverrides o = testing::environment_overrides();
  EXPECT_EQ(o.backend, Backend::kAuto);
  EXPECT_EQ(o.portable_tile, PortableTile::kAuto);
  EXPECT_EQ(o.sm90_rows_per_cta, 0);
  setenv("OPENMLA_BACKEND", "portable", 1);
  setenv("OPENMLA_PORTABLE_TILE", "rows64_tokens32", 1);
  o = testing::environment_overrides();
  EXPECT_EQ(o.backend, Backend::kPortable);
  EXPECT_EQ(o.portable_tile, PortableTile::kRows64Tokens32);
  setenv("OPENMLA_BACKEND", "", 1);
  EXPECT_EQ(testing::environment_overrides().backend, Backend::kAuto);
  setenv("OPENMLA_BACKEND", "sm100", 1);
  try {
    testing::environment_overrides();
    ADD_FAILURE() << "expected openmla::Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("OPENMLA_BACKEND: expected one of auto, portable, sm90, got 'sm100'"),
              std::string::npos)
        << e.what();
  }
  setenv("OPENMLA_BACKEND", "auto", 1);
  setenv("OPENMLA_PORTABLE_TILE", "huge", 1);
  EXPECT_THROW(testing::environment_overrides(), Error);
  for (const Saved& v : saved) {
    if (v.set) {
      setenv(v.name, v.value.c_str(), 1);
    } else {
      unsetenv(v.name);
    }
  }
}

}  // namespace
}  // namespace openmla::kernels
