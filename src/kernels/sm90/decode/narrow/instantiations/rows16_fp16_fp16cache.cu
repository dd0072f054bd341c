#include "kernels/sm90/decode/narrow/instantiate.cuh"

namespace openmla::kernels::sm90 {
OPENMLA_INSTANTIATE_SM90_NARROW(__half, kKv16Bit, 16, 1)
}
