#include "kernels/sm90/decode/launch_impl.cuh"

namespace openmla::kernels::sm90 {
OPENMLA_INSTANTIATE_SM90_WIDE(__half, kKv16Bit)
}
