// Configuration of the sm90a "narrow" decode kernel for few query rows (s_q * h_q <= 16: TP8
// DeepSeek decode, h_q = 8 with two MTP tokens; or <= 32): per-tensor e4m3 with either query type,
// ds_mla with bf16 queries, and 16-bit caches.
//
// Operands are swapped: the 64 KV tokens of a page are the wgmma M and the 16 (32) query rows its N,
// S^T = K Q^T and O^T += V^T P^T, so no MMA row is padding. FP8: the A operands (K, and V^T) come
// from registers, so each consumer thread dequantizes its own fragments straight from the page as TMA
// stored it: no expansion pass through shared memory, and a page costs its FP8 size in the ring. A CTA
// is one consumer warpgroup plus one or two producer warps (NarrowConfig); two CTAs share an SM, four
// pages in flight per SM. 16-bit caches: both operands from shared memory (V^T as an MN-major A),
// one consumer warpgroup for 16 or 32 rows, two 72-KB stages, one CTA per SM.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/common/kv_kind.h"
#include "kernels/sm90/decode/common.h"
#include "openmla/kv_format.h"

namespace openmla::kernels::sm90 {

// A consumer thread (warp w of its warpgroup, lane group g) owns 16 consecutive latent dims of O
// (and reads them from V): 4 warps x 8 groups x 16 = 512, whatever the row count.
inline constexpr int kNarrowDimsPerThread = kHeadDimV / (4 * 8);

// kRowsT query rows per CTA. FP8: 16 (one consumer warpgroup, two CTAs per SM) or 32 (two consumer
// warpgroups taking alternate tiles of a 4-stage ring, one CTA per SM; they merge their softmax states
// once per segment). kProducerWarpsT: 1 (one warp copies and finishes the pages) or 2 (one copies, one
// finishes; always with 32 rows, and for ds_mla at 16 rows from kNarrow16SplitMinBatch (launch_config.h) requests).
// 16-bit caches (kKindT = kKv16Bit): one consumer warpgroup for either row count (O^T of 32 rows is 128
// registers a thread), one producer warp, two stages (a page is 72 KB), one CTA per SM.
// The producer warps a config has unless told (NarrowConfig's default, and the shared-memory layout's).
template <int kKindT, int kRowsT>
inline constexpr int kNarrowDefaultProducerWarps = kKindT != kKv16Bit && kRowsT == 32 ? 2 : 1;

template <int kRowsT, int kKindT = kKvE4M3, int kProducerWarpsT = kNarrowDefaultProducerWarps<kKindT, kRowsT>>
struct NarrowConfig {
  static_assert(kRowsT == 16 || kRowsT == 32);
  static constexpr bool k16Bit = kKindT == kKv16Bit;
  static_assert(kProducerWarpsT == 2 || kRowsT == 16 || k16Bit);
  static_assert(kProducerWarpsT == 1 || !k16Bit);
  static constexpr int kRows = kRowsT;             // query rows per CTA: the wgmma N
  static constexpr int kTokens = 64;               // KV tokens per tile (one page): the wgmma M
  static constexpr int kConsumers = k16Bit ? 1 : kRows / 16;  // consumer warpgroups
  static constexpr int kStages = k16Bit ? 2 : 2 * kConsumers;
  static constexpr int kConsumerWarps = 4;         // per warpgroup
  static constexpr int kConsumerThreads = kConsumers * 128;
  // + the producer: its warps, or with two consumers a whole warpgroup (two warps work), so that
  // setmaxnreg can move its registers to the consumers: 40 + 2 x 232 <= 3 x 168 (instantiate.cuh checks).
  static constexpr int kProducerWarps = kProducerWarpsT;
  static constexpr int kProducerThreads = kConsumers == 1 ? 32 * kProducerWarps : 128;
  static constexpr int kThreads = kConsumerThreads + kProducerThreads;
  static constexpr bool kRebalanceRegisters = kConsumers == 2;
  static constexpr int kProducerRegs = 40, kConsumerRegs = 232;
  static constexpr int kCtasPerSm = kConsumers == 1 && !k16Bit ? 2 : 1;
  static constexpr int kRowsPerThread = kRows / 4;  // query rows (S^T / O^T columns) a thread holds
  static constexpr int kQBoxBytes = kRows * 128;    // Q^T: kRows rows x 64 dims x 2 B per box, SW128
  static constexpr int kQBoxes = kHeadDimQK / 64;   // 9
  static constexpr int kDimsPerThread = kNarrowDimsPerThread;
};

// Where a page lands in its stage. 128-bit shared loads are served a quarter-warp (8 lanes: two
// lane groups g, four quad lanes c) at a time, so each layout is chosen so that the 8 chunks of
// every fragment load (kernel.cuh) fall in 8 different 16-B bank groups.
template <int kKind>
struct NarrowPage;

// Per-tensor e4m3: its 576-B rows as stored would put the four tokens a V^T load reads per lane
// group in one bank group (576 = 64 mod 128). So dims 0..511 land in four TMA boxes of 64 tokens x
// 128 B with the 128-B swizzle, the 64 rope bytes in one box of 64 x 64 B.
template <>
struct NarrowPage<kKvE4M3> {
  static constexpr bool kSwizzled = true;
  static constexpr int kLatentBoxBytes = 64 * 128;
  static constexpr int kLatentBoxes = 4;
  static constexpr int kRopeOffset = kLatentBoxes * kLatentBoxBytes;  // 32,768
  static constexpr int kRopeRowBytes = 64;
  static constexpr int kBytes = kRopeOffset + 64 * kRopeRowBytes;     // 36,864 = 576 B x 64 tokens
};

// 16-bit: the wide kernel's tiles, nine boxes of 64 tokens x 64 dims (128 B) with the 128-B swizzle:
// boxes 0-7 are V (and K's latent dims), box 8 the rope. K boxes are K-major A operands, V boxes MN-major
// ones. The page lands in kParts copies of kPartBoxes boxes, each on its own barrier, so that S^T starts
// on the first part while the rest is in flight.
template <>
struct NarrowPage<kKv16Bit> {
  static constexpr bool kSwizzled = true;               // finish_page: whole rows across the boxes
  static constexpr int kLatentBoxBytes = 64 * 128;      // every box, the rope's too
  static constexpr int kBoxes = 9;
  static constexpr int kParts = 3;
  static constexpr int kPartBoxes = kBoxes / kParts;
  static constexpr int kPartBytes = kPartBoxes * kLatentBoxBytes;
  static constexpr int kBytes = kBoxes * kLatentBoxBytes;  // 73,728 = 1152 B x 64 tokens
};

// ds_mla: the page exactly as stored (one TMA box over the page's dense 656-B rows, viewed as rows of
// kNarrowCopyRowBytes): 656 = 16 mod 128 spreads the loads by itself, and one copy of the page reads
// whole L2 sectors in order, which boxes cut out of its 16-B-misaligned rows do not.
template <>
struct NarrowPage<kKvDsMla> {
  static constexpr bool kSwizzled = false;
  static constexpr int kRowBytes = kDsMlaBytesPerToken;     // 656
  static constexpr int kScalesOffset = kDsMlaScalesOffset;  // inside a row: 4 x float
  static constexpr int kRopeOffset = kDsMlaRopeOffset;      // inside a row: 64 x bf16
  static constexpr int kBytes = 64 * kRowBytes;             // 41,984
};

// ds_mla scales of one page, factored per token t so that fp16 holds them exactly: tile scale
// s[t][j] = hi[t] * lo[j][t], hi a power of two (2^(E - 6), E the largest exponent of the token's
// four scales) and lo < 2^7 (so that 448 * lo fits fp16). Written by the producer warp.
struct NarrowScaleTable {
  uint16_t lo[4][64];  // fp16 bits, [tile][token]: a thread's four PV tokens are one 8-B load
  float hi[64];
};

// The 16-bit form's epilogue stages O (16 rows x 512 dims, fp32) in shared memory to write whole rows:
// its O^T fragments hold dims 64 b + 16 w + g (+ 8), not a run of dims per thread. Rows padded by 4
// floats, so that the four query rows a warp's store writes fall in different banks.
// The narrow kernel's partial rows: fp16 on FP8 caches (whose fp32 rows would be 16-byte stores of half a sector
// each), fp32 on 16-bit caches, whose staged stores write whole sectors already and which run from 64 requests,
// where few are split: the fp16 form's extra code would gain nothing there.
template <int kKind>
inline constexpr bool kNarrowFp16Partials = kKind != kKv16Bit;

inline constexpr int kNarrowStageRows = 16;
inline constexpr int kNarrowStageStride = kHeadDimV + 4;

template <int kKind, int kRows>
struct alignas(1024) NarrowSharedStorage {
  using Page = NarrowPage<kKind>;
  using Cfg = NarrowConfig<kRows, kKind>;
  uint8_t kv[Cfg::kStages][Page::kBytes];                  // pages (NarrowPage)
  uint8_t q[Cfg::kQBoxes * Cfg::kQBoxBytes];               // Q^T, dims permuted (kernel.cuh); at
                                                           // a segment's end the consumers' merge buffer
  // P^T per consumer: kRows x 64 tokens, SW128. Two buffers, alternating per tile: a tile's P^T is
  // written before the warpgroup's first barrier of the tile (lazy rescaling), so not over the one
  // the previous tile's PV may still read in another warp.
  uint8_t p[Cfg::kConsumers][2][kRows * 128];
  float red[Cfg::kConsumers][Cfg::kConsumerWarps][kRows];  // per-warp row max / sum
  float red_hi[Cfg::kConsumers][Cfg::kConsumerWarps];      // ds_mla: per-warp max of hi
  float q_amax[Cfg::kConsumers * Cfg::kConsumerWarps];     // per-warp max |q|
  float merge[3][kRows];                                   // consumer 1's m, l, h at a segment's end
  int merge_bad;                                           // consumer 1 saw a bad page id
  NarrowScaleTable scales[kKind == kKvDsMla ? Cfg::kStages : 1];  // per stage (ds_mla; one unused otherwise)
  alignas(16) float o_stage[kKind == kKv16Bit ? kNarrowStageRows * kNarrowStageStride : 1];  // 16-bit: the epilogue's rows (16-B loads)
  uint64_t full[Cfg::kStages];    // the page landed (or was skipped); 16-bit: its last part
  uint64_t front[kKind == kKv16Bit ? Cfg::kStages : 1][2];  // 16-bit: the page's first two parts landed
  uint64_t ready[Cfg::kStages];   // the producer finished it (tail rows, ds_mla scale table)
  uint64_t empty[Cfg::kStages];   // every thread of its consumer is done reading it
};

template <int kKind, int kRows>
inline constexpr size_t kNarrowSmemBytes = sizeof(NarrowSharedStorage<kKind, kRows>) + 1024;  // + alignment slack
static_assert(NarrowPage<kKvE4M3>::kBytes % 1024 == 0 && NarrowPage<kKvDsMla>::kBytes % 1024 == 0 &&
                  NarrowPage<kKv16Bit>::kBytes % 1024 == 0,
              "stages stay 1024-B aligned (Q^T and P^T after them are SW128 operands)");
// 16 rows: two CTAs per SM (228 KB per SM, 1 KB of it reserved per CTA); 32 rows: one.
static_assert(kNarrowSmemBytes<kKvE4M3, 16> * 2 + 2048 <= 233472 && kNarrowSmemBytes<kKvDsMla, 16> * 2 + 2048 <= 233472,
              "two 16-row narrow CTAs must fit on one SM");
static_assert(kNarrowSmemBytes<kKvE4M3, 32> <= 232448 && kNarrowSmemBytes<kKvDsMla, 32> <= 232448 &&
                  kNarrowSmemBytes<kKv16Bit, 16> <= 232448 && kNarrowSmemBytes<kKv16Bit, 32> <= 232448,
              "a 32-row narrow CTA (or a 16-bit one) must fit the per-CTA limit");
// The merge of the two consumers passes half of consumer 1's O^T (64 floats a thread) through Q^T's buffer.
static_assert(NarrowConfig<32>::kQBoxes * NarrowConfig<32>::kQBoxBytes >= 64 * 128 * 4);

// A ds_mla page as the TMA copies it: rows of 256 B.
inline constexpr int kNarrowCopyRowBytes = 256;
static_assert(NarrowPage<kKvDsMla>::kBytes % kNarrowCopyRowBytes == 0);

}  // namespace openmla::kernels::sm90
