#include "kernels/portable/decode/instantiate.cuh"
#include "kernels/portable/decode/tiles.h"

namespace openmla::kernels::portable {
OPENMLA_INSTANTIATE_PORTABLE(TileRows64Tokens32, __half, kKv16Bit)
}  // namespace openmla::kernels::portable
