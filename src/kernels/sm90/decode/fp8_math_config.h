// Configuration of the sm90a FP8-math decode kernel (opt-in, per-tensor e4m3 caches only): the wide
// kernel's schedule (64 query rows per CTA, a producer warpgroup and two consumers that take turns
// computing S and split O's 512 columns) with both products on e4m3 wgmma:
//   S = Q K^T: Q quantized to e4m3 per query row (power-of-two scale), K as copied (TMA, SW64);
//   O += P V:  P in e4m3 (x 256), V^T written by the producer warps (8-bit wgmma reads K-major B only).
// docs/hopper-kernel.md, "FP8 math"; fp8_math_kernel.cuh.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/sm90/decode/config.h"

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
  static constexpr int kStages = 2;
  static constexpr int kConsumers = 2;
  static constexpr int kThreads = (1 + kConsumers) * 128;
  static constexpr int kHalfCols = kHeadDimV / kConsumers;  // O columns (V^T rows) per consumer
  static constexpr int kVtHalfBytes = kHalfCols * kVtRowBytes;
  static constexpr int kTransposeThreads = 128;  // the producer warpgroup writes V^T
  // setmaxnreg budgets: producer + 2 x consumer <= 3 x the launch's count (168 at 384 threads).
  static constexpr int kProducerRegs = 72;
  static constexpr int kConsumerRegs = 216;  // the kernel compiles to <= 168 anyway
  // P is stored as e4m3(kPScale * p), p in [0, 1]: the largest weight of a row lands in (128, 256].
  static constexpr float kPScale = 256.f;
};

// Named barrier ids (0 is __syncthreads); the same roles as the wide kernel's.
enum Fp8MathBarrier : int {
  kFp8MathBarConsumers = 1,  // both consumer warpgroups (256 threads)
  kFp8MathBarPReady = 2,     // the owner of a tile published P, its row base and alpha (256)
};

struct alignas(1024) Fp8MathSharedStorage {
  uint8_t q[Fp8MathConfig::kPageBytes];                           // Q e4m3: 9 boxes of 64 rows x 64 B, SW64
  uint8_t k[Fp8MathConfig::kStages][Fp8MathConfig::kPageBytes];   // pages as stored: 9 boxes of 64 tokens x 64 B, SW64
  uint8_t vt[Fp8MathConfig::kStages][Fp8MathConfig::kVtBytes];    // V^T: 512 rows (dims) x 64 B (tokens), SW64
  uint8_t p[Fp8MathConfig::kRows * Fp8MathConfig::kTokens];      // P e4m3: 64 rows x 64 B, SW64
  float q_scale[Fp8MathConfig::kRows];  // per query row: Q = q_e4m3 * q_scale (a power of two)
  float row_base[Fp8MathConfig::kRows];   // running exponent base (log2 units, an integer)
  float row_scale[Fp8MathConfig::kRows];  // its rescale factor alpha (a power of two)
  float row_sum[Fp8MathConfig::kConsumers][Fp8MathConfig::kRows];
  uint64_t k_full[Fp8MathConfig::kStages];   // the page landed (or was skipped)
  uint64_t vt_full[Fp8MathConfig::kStages];  // V^T written (one arrival per producer thread)
  uint64_t empty[Fp8MathConfig::kStages];    // every consumer thread is done with the stage
};

inline constexpr size_t kFp8MathSmemBytes = sizeof(Fp8MathSharedStorage) + 1024;  // + alignment slack
static_assert(kFp8MathSmemBytes <= 232448, "FP8-math kernel exceeds the sm_90 shared-memory limit per CTA");

}  // namespace openmla::kernels::sm90
