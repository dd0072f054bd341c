// The tile configurations instantiated (launch_config.h chooses among them; testing::PortableTile names them).
#pragma once

#include "kernels/portable/decode/config.h"

namespace openmla::kernels::portable {

using TileRows16Tokens64 = TileConfig<16, 64, 8>;
using TileRows64Tokens64 = TileConfig<64, 64, 8>;
using TileRows64Tokens32 = TileConfig<64, 32, 8>;
using TileRows16Tokens32Warps4 = TileConfig<16, 32, 4>;

}  // namespace openmla::kernels::portable
