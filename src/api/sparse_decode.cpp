// SparseDecodePlan: sparse top-k decode on the portable kernel's sparse-key variant. The call's query tokens are
// the kernel's requests (one query token each, its h_q heads the rows), whose keys are gathered row by row from
// their index lists; the split-KV schedule, the guards, the partial rows and the combine are the dense decode's.
#include "openmla/sparse_decode.h"

#include <cuda_runtime_api.h>

#include <memory>
#include <string>

#include "api/plan_device.h"
#include "core/check.h"
#include "core/device_scope.h"
#include "core/validate.h"
#include "kernels/common/combine.h"
#include "kernels/common/device_facts.h"
#include "kernels/common/plan_kernel.h"
#include "kernels/common/sparse_lengths.h"
#include "kernels/common/workspace.h"
#include "kernels/portable/decode/config.h"
#include "kernels/portable/decode/launch.h"

namespace openmla {
namespace detail {

struct SparseDecodeLaunch {
  kernels::portable::LaunchConfig portable;
};

}  // namespace detail

namespace {

// The dense shape the kernel runs: one query token per request, the call's b * s_q tokens as requests.
DecodeShape kernel_shape(const SparseDecodeShape& s) {
  DecodeShape d;
  d.batch_size = s.batch_size * s.q_len;
  d.q_len = 1;
  d.num_heads = s.num_heads;
  d.q_dtype = s.q_dtype;
  d.kv_format = s.kv_format;
  d.causal = false;
  return d;
}

int requests(const SparseDecodeShape& s) { return s.batch_size * s.q_len; }

}  // namespace

SparseDecodePlan::SparseDecodePlan(const SparseDecodeShape& shape, const DecodeOptions& options, int device)
    : shape_(shape) {
  detail::validate_sparse_decode_shape(shape);
  if (options.num_parts < 0) detail::fail_arg("options.num_parts", ">= 0 (0 = automatic)", options.num_parts);
  if (options.fp8_math != Fp8Math::kOff)
    detail::fail(Status::kUnsupported, "options.fp8_math: sparse decode multiplies in 16-bit arithmetic; use kOff");
  if (options.backend == Backend::kSm90)
    detail::fail(Status::kUnsupported, "backend: sparse decode runs on the portable kernel; use portable (or auto)");
  if (options.backend != Backend::kAuto && options.backend != Backend::kPortable)
    detail::fail_arg("options.backend", "kAuto, kPortable or kSm90", static_cast<int>(options.backend));

  const detail::PlanDevice dev = detail::plan_device(device);
  device_ = dev.index;
  const cudaDeviceProp& prop = dev.prop;
  kernels::DeviceFacts facts = dev.facts();
  // The sparse variant adds its row table (static shared memory) to the tile's dynamic share: choose among tiles
  // that leave room for it (on Hopper the bf16 64x64 tile does not).
  facts.max_smem_per_block -= kernels::portable::kSparseRowsMaxBytes;
  backend_ = Backend::kPortable;
  programmatic_launch_ = prop.major >= 9;

  auto launch = std::make_shared<detail::SparseDecodeLaunch>();
  const DecodeShape kshape = kernel_shape(shape);
  detail::DeviceScope scope(device_);
  launch->portable = kernels::portable::choose_launch(kshape, facts, testing::environment_overrides());
  launch->portable.general_queries = true;
  launch->portable.sparse_keys = true;
  int ctas_per_sm = 1;
  OPENMLA_CUDA_CHECK(kernels::portable::prepare_decode(launch->portable, &ctas_per_sm));
  if (ctas_per_sm < 1)
    detail::fail(Status::kUnsupported, "device: the portable sparse decode kernel (",
                 testing::portable_tile_name(launch->portable.tile), ") cannot be resident on ", prop.name);
  const int rows = kernels::row_layout_heads(shape.num_heads);
  const int m_tiles = (rows + launch->portable.rows_per_cta - 1) / launch->portable.rows_per_cta;
  num_parts_ = options.num_parts > 0 ? options.num_parts : kernels::choose_num_parts(facts.sm_count, ctas_per_sm, m_tiles);
  workspace_bytes_ =
      kernels::carve_decode_workspace(nullptr, requests(shape), rows, num_parts_, 0, requests(shape)).bytes;
  launch_ = std::move(launch);
}

void SparseDecodePlan::plan(const TensorView& topk_length, const TensorView& extra_topk_length, void* workspace,
                            size_t workspace_bytes, cudaStream_t stream) const {
  detail::validate_sparse_lengths(topk_length, extra_topk_length, shape_, DeviceType::kCUDA, device_);
  detail::validate_workspace(workspace, workspace_bytes, workspace_bytes_);
  const int rows = kernels::row_layout_heads(shape_.num_heads);
  const auto ws = kernels::carve_decode_workspace(workspace, requests(shape_), rows, num_parts_, 0, requests(shape_));
  kernels::SparseLengthsParams lp{};
  lp.topk_length = static_cast<const int*>(topk_length.data);
  lp.extra_topk_length = static_cast<const int*>(extra_topk_length.data);
  lp.batch = shape_.batch_size;
  lp.q_len = shape_.q_len;
  lp.topk = shape_.topk;
  lp.extra_topk = shape_.extra_topk;
  lp.seqlens = ws.sparse_seqlens;
  lp.main_len = ws.sparse_main_len;
  kernels::launch_sparse_lengths(lp, stream);
  OPENMLA_CUDA_CHECK(kernels::launch_plan(ws.sparse_seqlens, requests(shape_), num_parts_, launch_->portable.split,
                                          static_cast<kernels::SplitPart*>(ws.parts),
                                          static_cast<kernels::RequestSplit*>(ws.request_splits), stream));
}

void SparseDecodePlan::run(const SparseDecodeArgs& args, void* workspace, size_t workspace_bytes,
                           cudaStream_t stream) const {
  detail::validate_sparse_decode_args(args, shape_, DeviceType::kCUDA, device_);
  detail::validate_workspace(workspace, workspace_bytes, workspace_bytes_);
  const int rows = kernels::row_layout_heads(shape_.num_heads);
  const auto ws = kernels::carve_decode_workspace(workspace, requests(shape_), rows, num_parts_, 0, requests(shape_));

  kernels::DecodeParams p{};
  p.batch = requests(shape_);
  p.q_len = 1;
  p.num_heads = rows;
  p.heads = shape_.num_heads;
  p.rows = rows;
  p.causal = false;
  const double kv_scale = shape_.kv_format == KVFormat::kFP8E4M3 && !args.kv.device_scale.defined()
                              ? static_cast<double>(args.kv.scale)
                              : 1.0;
  p.softmax_scale = static_cast<float>(static_cast<double>(args.softmax_scale) * kv_scale);
  p.scale_log2 = static_cast<float>(static_cast<double>(args.softmax_scale) * kv_scale * 1.4426950408889634);
  p.out_scale = static_cast<float>(kv_scale);
  p.kv_descale = args.kv.device_scale.defined() ? static_cast<const float*>(args.kv.device_scale.data) : nullptr;
  // The kernel's requests are query tokens: q's token stride (validated: stride(0) = s_q * stride(1)).
  p.q = args.q.data;
  p.q_stride_b = args.q.strides[1];
  p.q_stride_s = 0;
  p.q_stride_h = args.q.strides[2];
  const TensorView& kv = args.kv.data;
  p.kv = static_cast<const uint8_t*>(kv.data);
  p.page_stride_bytes = kv.strides[0] * dtype_size(kv.dtype);
  p.num_pages = static_cast<int>(kv.shape[0]);
  // No block table (no page id is read); max_pages bounds the keys in 64-key blocks, as the request check and the
  // combine's tile choice read it.
  p.block_table = nullptr;
  p.block_table_stride = 0;
  p.max_pages = (shape_.topk + shape_.extra_topk + 63) / 64;
  p.seqlens = ws.sparse_seqlens;
  p.out = args.out.data;
  p.o_stride_b = args.out.strides[0];
  p.o_stride_s = args.out.strides[1];
  p.o_stride_h = args.out.strides[2];
  p.lse = static_cast<float*>(args.lse.data);
  p.lse_stride_b = args.lse.strides[0];
  p.lse_stride_s = args.lse.strides[1];
  p.lse_stride_h = args.lse.strides[2];
  p.parts = static_cast<const kernels::SplitPart*>(ws.parts);
  p.splits = static_cast<const kernels::RequestSplit*>(ws.request_splits);
  p.num_parts = num_parts_;
  p.o_partial = ws.o_partial;
  p.o_partial_scale = ws.o_partial_scale;
  p.lse_partial = ws.lse_partial;
  p.error_word = ws.error_word;

  p.sparse_q_len = shape_.q_len;
  p.sparse_indices = static_cast<const int*>(args.indices.data);
  p.sparse_indices_stride_b = args.indices.strides[0];
  p.sparse_indices_stride_s = args.indices.strides[1];
  p.sparse_main_len = ws.sparse_main_len;
  p.sparse_page_block = static_cast<int>(kv.shape[1]);
  p.sparse_slots = static_cast<int64_t>(kv.shape[0]) * kv.shape[1];
  if (shape_.extra_topk > 0) {
    const TensorView& extra = args.extra_kv.data;
    p.sparse_extra_indices = static_cast<const int*>(args.extra_indices.data);
    p.sparse_extra_stride_b = args.extra_indices.strides[0];
    p.sparse_extra_stride_s = args.extra_indices.strides[1];
    p.sparse_extra_kv = static_cast<const uint8_t*>(extra.data);
    p.sparse_extra_page_stride_bytes = extra.strides[0] * dtype_size(extra.dtype);
    p.sparse_extra_page_block = static_cast<int>(extra.shape[1]);
    p.sparse_extra_slots = static_cast<int64_t>(extra.shape[0]) * extra.shape[1];
  }
  p.attn_sink = shape_.attn_sink ? static_cast<const float*>(args.attn_sink.data) : nullptr;

  p.fp16_partials = kernels::portable::fp16_partials(launch_->portable);
  OPENMLA_CUDA_CHECK(kernels::portable::launch_decode(p, launch_->portable, programmatic_launch_, stream));
  if (kernels::max_partials(p.batch, num_parts_) > 0)
    OPENMLA_CUDA_CHECK(kernels::launch_combine(p, shape_.q_dtype == DType::kBFloat16, programmatic_launch_, stream));
}

unsigned* SparseDecodePlan::device_error_word(void* workspace) noexcept {
  return DecodePlan::device_error_word(workspace);  // one workspace layout: the error word at offset 0
}

void SparseDecodePlan::reset_device_errors(void* workspace, cudaStream_t stream) {
  DecodePlan::reset_device_errors(workspace, stream);
}

unsigned SparseDecodePlan::read_device_errors(const void* workspace, cudaStream_t stream) {
  return DecodePlan::read_device_errors(workspace, stream);
}

}  // namespace openmla
