#include "kernels/sm80/decode/launch_impl.cuh"
#include "kernels/sm80/decode/tiles.h"

namespace openmla::kernels::portable {
OPENMLA_INSTANTIATE_PORTABLE(TileRows16Tokens64, __nv_bfloat16, kKv16Bit)
}  // namespace openmla::kernels::portable
