// Tile configuration of the portable split-KV decode kernel. The numbers live here; the shared-
// memory plan and warp layouts are derived from them (and static_asserted) so nothing downstream
// recomputes a size.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/common/kv_kind.h"

namespace openmla::kernels::portable {

inline constexpr int kHeadDimQK = 576;
inline constexpr int kHeadDimV = 512;
inline constexpr int kChunkBytes = 16;                       // one cp.async / ldmatrix row
inline constexpr int kRowChunks = kHeadDimQK * 2 / kChunkBytes;  // 72 chunks per 576-wide row
inline constexpr int kPageTokens = 64;
// Partial rows as fp16 (kernels/common/partial_rows.h): half the bytes of fp32 rows, written as whole sectors
// (fp32 rows in the quantized column order would be 4-byte stores).
inline constexpr bool kPortableFp16Partials = true;
inline constexpr int kDsMlaScalesByte = 512;   // ds_mla token: 4 float32 tile scales
inline constexpr int kDsMlaRopeByte = 528;     // ds_mla token: rope

// The kernel's query/key variants (one instantiation each per tile, query type and cache kind).
enum PortableQueries : int {
  kUniformQueries = 0,  // s_q tokens per request, a power-of-two head count, causal or not
  kGeneralQueries = 1,  // ragged counts, tree masks, any head count (RequestQueries, KeyWindow)
  kSparseKeys = 2,      // sparse top-k decode: one query token per request, its keys gathered from index lists
};

// The sparse-key variant's static shared memory (kernel.cuh, SparseRows: three slots of N row addresses), at most
// this many bytes: its plan chooses the tile with that much less than the device's per-block limit.
inline constexpr int kSparseRowsMaxBytes = 3 * 64 * 8;

template <int kRows, int kTokens, int kWarps>
struct TileConfig {
  static constexpr int M = kRows;     // query rows per CTA
  static constexpr int N = kTokens;   // KV tokens per pipeline stage
  static constexpr int kNumWarps = kWarps;
  static constexpr int kThreads = kWarps * 32;

  // S = Q K^T: warps tile (M rows) x (N keys) as kQkWarpsM x kQkWarpsN.
  static constexpr int kQkWarpsM = M / 16;
  static constexpr int kQkWarpsN = kWarps / kQkWarpsM;
  static constexpr int kQkKeys = N / kQkWarpsN;  // keys per warp
  // O += P V: warps tile (M rows) x (512 cols) as 1 x kWarps: every warp takes all M rows and
  // 512 / kWarps columns, so V is read from shared memory once per tile (P, 8x smaller, is read
  // by every warp). The kernel is bound by shared-memory reads: 1 x 8 moves 128 KB per 64x64
  // tile where 2 x 4 moved 160 KB and 4 x 2 224 KB.
  static constexpr int kPvWarpsM = 1;
  static constexpr int kPvWarpsN = kWarps / kPvWarpsM;
  static constexpr int kPvRows = M / kPvWarpsM;
  static constexpr int kPvCols = kHeadDimV / kPvWarpsN;

  // P row: N values. Rows of 8 chunks use an XOR swizzle; shorter rows are padded to an odd chunk
  // count so that 8 consecutive rows hit 8 different bank groups.
  static constexpr int kPChunks = N * 2 / kChunkBytes;
  static constexpr bool kPSwizzled = kPChunks % 8 == 0;
  static constexpr int kPRowChunks = kPSwizzled ? kPChunks : kPChunks + 1;

  static_assert(M % 16 == 0 && kQkWarpsM >= 1 && kWarps % kQkWarpsM == 0, "rows per warp");
  static_assert(kQkKeys >= 8 && kQkKeys % 8 == 0, "each warp needs whole n8 key tiles");
  static_assert(kQkKeys == 8 || kQkKeys % 16 == 0, "keys per warp: 8 or a multiple of 16");
  static_assert(kPvRows % 16 == 0 && kPvCols % 16 == 0, "PV warp tile");
  static_assert(N % 16 == 0 && kPageTokens % N == 0, "a stage is a whole part of one page");
};

// The final output rows: whole 32-byte sectors per store instruction (lane-pair word swaps or half exchanges, as
// the partial rows) in the 64-row tiles, where they are faster; the 16-row tiles keep 4-byte (16-bit caches) and
// 16-byte (quantized order) stores, where the exchange costs more than it saves.
template <typename Cfg>
inline constexpr bool kPortableWholeSectorOutput = Cfg::M >= 64;

template <int kKind>
struct KvLayout {
  static constexpr bool kQuantized = kKind != kKv16Bit;
  static constexpr int kTokenBytes = kKind == kKv16Bit ? 1152 : kKind == kKvE4M3 ? 576 : 656;
  static_assert(kTokenBytes % kChunkBytes == 0, "tokens are whole 16-byte chunks");
};

// Two pipeline stages (one tile in flight while one is computed). 16-bit tiles land in swizzled rows
// of T for ldmatrix; quantized tiles land as stored (e4m3 chunks swizzled, raw_chunk_offset) and
// are dequantized by each thread into its own fragments, so a stage is half (e4m3) the bytes and
// two 16-row CTAs fit on an SM.
inline constexpr int kStages = 2;
template <class Cfg, typename T, int kKind, bool kQuantized = KvLayout<kKind>::kQuantized>
struct KvStages {
  alignas(128) T kv[kStages][Cfg::N * kHeadDimQK];
};
template <class Cfg, typename T, int kKind>
struct KvStages<Cfg, T, kKind, true> {
  alignas(128) uint8_t raw[kStages][Cfg::N * KvLayout<kKind>::kTokenBytes];
};

// CTAs per SM the kernel's registers are budgeted for: two for quantized 16-row tiles (whose shared
// memory allows it: 95 / 104 KB), one otherwise.
template <class Cfg, int kKind>
inline constexpr int kMinCtasPerSm = KvLayout<kKind>::kQuantized && Cfg::M == 16 ? 2 : 1;

// QK of the quantized 16-row tiles is split over k (fp8_fragments.cuh, qk_gemm_quantized): pairs of
// warps share two key tiles, each multiplying both over half of the dims, and trade partial scores
// through shared memory, so each reads half of Q: every warp reading all of Q would be 147 KB of
// shared-memory reads per 64-token tile (whose e4m3 bytes are 36 KB), which bounds the kernel. Groups
// of four gain nothing more and need 12 KB instead of 4 KB, which no longer fits the 16-row e4m3 tile
// into the 99 KB of sm_86 / sm_89.
template <class Cfg, int kKind>
inline constexpr int kQkSplit = KvLayout<kKind>::kQuantized && Cfg::M == 16 ? 2 : 1;

// Shared memory of one CTA. Q rows are 72 chunks with chunk c of row r stored at c ^ (r & 7):
// ldmatrix reads 8 rows of one chunk column without bank conflicts (16-bit KV rows likewise).
// T is the type the tensor cores multiply (the query's, or fp16 for e4m3 caches).
template <class Cfg, typename T, int kKind>
struct SharedStorage : KvStages<Cfg, T, kKind> {
  alignas(128) T q[Cfg::M * kHeadDimQK];
  alignas(128) T p[Cfg::M * Cfg::kPRowChunks * 8];
  // Per row, the key-warps' maxima and sums of this tile (row-major: a row's values are one vector load).
  alignas(16) float partial_max[Cfg::M][Cfg::kQkWarpsN];
  alignas(16) float partial_sum[Cfg::M][Cfg::kQkWarpsN];
  float row_max[2][Cfg::M];  // running max (raw score units), double-buffered across tiles
  float row_sum[2][Cfg::M];  // running sum of exp2((s - max) * scale_log2)
  float q_amax[Cfg::kNumWarps];  // a bf16 query's largest |q| per warp (fp16 math: its shift)
  // Split-k QK: per owner warp, the other kQkSplit - 1 warps' partial scores of its key tile, one
  // 16-byte accumulator fragment per lane.
  static constexpr int kQkSplitWays = kQkSplit<Cfg, kKind>;
  alignas(16) float qk_partials[kQkSplitWays > 1 ? Cfg::kQkWarpsN * (kQkSplitWays - 1) * 32 : 1][4];
};

}  // namespace openmla::kernels::portable
