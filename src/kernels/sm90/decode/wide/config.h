// Configuration of the sm90a "wide" decode kernel: a CTA owns 64 query rows (one m-tile) and
// streams 64-token KV tiles (one page) through two TMA stages. Three warpgroups: a producer (TMA;
// for FP8 caches it also expands each page into the query's type) and two consumers that split the
// 512 output columns. Only one consumer computes a tile's S = Q K^T and softmax (its owner); both
// multiply the tile's P by their half of V. The consumers run one of two schedules (WideSchedule):
//   alternating: one tile at a time, owners alternating; the other consumer waits for P.
//   seesaw (FlashMLA's name for it): tiles in pairs, consumer 0 owns the first, consumer 1 the
//     second, so that one consumer's softmax runs while the other's wgmmas keep the tensor cores
//     busy, the two see-sawing between softmax and MMA. Chosen where the tensor cores bound the time
//     (16-bit caches with two or more query tiles per request: kernels/sm90/decode/launch_config.h).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/common/kv_kind.h"
#include "kernels/sm90/decode/common.h"

namespace openmla::kernels::sm90 {

struct WideConfig {
  static constexpr int kRows = 64;                      // query rows per CTA: the wgmma M
  static constexpr int kTokens = 64;                    // KV tokens per tile: one page
  static constexpr int kBoxDims = 64;                   // 64 dims x 2 B = one 128-B swizzle row
  static constexpr int kBoxes = kHeadDimQK / kBoxDims;  // 9 boxes per 576-dim row
  static constexpr int kBoxBytes = kTokens * kBoxDims * 2;
  static constexpr int kTileBytes = kBoxes * kBoxBytes;  // 73,728 B: one page of a 16-bit cache
  static constexpr int kStages = 2;
  static constexpr int kConsumers = 2;                         // warpgroups that compute
  static constexpr int kThreads = (1 + kConsumers) * 128;      // + the producer warpgroup
  static constexpr int kHalfCols = kHeadDimV / kConsumers;     // O columns per consumer
  static constexpr int kHalfBoxes = kHalfCols / kBoxDims;      // V boxes per consumer
  // setmaxnreg budgets. The consumers' increase only completes with registers the producer
  // released, so producer + 2 x consumer <= 3 x the launch's count (168 at 384 threads; checked
  // when the kernel is prepared): 40 / 232 for 16-bit caches (four copying threads); FP8 caches give
  // the dequantizing warps 72 (four boxes per expansion step; at 40 they spill) and the consumers 216
  // (the alternating schedule fits; 56 / 224 with three boxes per step is slower).
  static constexpr int producer_regs(int kind) { return kind == kKv16Bit ? 40 : 72; }
  static constexpr int consumer_regs(int kind) { return kind == kKv16Bit ? 232 : 216; }
  // FP8 caches: the producer warpgroup's four warps dequantize (fp8_stage.cuh).
  static constexpr int kDequantWarps = 4;
  static constexpr int kDequantThreads = kDequantWarps * 32;
};

// Named barrier ids (0 is __syncthreads).
enum NamedBarrier : int {
  kBarConsumers = 1,  // both consumer warpgroups (256 threads)
  kBarPReady = 2,     // the owner of a tile published P, its row max and alpha (256)
  kBarConsumer0 = 4,  // consumer 0 alone (128); consumer 1 uses kBarConsumer0 + 1
  kBarDequant = 6,    // the dequantizing warps of the producer warpgroup (FP8 caches, 128)
  // Seesaw handoffs (kernel.cuh, consume_seesaw): both consumers meet at each (256), in this order.
  kBarScale0Ready = 7,  // consumer 0 published tile a's row max and alpha
  kBarScale1Ready = 8,  // consumer 1 published tile b's row max and alpha, and stored P of b
  kBarP0Ready = 9,      // consumer 0 stored P of tile a (rescaled to tile b's max)
};

// Which consumer schedule the wide kernel runs (kernel.cuh).
enum class WideSchedule : int {
  kAlternating = 0,  // one tile at a time, owners alternate
  kSeesaw = 1,       // tiles in pairs: each consumer's softmax overlaps the other's wgmmas
};

// Everything lives in one 1024-B aligned block (FP8 pages land raw in the upper part of their
// stage and are expanded in place: fp8_stage.cuh): the swizzled operands need 1024-B atoms.
struct alignas(1024) WideSharedStorage {
  uint8_t q[WideConfig::kTileBytes];                     // Q: 9 boxes of 64 rows x 64 dims, SW128
  uint8_t kv[WideConfig::kStages][WideConfig::kTileBytes];  // KV tiles, 9 boxes of 64 tokens x 64 dims
  uint8_t p[WideConfig::kRows * WideConfig::kTokens * 2];  // P of the current tile (seesaw: P_b up to 128 rows), K-major SW128
  float row_max[WideConfig::kRows];    // running max after the latest published tile (raw scores)
  float row_scale[WideConfig::kRows];  // its rescale factor alpha for O and l
  float row_scale_b[WideConfig::kRows];  // seesaw: alpha of tile b (consumer 1's step)
  float row_sum[WideConfig::kConsumers][WideConfig::kRows];  // each consumer's l at segment end
  uint64_t full[WideConfig::kStages][WideConfig::kBoxes];  // a box is ready (landed, or dequantized)
  uint64_t raw[WideConfig::kStages][1];  // FP8: the raw page landed (or was skipped)
  uint64_t q_full;                       // a segment's Q landed (one phase per segment of the part)
  // Stage halves, released separately: half c = consumer c's V boxes [4c, 4c + 4), plus the rope box when
  // consumer c read the P written over it (seesaw_pairs.h). Every thread of consumer c arrives.
  uint64_t empty[WideConfig::kStages][WideConfig::kConsumers];
  // Alternating schedule, 16-bit cache, <= kRopeEarlyMaxRows rows: box 8 (the rope dims) is read only by the
  // owner's S (P goes to `p`), so the owner releases it when S is done, ahead of the halves (128 arrivals).
  uint64_t rope_empty[WideConfig::kStages];
};
// The wide kernel's partial rows (kernels/common/partial_rows.h): fp16 or fp32 by wide_fp16_partials
// (launch_config.h). The alternating kernels hold both forms; the seesaw is instantiated once per form.

// Up to this many query rows the alternating schedule's box 8 goes back after S (rope_empty): with few rows the
// next page's copy starts earlier; at 64 rows the extra barrier costs as much as it gains.
inline constexpr int kRopeEarlyMaxRows = 16;
// Up to this many query rows (the alternating schedule's range) the 16-bit KV map asks for no L2 promotion
// (tensor_maps.cu, encode_wide_kv_maps): with the 256-B promotion each 72-KB page costs ~20% more L2 sector
// requests than it brings (Nsight Compute, b=128, h_q=16), which matters most at few rows. The seesaw and the
// FP8 maps keep the promotion, which they need.
inline constexpr int kKvNoPromotionMaxRows = 64;

inline constexpr size_t kWideSmemBytes = sizeof(WideSharedStorage) + 1024;  // + alignment slack
static_assert(kWideSmemBytes <= 232448, "wide kernel exceeds the sm_90 shared-memory limit per CTA");

}  // namespace openmla::kernels::sm90
