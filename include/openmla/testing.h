// Testing and debugging surface of DecodePlan: force a launch choice that DecodePlan otherwise makes from
// the shape and the device. For tests (every kernel form on every shape), benchmarks and bisecting; a
// serving engine needs none of it. Results do not depend on these choices (each kernel computes the same
// decode), but a forced choice that cannot run the shape or the device is an error, never a fallback.
//
//   auto overrides = openmla::testing::environment_overrides();   // or {} to ignore the environment
//   overrides.sm90_rows_per_cta = 32;
//   openmla::DecodePlan plan = openmla::testing::make_decode_plan(shape, {}, overrides);
//
// DecodePlan's own constructor applies environment_overrides(), so the environment variables below also
// steer programs that use the plain API (e.g. a test suite run once per backend).
#pragma once

#include <cstdint>

#include "openmla/decode.h"

namespace openmla::testing {

// The portable kernel's tiles: query rows per CTA, KV tokens per pipeline stage, and warps per CTA
// (8 unless named). kAuto: the largest tile that fits the device's shared memory for the row count.
enum class PortableTile : int8_t {
  kAuto = -1,
  kRows16Tokens64 = 0,        // few rows (s_q * h_q <= 32) on >= 164 KB of shared memory (sm_90, sm_100)
  kRows64Tokens64 = 1,        // more rows on >= 226 KB (sm_90, sm_100)
  kRows64Tokens32 = 2,        // more rows on 164 KB (sm_80, sm_87)
  kRows16Tokens32Warps4 = 3,  // any rows on 100 KB (sm_86, sm_89, sm_120)
};
inline constexpr int kNumPortableTiles = 4;  // the tiles other than kAuto: 0 .. kNumPortableTiles - 1

// "auto", "rows16_tokens64", "rows64_tokens64", "rows64_tokens32", "rows16_tokens32_warps4".
const char* portable_tile_name(PortableTile tile) noexcept;
bool parse_portable_tile(const char* name, PortableTile* out) noexcept;

struct DecodeOverrides {
  // The backend used when DecodeOptions::backend is kAuto (a backend named in the options wins). kAuto:
  // sm90 on compute capability 9.0, portable elsewhere. Environment: OPENMLA_BACKEND=auto|portable|sm90.
  Backend backend = Backend::kAuto;
  // The portable kernel's tile (ignored by the sm90 backend). A tile that needs more shared memory than
  // the device has is kUnsupported. Environment: OPENMLA_PORTABLE_TILE=<portable_tile_name>.
  PortableTile portable_tile = PortableTile::kAuto;
  // The sm90 kernel, by query rows per CTA (ignored by the portable backend): 16 or 32, the narrow kernel
  // (s_q * h_q <= that; FP8 caches: ds_mla with a bf16 query); 64, the wide kernel (or, with
  // DecodeOptions::fp8_math, the FP8-math kernel); 0, chosen from the cache format, the rows and the batch
  // (kernels/sm90/decode/launch_config.h). A kernel that cannot run the shape is kInvalidArgument; a value
  // other than 0, 16, 32 or 64 is kInvalidArgument on any backend.
  int sm90_rows_per_cta = 0;
};

// The overrides the environment asks for: OPENMLA_BACKEND and OPENMLA_PORTABLE_TILE (unset or empty: kAuto).
// Throws Error(kInvalidArgument) naming the variable for a value it does not know.
DecodeOverrides environment_overrides();

// A DecodePlan with exactly these overrides (the environment is not read).
DecodePlan make_decode_plan(const DecodeShape& shape, const DecodeOptions& options, const DecodeOverrides& overrides,
                            int device = -1);

}  // namespace openmla::testing
