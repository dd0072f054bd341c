#include "kernels/portable/decode/instantiate.cuh"
#include "kernels/portable/decode/tiles.h"

namespace openmla::kernels::portable {
OPENMLA_INSTANTIATE_PORTABLE(TileRows16Tokens32Warps4, __nv_bfloat16, kKvDsMla)
}  // namespace openmla::kernels::portable
