// The FlashMLA peer's host-side facts (shapes it runs, its split count, its workspace), in every build: the
// options are checked the same way whether or not the peer is compiled in.
#include "flashmla.h"

#include <algorithm>

#include "core/check.h"

namespace openmla::bench::flashmla {
namespace {

constexpr int kRowsPerTile = 64;      // query rows (token x head) of one split-KV CTA
constexpr size_t kBufferAlign = 256;  // each piece of the workspace starts on this boundary

size_t align_up(size_t bytes) { return (bytes + kBufferAlign - 1) / kBufferAlign * kBufferAlign; }

}  // namespace

std::string shape_unsupported(const Shape& shape) {
  if (!kv_format_is_16bit(shape.kv_format))
    return detail::concat("FlashMLA's dense decode takes bf16 or fp16 caches, not ", kv_format_name(shape.kv_format));
  if (shape.batch_size < 1 || shape.q_len < 1 || shape.num_heads < 1 || shape.num_heads > kMaxHeads)
    return detail::concat("FlashMLA's dense decode takes b >= 1, s_q >= 1 and h_q 1..", kMaxHeads, ", not b=",
                          shape.batch_size, " s_q=", shape.q_len, " h_q=", shape.num_heads);
  return "";
}

std::string device_unsupported(int major, int minor, int num_sms) {
  if (major != 9 || minor != 0)
    return detail::concat("FlashMLA's decode kernels are sm_90a code: they need a compute capability 9.0 GPU, not ",
                          major, ".", minor);
  if (num_sms > kMaxSplits)
    return detail::concat("FlashMLA's combine takes at most ", kMaxSplits, " splits per request; the GPU has ",
                          num_sms, " SMs");
  return "";
}

Decode::Decode(const Shape& shape, int num_sms) : shape_(shape) {
  if (!built()) detail::fail(Status::kUnsupported, "openmla-bench was built without FlashMLA (OPENMLA_BENCH_FLASHMLA_DIR)");
  if (const std::string why = shape_unsupported(shape); !why.empty()) detail::fail(Status::kUnsupported, why);
  const int rows = shape.q_len * shape.num_heads;  // query rows per request: token-major, head-minor
  num_sm_parts_ = std::max(num_sms / ((rows + kRowsPerTile - 1) / kRowsPerTile), 1);
  // FlashMLA's split buffers: b + num_sm_parts splits at most (each part splits at most one request it shares).
  const size_t splits = static_cast<size_t>(shape.batch_size) + num_sm_parts_;
  meta_offset_ = 0;
  splits_offset_ = meta_offset_ + align_up(num_sm_parts_ * kSchedMetaBytes);
  lse_accum_offset_ = splits_offset_ + align_up((shape.batch_size + 1) * sizeof(int32_t));
  out_accum_offset_ = lse_accum_offset_ + align_up(splits * rows * sizeof(float));
  workspace_bytes_ = out_accum_offset_ + align_up(splits * rows * kHeadDimV * sizeof(float));
}

int sparse_heads_for(int h_q) noexcept { return h_q <= 64 ? 64 : 128; }

std::string sparse_shape_unsupported(const SparseShape& shape) {
  if (shape.kv_format != KVFormat::kFP8DsMla)
    return detail::concat("FlashMLA's sparse decode takes fp8_ds_mla caches, not ", kv_format_name(shape.kv_format));
  if (shape.num_heads != 64 && shape.num_heads != 128)
    return detail::concat("FlashMLA's sm90 sparse decode takes h_q 64 or 128, not ", shape.num_heads);
  if (shape.batch_size < 1 || shape.q_len < 1)
    return detail::concat("FlashMLA's sparse decode takes b >= 1 and s_q >= 1, not b=", shape.batch_size,
                          " s_q=", shape.q_len);
  if (shape.topk < kSparseTopkBlock || shape.topk % kSparseTopkBlock != 0)
    return detail::concat("FlashMLA's sm90 sparse decode takes topk a multiple of ", kSparseTopkBlock, ", not ",
                          shape.topk);
  return "";
}

SparseDecode::SparseDecode(const SparseShape& shape, int num_sms) : shape_(shape) {
  if (!built()) detail::fail(Status::kUnsupported, "openmla-bench was built without FlashMLA (OPENMLA_BENCH_FLASHMLA_DIR)");
  if (const std::string why = sparse_shape_unsupported(shape); !why.empty()) detail::fail(Status::kUnsupported, why);
  num_sm_parts_ = std::max(num_sms / shape.q_len / (shape.num_heads / 64), 1);
  // As FlashMLA's entry allocates them: [b + num_sm_parts] splits of [s_q, h_q] rows.
  const size_t splits = static_cast<size_t>(shape.batch_size) + num_sm_parts_;
  const size_t rows = static_cast<size_t>(shape.q_len) * shape.num_heads;
  meta_offset_ = 0;
  splits_offset_ = meta_offset_ + align_up(num_sm_parts_ * kSchedMetaBytes);
  lse_accum_offset_ = splits_offset_ + align_up((shape.batch_size + 1) * sizeof(int32_t));
  out_accum_offset_ = lse_accum_offset_ + align_up(splits * rows * sizeof(float));
  workspace_bytes_ = out_accum_offset_ + align_up(splits * rows * kHeadDimV * sizeof(float));
}

}  // namespace openmla::bench::flashmla
