// Device-side random inputs for openmla-bench: N(0, 1) values generated where they are used, so
// that hundreds of megabytes of input sets cost no host time or PCIe traffic.
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

#include "openmla/tensor.h"

namespace openmla::bench {

// count values of dtype (bf16, fp16 or float32) from N(0, 1), a pure function of (seed, index).
void fill_normal(void* dst, DType dtype, int64_t count, uint64_t seed, cudaStream_t stream);

// dst[i] = src row rows[i], for i < count, rows of row_bytes bytes (device memory): the few cache tokens a check
// reads, without copying their pages one by one.
void gather_rows(void* dst, const void* src, int64_t row_bytes, const int32_t* rows, int64_t count,
                 cudaStream_t stream);

}  // namespace openmla::bench
