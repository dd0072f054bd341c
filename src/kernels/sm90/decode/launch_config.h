// The sm90 backend's launch choice: which of its kernels runs a shape, in which form. Host code
// (launch_config.cpp, where static_asserts tie the table below to the kernels' configs), tested on the CPU;
// DecodePlan calls choose_launch once.
//
// The kernels (docs/hopper-kernel.md):
//   wide (wide/): 64 query rows per CTA (one m-tile), one CTA per SM, every cache format. A producer
//     warpgroup copies the pages (FP8 pages are expanded in place into the query's type) and two consumer
//     warpgroups split O's 512 columns. The consumers run one of two schedules: "alternating", one tile at a
//     time (the owner of tile j computes S and P, both multiply P by their half of V), or the "seesaw"
//     (FlashMLA's name): tiles in pairs, consumer 0 computes S of the first, consumer 1 of the second, so
//     that one consumer's softmax runs under the other's wgmmas.
//   narrow (narrow/): 16 or 32 rows per CTA with the operands swapped (the 64 tokens of a page are the
//     wgmma M), so no MMA row is padding. FP8 caches (per-tensor e4m3; ds_mla with a bf16 query, whose bf16
//     rope it multiplies as stored) dequantize into registers: 16 rows two CTAs per SM, 32 rows one (two
//     consumer warpgroups on alternate tiles). 16-bit caches read both operands from shared memory, one CTA
//     per SM. The producer is one warp that copies and finishes the pages, or a split producer of two warps
//     (one copies, one finishes).
//   FP8 math (fp8_math/; opt-in, per-tensor e4m3): the wide kernel's layout and seesaw with both products
//     on e4m3 wgmma.
#pragma once

#include <cstdint>

#include "kernels/common/device_facts.h"
#include "kernels/common/schedule.h"
#include "openmla/decode.h"
#include "openmla/testing.h"

namespace openmla::kernels::sm90 {

enum class Variant : uint8_t { kNone, kWide, kNarrow, kFp8Math };

struct Schedule {
  Variant variant = Variant::kNone;  // kNone: the requested kernel cannot run the shape
  int rows_per_cta = 0;
  int ctas_per_sm = 0;
  int producer_warps = 0;  // narrow: 1, or 2 (the split producer); 0 for the others
  bool seesaw = false;     // wide and FP8 math: the consumers' schedule
  constexpr bool runs() const noexcept { return variant != Variant::kNone; }
  constexpr bool operator==(const Schedule& o) const noexcept {
    return variant == o.variant && rows_per_cta == o.rows_per_cta && ctas_per_sm == o.ctas_per_sm &&
           producer_warps == o.producer_warps && seesaw == o.seesaw;
  }
};
inline constexpr Schedule kWide{Variant::kWide, 64, 1, 0, false};
inline constexpr Schedule kWideSeesaw{Variant::kWide, 64, 1, 0, true};
inline constexpr Schedule kNarrow16{Variant::kNarrow, 16, 2, 1, false};       // FP8 caches
inline constexpr Schedule kNarrow16Split{Variant::kNarrow, 16, 2, 2, false};  // ds_mla from kNarrow16SplitMinBatch
inline constexpr Schedule kNarrow32{Variant::kNarrow, 32, 1, 2, false};       // FP8 caches
// 16-bit caches: one consumer warpgroup, one producer warp, two 72-KB stages.
inline constexpr Schedule kNarrow16Bit16{Variant::kNarrow, 16, 1, 1, false};
inline constexpr Schedule kNarrow16Bit32{Variant::kNarrow, 32, 1, 1, false};
inline constexpr Schedule kFp8Math{Variant::kFp8Math, 64, 1, 0, true};

// When the automatic choice takes each kernel. The narrow kernel does no padded MMA work (the wide kernel's
// 64-row tile is 2-4x the work of 16-32 rows), which costs little when memory bounds the time but clock at the
// power cap, where serving runs; with few requests its fewer, smaller CTAs fill the GPU less well.
// 16-bit caches, <= 16 rows: narrow from kNarrow16BitMinBatch requests, and for one or two requests
// (kNarrow16BitMaxFewBatch), which are split over every SM; the wide kernel between.
inline constexpr int kNarrow16BitMinBatch = 64;
inline constexpr int kNarrow16BitMaxFewBatch = 2;
// 16-bit caches, 17-32 rows: narrow from this batch (at 64 requests the wide kernel is faster).
inline constexpr int kNarrow16Bit32MinBatch = 128;
// FP8 caches, 17-32 rows: the 32-row narrow kernel from this batch; with fewer requests a CTA has few tiles
// to spread the merge of its two consumers over, and the wide kernel is faster. (The plan knows the batch,
// not the lengths.)
inline constexpr int kNarrow32MinBatch = 64;
// ds_mla at 16 rows takes the split producer from this batch: its finish warp computes each page's scale
// table as the page lands; with fewer requests the single warp is as fast or faster.
inline constexpr int kNarrow16SplitMinBatch = 64;
// The wide kernel's seesaw, 16-bit caches: from two query tiles per request, whose CTAs share each page
// through L2, so that the tensor cores bound the time. With one tile each CTA reads its pages from DRAM
// alone, and the seesaw is slower. FP8 caches keep the alternating schedule: a page expanded in place fills
// a whole stage, which the seesaw would release in halves. The FP8-math kernel, whose pages and V^T have
// separate rings, runs the seesaw at every row count.
inline constexpr int kSeesawMinRows = 65;

// The schedule for rows = s_q * h_q and batch_size requests. requested_rows
// (testing::DecodeOverrides::sm90_rows_per_cta): 0 automatic (above), 16 or 32 the narrow kernel, 64 the wide
// kernel. math kQkAndPv: the FP8-math kernel for per-tensor e4m3 with requested_rows 0 or 64. kNone where the
// request cannot run the shape.
Schedule choose_schedule(KVFormat format, bool q_is_bf16, int rows, int batch_size, int requested_rows,
                         Fp8Math math = Fp8Math::kOff) noexcept;

struct LaunchConfig {
  Schedule schedule;
  KVFormat kv_format = KVFormat::kBF16;
  bool q_is_bf16 = true;
  int rows = 0;       // s_q * h_q
  SplitTuning split;  // the planner's arguments for this kernel (schedule.h)
};

// The launch for a shape: choose_schedule with overrides.sm90_rows_per_cta and options.fp8_math. Throws
// Error(kInvalidArgument) naming overrides.sm90_rows_per_cta when the forced kernel cannot run the shape.
LaunchConfig choose_launch(const DecodeShape& shape, const DecodeOptions& options, const DeviceFacts& device,
                           const testing::DecodeOverrides& overrides);

// The partial rows (kernels/common/partial_rows.h) of the wide kernel: fp16 from kWideFp16PartialsMinRows
// rows (at 32 rows and below the fp32 rows are faster). The seesaw is instantiated once per form and takes
// fp16 only where every request is split at least twice (2 b <= num_parts) and a part's share of the block
// tables is 0.5 to kSeesawFp16MaxPagesPerPart pages (b * max_pages / num_parts: the table's width stands in
// for the lengths, which the host does not know); elsewhere few segments are split and the fp16 form's code
// beside the tile loop costs more than its smaller stores save.
inline constexpr int kWideFp16PartialsMinRows = 33;
inline constexpr int kSeesawFp16MaxPagesPerPart = 16;
constexpr bool wide_fp16_partials(int rows, bool seesaw, int batch_size, int num_parts, int max_pages) {
  if (rows < kWideFp16PartialsMinRows) return false;
  if (!seesaw) return true;
  const int64_t pages = static_cast<int64_t>(batch_size) * max_pages;  // over num_parts parts
  return 2 * static_cast<int64_t>(batch_size) <= num_parts && 2 * pages >= num_parts &&
         pages <= static_cast<int64_t>(kSeesawFp16MaxPagesPerPart) * num_parts;
}

// Whether the configured kernel writes fp16 partial rows for a call whose block table is max_pages wide
// (the combine reads the same format): the narrow kernel on FP8 caches, the wide kernel by
// wide_fp16_partials; fp32 otherwise. A pure function, computed once per run() for both kernels.
bool fp16_partials(const LaunchConfig& config, int batch_size, int num_parts, int max_pages) noexcept;

}  // namespace openmla::kernels::sm90
