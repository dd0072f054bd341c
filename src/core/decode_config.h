// Host-side decode configuration: which tile a kernel uses, how many split-KV parts, and how the
// workspace is carved. Pure functions of the shape and device facts, so they are tested on a CPU.
#pragma once

#include <cstddef>
#include <cstdint>

#include "openmla/decode.h"

namespace openmla::detail {

// Portable (mma.sync) kernel tiles. Rows = query rows per CTA (s_q * h_q packed, request-major),
// tokens = KV tokens per pipeline stage, warps per CTA. Shared memory of each is in
// portable_tile_smem_bytes(); the auto choice takes the largest that fits the device.
enum class PortableTile : uint8_t {
  kRows16Tokens64 = 0,   // small h_q*s_q on >= 164 KB smem (sm90, sm100)
  kRows64Tokens64 = 1,   // large h_q*s_q on >= 226 KB smem (sm90, sm100)
  kRows64Tokens32 = 2,   // sm80 / sm87 (164 KB)
  kRows16Tokens32Warps4 = 3, // sm86 / sm89 / sm120 (100 KB)
};
inline constexpr int kNumPortableTiles = 4;

struct PortableTileInfo {
  int rows;    // M
  int tokens;  // N
  int warps;
};
PortableTileInfo portable_tile_info(PortableTile t) noexcept;
// Shared memory of the tile's kernel for a cache format (quantized formats add a raw staging
// buffer and drop the second dequantized stage).
size_t portable_tile_smem_bytes(PortableTile t, KVFormat format) noexcept;
const char* portable_tile_name(PortableTile t) noexcept;

// Picks the tile for rows = s_q * h_q given the per-block opt-in smem limit.
// Throws Error(kUnsupported) when no tile fits the device.
PortableTile choose_portable_tile(int rows, KVFormat format, size_t max_smem_per_block);

// sm90 schedules (src/kernels/sm90, docs/hopper-kernel.md): "wide", 64 query rows per CTA and one
// CTA per SM, for every cache format; "narrow", 16 rows and two CTAs per SM (or 32 rows and one), for
// per-tensor e4m3 caches and ds_mla caches with a bf16 query, and 16 or 32 rows with one CTA per SM for
// 16-bit caches (kSm90Narrow16Bit*). rows_per_cta 0: the requested schedule cannot run the shape.
// "FP8 math" (opt-in, per-tensor e4m3): the wide schedule with both products on e4m3 wgmma.
// The wide kernel's consumers run one of two schedules: "alternating" (one tile at a time) or "seesaw"
// (pairs of tiles, one consumer's S under the other's softmax), the latter for 16-bit caches from
// kSm90SeesawMinRows query rows per request, where the tensor cores bound the time (FP8 caches expand
// each page in place into a whole stage, which the seesaw releases in halves: 1.36-1.42x slower). The
// FP8-math kernel runs the seesaw at every row count (its pages and V^T have separate rings; see
// kSm90WideFp8Math).
// narrow_producer_warps: 0 for the wide kernel; the narrow kernel's producer, one warp copying and
// finishing the pages or two (one copies, one finishes: the 32-row form, and ds_mla at 16 rows from
// kSm90Narrow16SplitMinBatch).
struct Sm90Schedule {
  int rows_per_cta = 0;
  int ctas_per_sm = 0;
  int narrow_producer_warps = 0;
  bool fp8_math = false;
  bool seesaw = false;
  constexpr bool narrow() const noexcept { return narrow_producer_warps > 0; }
};
inline constexpr Sm90Schedule kSm90Wide{64, 1, 0, false, false};
inline constexpr Sm90Schedule kSm90WideSeesaw{64, 1, 0, false, true};
inline constexpr Sm90Schedule kSm90Narrow16{16, 2, 1, false, false};
inline constexpr Sm90Schedule kSm90Narrow16Split{16, 2, 2, false, false};
inline constexpr Sm90Schedule kSm90Narrow32{32, 1, 2, false, false};
// 16-bit caches on the narrow kernel: one consumer warpgroup, one producer warp, two 72-KB stages.
inline constexpr Sm90Schedule kSm90Narrow16Bit16{16, 1, 1, false, false};
inline constexpr Sm90Schedule kSm90Narrow16Bit32{32, 1, 1, false, false};
// The automatic choice for 16-bit caches (bench/results/2026-12-02-h200-narrow-16bit.md, run 5). The
// narrow kernel does no padded MMA work (the wide kernel's 64-row tile is 2-4x the work of 16-32 rows),
// which costs nothing cold but clock at the power cap, where serving runs:
// - <= 16 rows from kSm90Narrow16BitMinBatch requests: cold 0.997-1.040x the wide kernel and 0.99-1.06x
//   the portable one (b = 64-256, 1K-32K, varlen); at the cap 1.11-1.43x the wide and 1.05-1.35x the
//   portable kernel. At b = 16 it is 0.88-1.005x the wide kernel cold, so the wide kernel stays below,
//   except for a single request or two (up to kSm90Narrow16BitMaxFewBatch), split over every SM: there it is
//   1.007x (4K) and 1.044x (32K) at b = 1, 1.006x at b = 2, 16K, and 0.987-1.007x at b = 4-8
//   (bench/results/2026-12-03-h200-session41.md, run 2).
// - 17-32 rows from kSm90Narrow16Bit32MinBatch requests: cold 0.96-1.02x the wide kernel (0.963x with
//   lengths around 4K, 0.968x at 1K), at the cap 1.08-1.32x; at b = 64 cold 0.82-0.99x.
inline constexpr int kSm90Narrow16BitMinBatch = 64;
inline constexpr int kSm90Narrow16BitMaxFewBatch = 2;
inline constexpr int kSm90Narrow16Bit32MinBatch = 128;
// FP8 math runs the seesaw at every row count: 1.00-1.05x the alternating form below 128 rows
// (bench/results/2026-12-02-h200-fp8-math-one-copy.md, run 10), which it replaced.
inline constexpr Sm90Schedule kSm90WideFp8Math{64, 1, 0, true, true};
// The seesaw from two query tiles per request (65+ rows), whose CTAs share each page through L2, so that
// the tensor cores bound the time. Measured on the H200: 1.03-1.09x the alternating schedule from 128 rows
// (bench/results/2026-11-30-h200-sm90-seesaw.md); at 80-112 rows 1.02-1.14x cold and 1.01-1.15x at the
// power cap (one shape, b=16, 96 rows, 1K: 0.98x). With one tile (48-64 rows), whose pages each CTA reads
// from DRAM alone, 0.94-0.99x cold from b = 16 (b = 1: 0.96-1.02x) and 0.96-1.05x at the cap; with 16-32
// rows up to 7% slower (bench/results/2026-12-02-h200-seesaw-two-tiles.md).
inline constexpr int kSm90SeesawMinRows = 65;
// The 32-row narrow kernel (17-32 rows, FP8) from this batch size on: at b = 64 and 128 it is
// 1.26-1.79x the wide kernel from s_k = 4K (at b = 128 from 1K; at b = 64, 1K 6% slower for e4m3); at
// b = 16 it wins only from 16K and loses up to 38% at 1K, where a CTA's few tiles pay its merge
// (bench/results/2026-12-01-h200-sm90-narrow32-auto.md). The plan knows the batch, not the lengths.
inline constexpr int kSm90Narrow32MinBatch = 64;
// ds_mla at 16 rows takes the two-warp producer from this batch size on: its finish warp computes each
// page's scale table as the page lands, 1.02-1.04x at b=128 from 16K and level at b=64; at b=8-32 it
// measured 0.95-0.96x (bench/results/2026-12-02-h200-narrow-producer.md, runs 8-9).
inline constexpr int kSm90Narrow16SplitMinBatch = 64;

// The sm90 wide kernel's partial rows (kernels/common/partial_rows.h): fp16 from 33 query rows (1.03-1.07x at
// b = 1-16 with 64-128 rows, 1.05-1.06x on FP8 caches), fp32 up to 32, where fp16 rows measured 0.94-0.97x at
// b = 1-16, h_q = 16 (bench/results/2026-12-03-h200-half-partials.md).
// The seesaw (16-bit caches, kSm90SeesawMinRows rows on) is instantiated once per form: with the fp16 form's code
// beside its tile loop it ran 0.955-0.98x from b = 64 and at b = 16 from 16K (b=128, s_q=1, h_q=128, 16K: 964
// against 928 µs; one machine start, two rounds, bench/results/2026-12-03-h200-session41.md, run 6), where few
// segments are split, and 1.02-1.10x where every request is split over a few parts' worth of tiles. So it takes
// the fp16 form only where every request is split at least twice (2 b <= num_parts) and a part's share of the
// block tables is 0.5-16 pages (b * max_pages / num_parts: the table width stands in for the lengths, which the
// host does not know).
inline constexpr int kSm90WideFp16PartialsMinRows = 33;
inline constexpr int kSm90SeesawFp16MaxPagesPerPart = 16;
constexpr bool sm90_wide_fp16_partials(int rows, bool seesaw, int batch_size, int num_parts, int max_pages) {
  if (rows < kSm90WideFp16PartialsMinRows) return false;
  if (!seesaw) return true;
  const int64_t pages = static_cast<int64_t>(batch_size) * max_pages;  // over num_parts parts
  return 2 * static_cast<int64_t>(batch_size) <= num_parts && 2 * pages >= num_parts &&
         pages <= static_cast<int64_t>(kSm90SeesawFp16MaxPagesPerPart) * num_parts;
}

// The schedule for rows = s_q * h_q and batch_size requests. requested_rows: 0 (automatic: FP8 caches
// narrow for <= 16 rows where the format allows, and for <= 32 rows from kSm90Narrow32MinBatch requests;
// 16-bit caches narrow for <= 16 rows up to kSm90Narrow16BitMaxFewBatch and from kSm90Narrow16BitMinBatch
// requests, and for <= 32 rows from kSm90Narrow16Bit32MinBatch; wide otherwise), 16 or 32 (narrow), 64 (wide);
// DecodeOptions::sm90_rows_per_cta. The 16-row narrow kernel's producer form follows the format and batch
// (kSm90Narrow16SplitMinBatch).
// The wide kernel runs the seesaw from kSm90SeesawMinRows rows.
// math kQkAndPv: the FP8-math schedule for per-tensor e4m3 with requested_rows 0 or 64 (its seesaw at
// every row count).
Sm90Schedule choose_sm90_schedule(KVFormat format, bool q_is_bf16, int rows, int batch_size, int requested_rows,
                                  Fp8Math math = Fp8Math::kOff) noexcept;

// Split-KV parts per query tile so that parts * m_tiles fills the SMs (>= 1).
int choose_num_parts(int num_sms, int ctas_per_sm, int m_tiles) noexcept;

// Upper bound on partial (request, split) results the schedule can produce: every split request
// with k > 1 splits owns k - 1 of the (parts - 1) part boundaries, so sum k <= 2 (parts - 1),
// and sum k <= b + parts - 1.
int max_partials(int batch_size, int num_parts) noexcept;

// The combine kernel's groups (kernels/common/combine.cu): the requests that can be split. At most
// min(batch, num_parts - 1) requests are split (each owns >= 1 of the num_parts - 1 part boundaries).
int combine_groups(int batch_size, int num_parts) noexcept;

// The combine kernel's column tile, in column groups (4 columns) per CTA row (a power of two in [8, 1024]; from 128 on,
// tile / 128 whole rows, never more rows than `rows`). The host knows only the batch, rows, num_parts and the
// block table's width (max_pages), so it works from the splits a group can have: the slot bound over the
// groups, and what the table's width can span (a part takes at least kSm90MinUnitsPerPart units, plus a part
// boundary at each end). The tile is the widest whose lanes (256 / tile split lanes, 8 loads each) take those
// splits in one batch of loads: fewer lanes shorten the lanes' merge, and fewer CTAs start. With few groups
// (small batches) it grows further while the grid is larger than one wave of 384 CTAs, accepting more batches.
// (It used to be narrowed to about 384 CTAs: at b = 1, 32 lanes of one split each. Same-run A/Bs on the H200,
// bench/results/2026-12-01-h200-kv-l2-promotion.md runs 9-11: b = 1 and 16 1.02-1.10x, e.g. b=1, h_q=16,
// 4K 12.3 -> 11.5 us, h_q=128, 32K 32.1 -> 30.3; growing past one wave at b = 64-128 measured 0.99-1.00x,
// hence the group limit. Bounding the splits by the table's width: b=1, h_q=128, 4K 1.1x, bench/results/
// 2026-12-01-h200-dsmla-expansion.md run 17.)
int choose_combine_tile(int batch_size, int rows, int num_parts, int max_pages) noexcept;

// Workspace carving. The same code computes the size (base == nullptr) and the pointers.
struct DecodeWorkspace {
  unsigned* error_word = nullptr;   // 1 word, at offset 0 (see DecodePlan::device_error_word)
  void* parts = nullptr;            // SplitPart[num_parts]
  void* request_splits = nullptr;   // RequestSplit[batch]
  void* o_partial = nullptr;        // [max_partials, rows, 512] fp32, or fp16 (kernels/common/partial_rows.h)
  float* o_partial_scale = nullptr; // [max_partials, rows, 8] (fp16 rows)
  float* lse_partial = nullptr;     // [max_partials, rows]
  size_t bytes = 0;
};
DecodeWorkspace carve_decode_workspace(void* base, int batch_size, int rows, int num_parts);

}  // namespace openmla::detail
