// Configuration of the sm90a "narrow" decode kernel for FP8 caches and few query rows
// (s_q * h_q <= 16: TP8 DeepSeek decode, h_q = 8 with two MTP tokens): per-tensor e4m3 with either
// query type, ds_mla with bf16 queries.
//
// Operands are swapped: the 64 KV tokens of a page are the wgmma M and the 16 query rows its N,
// S^T = K Q^T and O^T += V^T P^T. The A operands (K, and V^T) come from registers, so each consumer
// thread dequantizes its own fragments straight from the page as TMA stored it: no expansion pass
// through shared memory, and a page costs its FP8 size in the ring. A CTA is one consumer
// warpgroup plus one producer warp; two CTAs share an SM, four pages in flight per SM.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/common/kv_kind.h"
#include "kernels/sm90/decode/config.h"
#include "openmla/kv_format.h"

namespace openmla::kernels::sm90 {

struct NarrowConfig {
  static constexpr int kRows = 16;                 // query rows per CTA: the wgmma N
  static constexpr int kTokens = 64;               // KV tokens per tile (one page): the wgmma M
  static constexpr int kStages = 2;
  static constexpr int kConsumerWarps = 4;         // one warpgroup
  static constexpr int kThreads = kConsumerWarps * 32 + 32;  // + the producer warp
  static constexpr int kCtasPerSm = 2;
  static constexpr int kQBoxBytes = kRows * 128;   // Q^T: 16 rows x 64 dims x 2 B per box, SW128
  static constexpr int kQBoxes = kHeadDimQK / 64;  // 9
  // Consumer thread (warp w, lane group g) owns these 16 consecutive latent dims of O (and reads
  // them from V): 32 groups x 16 = 512.
  static constexpr int kDimsPerThread = kHeadDimV / (kConsumerWarps * 8);
};

// A page lands in its stage exactly as stored (one bulk copy of 64 dense token rows): with the
// rows' pitch of 576 or 656 bytes (16 B mod 128 or 64 B mod 128) both the K-fragment reads (a quad
// reads 4 chunks of one token, 8 tokens per warp) and the V^T-fragment reads (8 chunks of one token
// per quad row, 4 tokens) spread over all banks: no swizzle needed. One copy of the whole page
// reads whole L2 sectors in order, which boxes cut out of misaligned rows do not (656-B rows).
template <int kKind>
struct NarrowPage;

template <>
struct NarrowPage<kKvE4M3> {
  static constexpr int kRowBytes = kHeadDimQK;  // 576 x e4m3
  static constexpr int kRopeOffset = kHeadDimV;  // inside a row
  static constexpr int kBytes = 64 * kRowBytes;  // 36,864
};

template <>
struct NarrowPage<kKvDsMla> {
  static constexpr int kRowBytes = kDsMlaBytesPerToken;  // 656
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

template <int kKind>
struct alignas(1024) NarrowSharedStorage {
  using Page = NarrowPage<kKind>;
  uint8_t kv[NarrowConfig::kStages][Page::kBytes];         // pages as stored
  uint8_t q[NarrowConfig::kQBoxes * NarrowConfig::kQBoxBytes];  // Q^T, dims permuted (narrow_kernel.cuh)
  uint8_t p[NarrowConfig::kRows * 128];                    // P^T: 16 rows x 64 tokens, SW128
  float red[NarrowConfig::kConsumerWarps][NarrowConfig::kRows];  // per-warp row max / sum
  float red_hi[NarrowConfig::kConsumerWarps];                     // ds_mla: per-warp max of hi
  NarrowScaleTable scales[kKind == kKvDsMla ? NarrowConfig::kStages : 1];
  uint64_t full[NarrowConfig::kStages];    // the page landed (or was skipped)
  uint64_t ready[NarrowConfig::kStages];   // the producer finished it (tail rows, ds_mla scale table)
  uint64_t empty[NarrowConfig::kStages];   // every consumer thread is done reading it
};

// The page as the TMA copies it: rows of 256 B (both page sizes are multiples of 256).
inline constexpr int kNarrowCopyRowBytes = 256;
static_assert(NarrowPage<kKvE4M3>::kBytes % kNarrowCopyRowBytes == 0 &&
              NarrowPage<kKvDsMla>::kBytes % kNarrowCopyRowBytes == 0);

template <int kKind>
inline constexpr size_t kNarrowSmemBytes = sizeof(NarrowSharedStorage<kKind>) + 1024;  // + alignment slack
static_assert(NarrowPage<kKvE4M3>::kBytes % 1024 == 0 && NarrowPage<kKvDsMla>::kBytes % 1024 == 0,
              "stages stay 1024-B aligned (Q^T and P^T after them are SW128 operands)");
// Two CTAs per SM: 228 KB per SM, 1 KB of it reserved per CTA.
static_assert(kNarrowSmemBytes<kKvE4M3> * NarrowConfig::kCtasPerSm + 2048 <= 233472 &&
                  kNarrowSmemBytes<kKvDsMla> * NarrowConfig::kCtasPerSm + 2048 <= 233472,
              "two narrow CTAs must fit on one SM");

}  // namespace openmla::kernels::sm90
