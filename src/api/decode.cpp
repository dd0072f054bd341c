// DecodePlan: host-side validation and dispatch. Device facts are read and the backend's launch configuration
// chosen once, at construction; plan() and run() only validate views and launch kernels (no sync, no
// allocation, no choice made again).
#include "openmla/decode.h"

#include <cuda_runtime_api.h>

#include <memory>
#include <string>

#include "api/decode_launch.h"
#include "api/plan_device.h"
#include "core/check.h"
#include "core/device_scope.h"
#include "core/validate.h"
#include "kernels/common/combine.h"
#include "kernels/common/device_facts.h"
#include "kernels/common/plan_kernel.h"
#include "kernels/common/fp8_query_launch.h"
#include "kernels/common/workspace.h"
#include "kernels/portable/decode/launch.h"
#include "openmla/testing.h"
#if defined(OPENMLA_HAS_SM90)
#include "kernels/sm90/decode/launch.h"
#endif

namespace openmla {
namespace {

#if defined(OPENMLA_HAS_SM90)
constexpr bool kBuiltWithSm90 = true;
#else
constexpr bool kBuiltWithSm90 = false;
#endif

// Shapes the sm90 kernels take: uniform queries of up to 16 tokens, causal or not, no tree mask. The portable
// kernel runs every shape (its general-query variant: ragged queries, tree masks; up to 128 tokens).
constexpr int kSm90MaxQueryLen = 16;
bool sm90_takes(const DecodeShape& shape) {
  return shape.query_layout == QueryLayout::kUniform && shape.tree_mask == TreeMask::kNone &&
         shape.q_len <= kSm90MaxQueryLen && kernels::row_layout_heads(shape.num_heads) == shape.num_heads;
}

// kAuto: the sm90a kernels on compute capability 9.0 for the shapes they take (sm90_takes), the portable kernel
// elsewhere. A forced backend that cannot run is an error, never a silent fallback, so a test that asks for
// a kernel cannot pass on another one.
Backend resolve_backend(Backend requested, const DecodeShape& shape, const kernels::DeviceFacts& device) {
  const bool hopper = device.cc_major == 9 && device.cc_minor == 0;
  if (requested == Backend::kSm90) {
    if (!sm90_takes(shape))
      detail::fail(Status::kUnsupported, "backend: sm90 takes uniform queries of up to ", kSm90MaxQueryLen,
                   " tokens with 8, 16, 32, 64 or 128 heads and no tree mask, got ",
                   query_layout_name(shape.query_layout), " queries, q_len ", shape.q_len, ", ", shape.num_heads,
                   " heads, tree mask ", tree_mask_name(shape.tree_mask), "; use portable (or auto)");
    if (!kBuiltWithSm90)
      detail::fail(Status::kUnsupported, "backend: sm90 was not built (OPENMLA_ENABLE_SM90=OFF); use portable");
    if (!hopper)
      detail::fail(Status::kUnsupported, "backend: sm90 needs compute capability 9.0, device ", device.name, " has ",
                   device.cc_major, ".", device.cc_minor, "; use portable");
    return Backend::kSm90;
  }
  if (requested == Backend::kAuto && kBuiltWithSm90 && hopper && sm90_takes(shape)) return Backend::kSm90;
  return Backend::kPortable;
}

bool is_bf16(DType t) { return t == DType::kBFloat16; }

// The shape as the decode kernels see it: an e4m3 query reaches them widened to bf16 (fp8_query.cu).
DecodeShape kernel_shape(const DecodeShape& shape) {
  DecodeShape k = shape;
  if (k.q_dtype == DType::kFloat8E4M3) k.q_dtype = DType::kBFloat16;
  return k;
}

// Elements of the widened e4m3 query in the workspace: every query row a plan can be given, b * q_len tokens.
size_t widened_query_elems(const DecodeShape& shape) {
  if (shape.q_dtype != DType::kFloat8E4M3) return 0;
  return static_cast<size_t>(shape.batch_size) * shape.q_len * shape.num_heads * kHeadDimQK;
}

void validate_overrides(const testing::DecodeOverrides& o) {
  if (o.backend != Backend::kAuto && o.backend != Backend::kPortable && o.backend != Backend::kSm90)
    detail::fail_arg("overrides.backend", "kAuto, kPortable or kSm90", static_cast<int>(o.backend));
  const int tile = static_cast<int>(o.portable_tile);
  if (tile < -1 || tile >= testing::kNumPortableTiles)
    detail::fail_arg("overrides.portable_tile", std::string("kAuto or a tile (0 .. ") +
                                                    std::to_string(testing::kNumPortableTiles - 1) + ")",
                     tile);
  if (o.sm90_rows_per_cta != 0 && o.sm90_rows_per_cta != 16 && o.sm90_rows_per_cta != 32 &&
      o.sm90_rows_per_cta != 64)
    detail::fail_arg("overrides.sm90_rows_per_cta", "0 (automatic), 16, 32 or 64", o.sm90_rows_per_cta);
}

}  // namespace

DecodePlan::DecodePlan(const DecodeShape& shape, const DecodeOptions& options, int device)
    : DecodePlan(shape, options, testing::environment_overrides(), device) {}

DecodePlan::DecodePlan(const DecodeShape& shape, const DecodeOptions& options,
                       const testing::DecodeOverrides& overrides, int device)
    : shape_(shape) {
  detail::validate_decode_shape(shape);
  const DecodeShape kshape = kernel_shape(shape);
  // A 16-bit cache is read in the query's type; FP8 caches are dequantized to it.
  if (kv_format_is_16bit(shape.kv_format) && (shape.kv_format == KVFormat::kBF16) != is_bf16(shape.q_dtype)) {
    detail::fail_arg("shape.q_dtype", std::string("the KV cache's type (") + kv_format_name(shape.kv_format) + ")",
                     dtype_name(shape.q_dtype));
  }
  if (options.num_parts < 0) detail::fail_arg("options.num_parts", ">= 0 (0 = automatic)", options.num_parts);
  if (options.fp8_math != Fp8Math::kOff && options.fp8_math != Fp8Math::kQkAndPv)
    detail::fail_arg("options.fp8_math", "kOff or kQkAndPv", static_cast<int>(options.fp8_math));
  if (options.fp8_math != Fp8Math::kOff && shape.kv_format != KVFormat::kFP8E4M3)
    detail::fail_arg("options.fp8_math", std::string("kOff for a ") + kv_format_name(shape.kv_format) +
                                             " cache (FP8 math reads per-tensor fp8_e4m3 caches only)",
                     fp8_math_name(options.fp8_math));
  if (options.fp8_math != Fp8Math::kOff && shape.device_scales)
    detail::fail(Status::kUnsupported, "options.fp8_math: ", fp8_math_name(options.fp8_math),
                 " takes host-held scales (KVCache::scale); with shape.device_scales use kOff");
  validate_overrides(overrides);
  fp8_math_ = options.fp8_math;

  const detail::PlanDevice dev = detail::plan_device(device);
  device = dev.index;
  device_ = device;
  const cudaDeviceProp& prop = dev.prop;
  const kernels::DeviceFacts facts = dev.facts();

  backend_ = resolve_backend(options.backend != Backend::kAuto ? options.backend : overrides.backend, kshape, facts);
  if (fp8_math_ != Fp8Math::kOff && backend_ != Backend::kSm90)
    detail::fail(Status::kUnsupported, "options.fp8_math: ", fp8_math_name(fp8_math_),
                 " runs on the sm90 backend only; the resolved backend is ", backend_name(backend_), " (", prop.name,
                 ")");
  programmatic_launch_ = prop.major >= 9;  // griddepcontrol exists from sm_90 on

  auto launch = std::make_shared<detail::DecodeLaunch>();
  launch->backend = backend_;
  rows_ = shape.q_len * kernels::row_layout_heads(shape.num_heads);
  const int rows = rows_;
  int ctas_per_sm = 1;
  int rows_per_cta = 1;
  detail::DeviceScope scope(device);
  if (backend_ == Backend::kSm90) {
#if defined(OPENMLA_HAS_SM90)
    launch->sm90 = kernels::sm90::choose_launch(kshape, options, facts, overrides);
    OPENMLA_CUDA_CHECK(kernels::sm90::prepare_decode(launch->sm90));
    rows_per_cta = launch->sm90.schedule.rows_per_cta;
    ctas_per_sm = launch->sm90.schedule.ctas_per_sm;
#endif
  } else {
    launch->portable = kernels::portable::choose_launch(kshape, facts, overrides);
    OPENMLA_CUDA_CHECK(kernels::portable::prepare_decode(launch->portable, &ctas_per_sm));
    if (ctas_per_sm < 1)
      detail::fail(Status::kUnsupported, "device: the portable decode kernel (",
                   testing::portable_tile_name(launch->portable.tile), ") cannot be resident on ", prop.name);
    rows_per_cta = launch->portable.rows_per_cta;
  }
  const int m_tiles = (rows + rows_per_cta - 1) / rows_per_cta;
  num_parts_ = options.num_parts > 0 ? options.num_parts : kernels::choose_num_parts(facts.sm_count, ctas_per_sm, m_tiles);
  workspace_bytes_ =
      kernels::carve_decode_workspace(nullptr, shape.batch_size, rows, num_parts_, widened_query_elems(shape)).bytes;
  launch_ = std::move(launch);
}

void DecodePlan::plan(const TensorView& cache_seqlens, void* workspace, size_t workspace_bytes,
                      cudaStream_t stream) const {
  detail::validate_seqlens(cache_seqlens, shape_.batch_size, DeviceType::kCUDA, device_);
  detail::validate_workspace(workspace, workspace_bytes, workspace_bytes_);
  const auto ws = kernels::carve_decode_workspace(workspace, shape_.batch_size, rows_, num_parts_,
                                                 widened_query_elems(shape_));
  OPENMLA_CUDA_CHECK(kernels::launch_plan(static_cast<const int*>(cache_seqlens.data), shape_.batch_size,
                                          num_parts_, launch_->split(), static_cast<kernels::SplitPart*>(ws.parts),
                                          static_cast<kernels::RequestSplit*>(ws.request_splits), stream));
}

void DecodePlan::run(const DecodeArgs& args, void* workspace, size_t workspace_bytes, cudaStream_t stream) const {
  detail::validate_decode_args(args, shape_, DeviceType::kCUDA, device_);
  detail::validate_workspace(workspace, workspace_bytes, workspace_bytes_);
  const int rows = rows_;
  const auto ws =
      kernels::carve_decode_workspace(workspace, shape_.batch_size, rows, num_parts_, widened_query_elems(shape_));

  kernels::DecodeParams p{};
  p.batch = shape_.batch_size;
  p.q_len = shape_.q_len;
  p.num_heads = kernels::row_layout_heads(shape_.num_heads);
  p.heads = shape_.num_heads;
  p.rows = rows;
  p.causal = shape_.causal && shape_.q_len > 1;
  // Per-tensor FP8: the kernel works on the raw e4m3 values; the cache scale multiplies every
  // score (folded into the softmax scale) and every output (out_scale). Exact for any scale.
  // Device-held scales are read by the kernels instead (kv_descale, q_descale below).
  const double kv_scale = shape_.kv_format == KVFormat::kFP8E4M3 && !shape_.device_scales
                              ? static_cast<double>(args.kv.scale)
                              : 1.0;
  p.softmax_scale = static_cast<float>(static_cast<double>(args.softmax_scale) * kv_scale);
  p.scale_log2 = static_cast<float>(static_cast<double>(args.softmax_scale) * kv_scale * 1.4426950408889634);
  p.out_scale = static_cast<float>(kv_scale);
  // Ragged: [total_q, h_q, ...] tensors; the b-strides are the token strides (DecodeParams::q_indptr).
  const bool ragged = shape_.query_layout == QueryLayout::kRagged;
  const int token_dim = ragged ? 0 : 1;
  p.q = args.q.data;
  p.q_stride_b = args.q.strides[0];
  p.q_stride_s = args.q.strides[token_dim];
  p.q_stride_h = args.q.strides[token_dim + 1];
  const TensorView& kv = args.kv.data;
  p.kv = static_cast<const uint8_t*>(kv.data);
  p.page_stride_bytes = kv.strides[0] * dtype_size(kv.dtype);
  p.num_pages = static_cast<int>(kv.shape[0]);
  p.block_table = static_cast<const int*>(args.block_table.data);
  p.block_table_stride = args.block_table.strides[0];
  p.max_pages = static_cast<int>(args.block_table.shape[1]);
  p.seqlens = static_cast<const int*>(args.cache_seqlens.data);
  p.out = args.out.data;
  p.o_stride_b = args.out.strides[0];
  p.o_stride_s = args.out.strides[token_dim];
  p.o_stride_h = args.out.strides[token_dim + 1];
  p.lse = static_cast<float*>(args.lse.data);
  p.lse_stride_b = args.lse.strides[0];
  p.lse_stride_s = args.lse.strides[token_dim];
  p.lse_stride_h = args.lse.strides[token_dim + 1];
  p.q_indptr = ragged ? static_cast<const int*>(args.q_indptr.data) : nullptr;
  p.total_q = ragged ? static_cast<int>(args.q.shape[0]) : 0;
  p.mask = static_cast<const uint64_t*>(args.mask.data);
  p.mask_kind = static_cast<int>(shape_.tree_mask);
  p.parts = static_cast<const kernels::SplitPart*>(ws.parts);
  p.splits = static_cast<const kernels::RequestSplit*>(ws.request_splits);
  p.num_parts = num_parts_;
  p.o_partial = ws.o_partial;
  p.o_partial_scale = ws.o_partial_scale;
  p.lse_partial = ws.lse_partial;
  p.error_word = ws.error_word;
  p.kv_descale = shape_.device_scales ? static_cast<const float*>(args.kv.device_scale.data) : nullptr;
  p.q_descale = args.q_scale.defined() ? static_cast<const float*>(args.q_scale.data) : nullptr;
  if (shape_.q_dtype == DType::kFloat8E4M3) {
    // The kernels read the codes widened to bf16: dense [tokens, h_q, 576] in the workspace.
    kernels::WidenFp8QueryParams wq{};
    wq.q = static_cast<const uint8_t*>(args.q.data);
    wq.num_tokens = ragged ? args.q.shape[0] : static_cast<int64_t>(shape_.batch_size) * shape_.q_len;
    wq.tokens_per_request = ragged ? 1 : shape_.q_len;
    wq.heads = shape_.num_heads;
    wq.stride_request = args.q.strides[0];
    wq.stride_token = args.q.strides[token_dim];
    wq.stride_head = args.q.strides[token_dim + 1];
    wq.out = static_cast<uint16_t*>(ws.widened_query);
    kernels::launch_widen_fp8_query(wq, stream);
    const int64_t row = static_cast<int64_t>(shape_.num_heads) * kHeadDimQK;
    p.q = ws.widened_query;
    p.q_stride_b = ragged ? row : row * shape_.q_len;
    p.q_stride_s = row;
    p.q_stride_h = kHeadDimQK;
  }

  // The partial rows' format: the stored configuration's, for this call's block-table width. Both the decode
  // kernel and the combine read it from p.
  if (backend_ == Backend::kSm90) {
#if defined(OPENMLA_HAS_SM90)
    p.fp16_partials = kernels::sm90::fp16_partials(launch_->sm90, p.batch, p.num_parts, p.max_pages);
    OPENMLA_CUDA_CHECK(kernels::sm90::launch_decode(p, launch_->sm90, programmatic_launch_, stream));
#endif
  } else {
    p.fp16_partials = kernels::portable::fp16_partials(launch_->portable);
    OPENMLA_CUDA_CHECK(kernels::portable::launch_decode(p, launch_->portable, programmatic_launch_, stream));
  }
  if (kernels::max_partials(shape_.batch_size, num_parts_) > 0) {
    OPENMLA_CUDA_CHECK(kernels::launch_combine(p, is_bf16(kernel_shape(shape_).q_dtype), programmatic_launch_, stream));
  }
}

unsigned* DecodePlan::device_error_word(void* workspace) noexcept {
  return kernels::carve_decode_workspace(workspace, 1, 1, 1).error_word;  // always at offset 0
}

void DecodePlan::reset_device_errors(void* workspace, cudaStream_t stream) {
  if (workspace == nullptr) detail::fail_arg("workspace", "a device pointer", "null");
  OPENMLA_CUDA_CHECK(cudaMemsetAsync(device_error_word(workspace), 0, sizeof(unsigned), stream));
}

unsigned DecodePlan::read_device_errors(const void* workspace, cudaStream_t stream) {
  if (workspace == nullptr) detail::fail_arg("workspace", "a device pointer", "null");
  unsigned word = 0;
  OPENMLA_CUDA_CHECK(cudaMemcpyAsync(&word, device_error_word(const_cast<void*>(workspace)), sizeof(unsigned),
                                     cudaMemcpyDeviceToHost, stream));
  OPENMLA_CUDA_CHECK(cudaStreamSynchronize(stream));
  return word;
}

namespace testing {

DecodePlan make_decode_plan(const DecodeShape& shape, const DecodeOptions& options, const DecodeOverrides& overrides,
                            int device) {
  return DecodePlan(shape, options, overrides, device);
}

}  // namespace testing
}  // namespace openmla
