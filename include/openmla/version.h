#pragma once

#define OPENMLA_VERSION_MAJOR 0
#define OPENMLA_VERSION_MINOR 1
#define OPENMLA_VERSION_PATCH 0

namespace openmla {
inline constexpr const char* kVersion = "0.1.0";
}  // namespace openmla
