// KV-cache capacity: how many tokens fit a memory budget in each format, for a model of L layers
// (one 576-value KV row per token per layer, as in MLA). Pure host code.
#pragma once

#include <cstdint>
#include <cstdio>
#include <vector>

#include "openmla/kv_format.h"

namespace openmla::bench {

struct CapacityRow {
  KVFormat format;
  int bytes_per_token;     // per layer (kv_bytes_per_token)
  int64_t tokens;          // floor(budget / (bytes_per_token * layers))
  int64_t pages;           // tokens / 64 (whole pages)
  double relative_to_bf16; // tokens / tokens in bf16
};

// budget_bytes > 0, layers >= 1; throws Error(kInvalidArgument) otherwise.
std::vector<CapacityRow> kv_capacity(double budget_bytes, int layers);

void print_capacity(std::FILE* out, double budget_gb, int layers);

}  // namespace openmla::bench
