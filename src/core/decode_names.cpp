// Names of the decode options' enums, and the testing surface's environment overrides (openmla/testing.h):
// host-only, so that the CPU tests can check them.
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/check.h"
#include "openmla/decode.h"
#include "openmla/testing.h"

namespace openmla {

const char* backend_name(Backend b) noexcept {
  switch (b) {
    case Backend::kAuto: return "auto";
    case Backend::kPortable: return "portable";
    case Backend::kSm90: return "sm90";
  }
  return "unknown";
}

const char* fp8_math_name(Fp8Math m) noexcept {
  switch (m) {
    case Fp8Math::kOff: return "off";
    case Fp8Math::kQkAndPv: return "qk_and_pv";
  }
  return "unknown";
}

const char* query_layout_name(QueryLayout l) noexcept {
  switch (l) {
    case QueryLayout::kUniform: return "uniform";
    case QueryLayout::kRagged: return "ragged";
  }
  return "unknown";
}

const char* tree_mask_name(TreeMask m) noexcept {
  switch (m) {
    case TreeMask::kNone: return "none";
    case TreeMask::kShared: return "shared";
    case TreeMask::kPerRequest: return "per_request";
    case TreeMask::kPacked: return "packed";
  }
  return "unknown";
}

namespace testing {

const char* portable_tile_name(PortableTile tile) noexcept {
  switch (tile) {
    case PortableTile::kAuto: return "auto";
    case PortableTile::kRows16Tokens64: return "rows16_tokens64";
    case PortableTile::kRows64Tokens64: return "rows64_tokens64";
    case PortableTile::kRows64Tokens32: return "rows64_tokens32";
    case PortableTile::kRows16Tokens32Warps4: return "rows16_tokens32_warps4";
  }
  return "unknown";
}

bool parse_portable_tile(const char* name, PortableTile* out) noexcept {
  if (name == nullptr) return false;
  for (int t = -1; t < kNumPortableTiles; ++t) {
    const auto tile = static_cast<PortableTile>(t);
    if (std::strcmp(name, portable_tile_name(tile)) == 0) {
      *out = tile;
      return true;
    }
  }
  return false;
}

DecodeOverrides environment_overrides() {
  DecodeOverrides o;
  if (const char* env = std::getenv("OPENMLA_BACKEND"); env != nullptr && *env != '\0') {
    if (std::strcmp(env, "auto") == 0) {
      o.backend = Backend::kAuto;
    } else if (std::strcmp(env, "portable") == 0) {
      o.backend = Backend::kPortable;
    } else if (std::strcmp(env, "sm90") == 0) {
      o.backend = Backend::kSm90;
    } else {
      detail::fail_arg("OPENMLA_BACKEND", "one of auto, portable, sm90", std::string("'") + env + "'");
    }
  }
  if (const char* env = std::getenv("OPENMLA_PORTABLE_TILE"); env != nullptr && *env != '\0') {
    if (!parse_portable_tile(env, &o.portable_tile))
      detail::fail_arg("OPENMLA_PORTABLE_TILE", "a portable tile name (e.g. rows64_tokens64) or auto",
                       std::string("'") + env + "'");
  }
  return o;
}

}  // namespace testing
}  // namespace openmla
