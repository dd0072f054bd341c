#include "kernels/portable/decode/instantiate.cuh"
#include "kernels/portable/decode/tiles.h"

namespace openmla::kernels::portable {
OPENMLA_INSTANTIATE_PORTABLE(TileRows64Tokens32, __half, kKvDsMla)
}  // namespace openmla::kernels::portable
