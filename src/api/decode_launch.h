// What DecodePlan chose at construction: its backend's launch configuration. run() and plan() only read it.
#pragma once

#include "kernels/common/schedule.h"
#include "kernels/portable/decode/launch_config.h"
#include "kernels/sm90/decode/launch_config.h"
#include "openmla/decode.h"

namespace openmla::detail {

struct DecodeLaunch {
  Backend backend = Backend::kPortable;
  kernels::portable::LaunchConfig portable;  // backend == kPortable
  kernels::sm90::LaunchConfig sm90;          // backend == kSm90

  const kernels::SplitTuning& split() const noexcept {
    return backend == Backend::kSm90 ? sm90.split : portable.split;
  }
};

}  // namespace openmla::detail
