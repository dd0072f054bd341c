#include "kernels/sm90/decode/narrow/instantiate.cuh"

namespace openmla::kernels::sm90 {
OPENMLA_INSTANTIATE_SM90_NARROW(__nv_bfloat16, kKv16Bit, 16, 1)
}
