#include "kernels/sm90/decode/narrow/instantiate.cuh"

namespace openmla::kernels::sm90 {
OPENMLA_INSTANTIATE_SM90_NARROW(__half, kKvE4M3, 32, 2)
}
