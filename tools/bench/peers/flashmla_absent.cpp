// openmla-bench built without the FlashMLA peer (no OPENMLA_BENCH_FLASHMLA_DIR): --peer flashmla is refused at
// start, so these are never reached through it.
#include "flashmla.h"

#include "core/check.h"

namespace openmla::bench::flashmla {

bool built() noexcept { return false; }

void Decode::plan(const int32_t*, void*, cudaStream_t) const {
  detail::fail(Status::kUnsupported, "openmla-bench was built without FlashMLA (OPENMLA_BENCH_FLASHMLA_DIR)");
}

void Decode::run(const Args&, void*, cudaStream_t) const {
  detail::fail(Status::kUnsupported, "openmla-bench was built without FlashMLA (OPENMLA_BENCH_FLASHMLA_DIR)");
}

void SparseDecode::plan(void*, cudaStream_t) const {
  detail::fail(Status::kUnsupported, "openmla-bench was built without FlashMLA (OPENMLA_BENCH_FLASHMLA_DIR)");
}

void SparseDecode::run(const SparseArgs&, void*, cudaStream_t) const {
  detail::fail(Status::kUnsupported, "openmla-bench was built without FlashMLA (OPENMLA_BENCH_FLASHMLA_DIR)");
}

}  // namespace openmla::bench::flashmla
