#include "kernels/portable/decode/instantiate.cuh"
#include "kernels/portable/decode/tiles.h"

namespace openmla::kernels::portable {
OPENMLA_INSTANTIATE_PORTABLE(TileRows64Tokens32, __half, kKvE4M3)
}  // namespace openmla::kernels::portable
