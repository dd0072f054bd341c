#include "kernels/portable/decode/instantiate.cuh"
#include "kernels/portable/decode/tiles.h"

namespace openmla::kernels::portable {
OPENMLA_INSTANTIATE_PORTABLE(TileRows16Tokens32Warps4, __half, kKv16Bit)
}  // namespace openmla::kernels::portable
