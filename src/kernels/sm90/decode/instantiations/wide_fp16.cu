#include "kernels/sm90/decode/launch_impl.cuh"

namespace openmla::kernels::sm90 {
OPENMLA_INSTANTIATE_SM90_DECODE(__half, false)
}
