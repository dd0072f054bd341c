// Device-side random inputs for openmla-bench: N(0, 1) values generated where they are used, so
// that hundreds of megabytes of input sets cost no host time or PCIe traffic.
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

#include "openmla/tensor.h"

namespace openmla::bench {

// count values of dtype (bf16, fp16 or float32) from N(0, 1), a pure function of (seed, index).
void fill_normal(void* dst, DType dtype, int64_t count, uint64_t seed, cudaStream_t stream);

}  // namespace openmla::bench
