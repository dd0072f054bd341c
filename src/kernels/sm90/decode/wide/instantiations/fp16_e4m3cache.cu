#include "kernels/sm90/decode/wide/instantiate.cuh"

namespace openmla::kernels::sm90 {
OPENMLA_INSTANTIATE_SM90_WIDE(__half, kKvE4M3)
}
