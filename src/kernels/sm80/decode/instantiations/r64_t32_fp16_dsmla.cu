#include "kernels/sm80/decode/launch_impl.cuh"
#include "kernels/sm80/decode/tiles.h"

namespace openmla::kernels::portable {
OPENMLA_INSTANTIATE_PORTABLE(TileRows64Tokens32, __half, kKvDsMla)
}  // namespace openmla::kernels::portable
