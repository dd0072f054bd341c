// openmla-bench on a machine without a CUDA GPU: the CPU reference on a small case, every format.
#pragma once

#include <cstdint>
#include <cstdio>
#include <vector>

#include "bench_config.h"

namespace openmla::bench {

// b = 2, s_q = 2 (causal), h_q = 16, s_k = 300: prints each format's time and an output checksum. When the
// selected configurations include ragged or tree-masked ones (the spec grid), also runs each distinct query form
// of the selection on that small case (bf16), so that its q_indptr and mask inputs pass the reference's checks; with
// sparse configurations (the sparse grid), reference::sparse_decode on it too, every format (topk 128 of 300).
// Returns the process exit code (0, or 1 when the reference fails).
int run_cpu_reference_demo(std::FILE* out, uint64_t seed, const std::vector<BenchConfig>& configs);

}  // namespace openmla::bench
