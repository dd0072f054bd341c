#include "capacity.h"

#include <cmath>

#include "core/check.h"

namespace openmla::bench {

std::vector<CapacityRow> kv_capacity(double budget_bytes, int layers) {
  if (!(budget_bytes > 0.0) || !std::isfinite(budget_bytes)) {
    detail::fail_arg("--capacity", "a memory budget > 0 GB", budget_bytes / 1e9);
  }
  if (layers < 1) detail::fail_arg("--layers", ">= 1", layers);
  std::vector<CapacityRow> rows;
  const double bf16_tokens = std::floor(budget_bytes / (kv_bytes_per_token(KVFormat::kBF16) * double(layers)));
  for (KVFormat f : {KVFormat::kBF16, KVFormat::kFP16, KVFormat::kFP8E4M3, KVFormat::kFP8DsMla}) {
    CapacityRow r{f, kv_bytes_per_token(f), 0, 0, 0.0};
    r.tokens = static_cast<int64_t>(std::floor(budget_bytes / (double(r.bytes_per_token) * layers)));
    r.pages = r.tokens / kPageSize;
    r.relative_to_bf16 = bf16_tokens > 0 ? r.tokens / bf16_tokens : 0.0;
    rows.push_back(r);
  }
  return rows;
}

void print_capacity(std::FILE* out, double budget_gb, int layers) {
  const std::vector<CapacityRow> rows = kv_capacity(budget_gb * 1e9, layers);
  std::fprintf(out, "KV-cache capacity of %.3g GB (10^9 bytes) for %d layers:\n", budget_gb, layers);
  std::fprintf(out, "  %-11s %15s %15s %13s %8s\n", "format", "bytes/token/L", "tokens", "pages (64)",
               "vs bf16");
  for (const CapacityRow& r : rows) {
    std::fprintf(out, "  %-11s %15d %15lld %13lld %7.2fx\n", kv_format_name(r.format), r.bytes_per_token,
                 static_cast<long long>(r.tokens), static_cast<long long>(r.pages), r.relative_to_bf16);
  }
}

}  // namespace openmla::bench
