#include "kernels/sm90/decode/fp8_math/instantiate.cuh"

namespace openmla::kernels::sm90 {
OPENMLA_INSTANTIATE_SM90_FP8_MATH(__nv_bfloat16)
}
