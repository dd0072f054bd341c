// Configuration of the sm90a FP8-math decode kernel (opt-in, per-tensor e4m3 caches only): the wide
// kernel's layout of work (64 query rows per CTA, a producer warpgroup and two consumers that split
// O's 512 columns) and its seesaw schedule (pairs of tiles; at every row count), with both products on
// e4m3 wgmma:
//   S = Q K^T: Q quantized to e4m3 per query row (power-of-two scale), K as copied (TMA, SW64);
//   O += P V:  P in e4m3 (x 256), V^T written by the producer warps (8-bit wgmma reads K-major B only).
// K and V^T live in separate rings: a page as copied is needed only until its S and its
// transposition are done, V^T until both consumers' PVs are, and each consumer's half of V^T goes
// back on its own. docs/hopper-kernel.md, "FP8 math"; kernel.cuh.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/sm90/decode/common.h"

namespace openmla::kernels::sm90 {

struct Fp8MathConfig {
  static constexpr int kRows = 64;       // query rows per CTA: the wgmma M
  static constexpr int kTokens = 64;     // KV tokens per tile: one page
  static constexpr int kBoxDims = 64;    // 64 e4m3 = one 64-B swizzle row
  static constexpr int kBoxes = kHeadDimQK / kBoxDims;  // 9
  static constexpr int kBoxBytes = kTokens * kBoxDims;  // 4,096 (also Q: 64 rows x 64 B)
  static constexpr int kPageBytes = kBoxes * kBoxBytes;  // 36,864: one page as stored
  static constexpr int kVtRowBytes = kTokens;            // V^T: one row of 64 tokens per dim
  static constexpr int kVtBytes = kHeadDimV * kVtRowBytes;  // 32,768
  static constexpr int kKStages = 3;   // pages as copied: S and the transposition read them
  static constexpr int kVtStages = 2;  // V^T: the PVs read it
  static constexpr int kConsumers = 2;
  static constexpr int kThreads = (1 + kConsumers) * 128;
  static constexpr int kHalfCols = kHeadDimV / kConsumers;  // O columns (V^T rows) per consumer
  static constexpr int kVtHalfBytes = kHalfCols * kVtRowBytes;
  static constexpr int kTransposeThreads = 128;  // the producer warpgroup writes V^T
  static constexpr int kTransposeWarps = kTransposeThreads / 32;  // warp w: dims [128 w, 128 w + 128)
  static constexpr int kVtHalfWriters = kTransposeThreads / kConsumers;  // threads writing one half
  // setmaxnreg budgets: producer + 2 x consumer <= 3 x the launch's count (168 at 384 threads).
  static constexpr int kProducerRegs = 72;
  static constexpr int kConsumerRegs = 216;  // the seesaw's consumers spill at 208 (with a producer at 88)
  // P is stored as e4m3(kPScale * p), p in [0, 1]: the largest weight of a row lands in (128, 256].
  static constexpr float kPScale = 256.f;
};

// Named barrier ids (0 is __syncthreads); the same roles as the wide kernel's.
enum Fp8MathBarrier : int {
  kFp8MathBarConsumers = 1,  // both consumer warpgroups (256 threads)
  // Seesaw handoffs, met by both consumers in this order every pair (256 each).
  kFp8MathBarScale0 = 3,  // consumer 0 published tile a's base and alpha
  kFp8MathBarScale1 = 4,  // consumer 1 published tile b's base and alpha, and stored P_b
  kFp8MathBarP0 = 5,      // consumer 0 stored P_a (at b's base)
};

struct alignas(1024) Fp8MathSharedStorage {
  uint8_t q[Fp8MathConfig::kPageBytes];                           // Q e4m3: 9 boxes of 64 rows x 64 B, SW64
  uint8_t k[Fp8MathConfig::kKStages][Fp8MathConfig::kPageBytes];  // pages as stored: 9 boxes of 64 tokens x 64 B, SW64
  uint8_t vt[Fp8MathConfig::kVtStages][Fp8MathConfig::kVtBytes];   // V^T: 512 rows (dims) x 64 B (tokens), SW64
  // P e4m3, 64 rows x 64 B, SW64: [0] P_a, [1] P_b.
  uint8_t p[2][Fp8MathConfig::kRows * Fp8MathConfig::kTokens];
  float q_scale[Fp8MathConfig::kRows];  // per query row: Q = q_e4m3 * q_scale (a power of two)
  float row_base[Fp8MathConfig::kRows];   // running exponent base (log2 units, an integer)
  float row_scale[Fp8MathConfig::kRows];  // its rescale factor alpha (a power of two)
  float row_scale_b[Fp8MathConfig::kRows];  // alpha of tile b (consumer 1's step)
  float row_sum[Fp8MathConfig::kConsumers][Fp8MathConfig::kRows];
  uint64_t k_full[Fp8MathConfig::kKStages];   // the page landed (or was skipped)
  // The page's S (128 arrivals: the tile's owner) and its transposition (one per producer warp) are done.
  uint64_t k_empty[Fp8MathConfig::kKStages];
  // Half h of V^T (dims [256 h, 256 h + 256), consumer h's columns): written (the 64 producer threads
  // of warps 2h, 2h + 1) and free again (consumer h's 128 threads, after their last PV on it).
  uint64_t vt_full[Fp8MathConfig::kVtStages][Fp8MathConfig::kConsumers];
  uint64_t vt_empty[Fp8MathConfig::kVtStages][Fp8MathConfig::kConsumers];
};

// FP8 math's partial rows stay fp32: the fp16 form's code costs its compute-bound shapes (large batches, many
// rows) more than its smaller stores gain at small batches.
inline constexpr bool kFp8MathFp16Partials = false;

inline constexpr size_t kFp8MathSmemBytes = sizeof(Fp8MathSharedStorage) + 1024;  // + alignment slack
static_assert(kFp8MathSmemBytes <= 232448, "FP8-math kernel exceeds the sm_90 shared-memory limit per CTA");

}  // namespace openmla::kernels::sm90
