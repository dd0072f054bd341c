// The FlashMLA peer: fills FlashMLA's parameter structs from openmla-bench's buffers and calls its three host
// launchers (compiled from the checkout named by OPENMLA_BENCH_FLASHMLA_DIR; nothing of FlashMLA is copied here).
// The values are the ones FlashMLA's Python entry (csrc/api/dense_decode.h) derives from its tensors for a cache
// of one KV head: with h_k = 1, its query view [b, s_q * h_q, 1, 576] (row = token * h_q + head) is the bench's
// q [b, s_q, h_q, 576] as it lies in memory, and its out and lse are the bench's [b, s_q, h_q, ...] buffers.
//
// FlashMLA's dense launchers exit the process on a CUDA error; the shape and device are checked before any call
// (shape_unsupported, sparse_shape_unsupported, device_unsupported), so a launch that fails there is a bug, not an
// unsupported case. Its sparse launcher throws instead (kerutils' checks): rethrown as openmla::Error.
#include "flashmla.h"

#include <cmath>
#include <exception>

#include <cutlass/numeric_types.h>

#include "params.h"
#include "core/check.h"
#include "sm90/decode/dense/splitkv_mla.h"
#include "sm90/decode/sparse_fp8/splitkv_mla.h"
#include "smxx/decode/combine/combine.h"
#include "smxx/decode/get_decoding_sched_meta/get_decoding_sched_meta.h"

namespace openmla::bench::flashmla {
namespace {

static_assert(sizeof(DecodingSchedMeta) == kSchedMetaBytes, "FlashMLA's scheduler metadata changed size");

// Constants of FlashMLA's Python entry for a dense decode.
constexpr int kSchedBlockTokens = 64;        // get_decoding_sched_meta's block_size_n: the page size
constexpr int kSchedFixedOverheadBlocks = 5;  // its per-split cost, in blocks, when balancing the parts

template <typename T>
T* at(void* workspace, size_t offset) {
  return reinterpret_cast<T*>(static_cast<uint8_t*>(workspace) + offset);
}

}  // namespace

bool built() noexcept { return true; }

void Decode::plan(const int32_t* seqlens, void* workspace, cudaStream_t stream) const {
  GetDecodeSchedMetaParams p{};
  p.b = shape_.batch_size;
  p.s_q = shape_.q_len;
  p.block_size_n = kSchedBlockTokens;
  p.fixed_overhead_num_blocks = kSchedFixedOverheadBlocks;
  p.topk = -1;  // dense: every request's own length
  p.extra_topk = -1;
  p.topk_length = nullptr;
  p.extra_topk_length = nullptr;
  p.seqlens_k_ptr = const_cast<int32_t*>(seqlens);
  p.tile_scheduler_metadata_ptr = at<DecodingSchedMeta>(workspace, meta_offset_);
  p.num_splits_ptr = at<int>(workspace, splits_offset_);
  p.num_sm_parts = num_sm_parts_;
  p.stream = stream;
  ::smxx::decode::run_get_decoding_sched_meta_kernel(p);
}

void Decode::run(const Args& args, void* workspace, cudaStream_t stream) const {
  const int b = shape_.batch_size, s_q = shape_.q_len, h_q = shape_.num_heads;
  const int rows = s_q * h_q;  // FlashMLA's q_seq_per_hk with one KV head
  DecodingSchedMeta* meta = at<DecodingSchedMeta>(workspace, meta_offset_);
  int* num_splits = at<int>(workspace, splits_offset_);
  float* lse_accum = at<float>(workspace, lse_accum_offset_);
  float* out_accum = at<float>(workspace, out_accum_offset_);

  DenseAttnDecodeParams p{};
  p.b = b;
  p.s_q = s_q;
  p.q_seq_per_hk = rows;
  p.d = kHeadDimQK;
  p.d_v = kHeadDimV;
  p.h_q = h_q;
  p.h_k = 1;
  p.num_blocks = static_cast<int>(args.num_pages);
  p.q_head_per_hk = h_q;
  p.is_causal = shape_.causal && s_q > 1;  // FlashMLA's entry drops the mask for one query token
  p.scale_softmax = args.softmax_scale;
  p.scale_softmax_log2 = static_cast<float>(args.softmax_scale * M_LOG2E);
  p.q_ptr = const_cast<void*>(args.q);
  p.k_ptr = const_cast<void*>(args.kv);
  p.o_ptr = args.out;
  p.softmax_lse_ptr = args.lse;
  // Strides in elements: q [b][rows][1 KV head][576], the cache [page][64][1 KV head][576], out [b][1][rows][512].
  p.q_batch_stride = int64_t{rows} * kHeadDimQK;
  p.q_row_stride = kHeadDimQK;
  p.q_head_stride = kHeadDimQK;
  p.k_batch_stride = int64_t{kPageSize} * kHeadDimQK;
  p.k_row_stride = kHeadDimQK;
  p.k_head_stride = kHeadDimQK;
  p.o_batch_stride = int64_t{rows} * kHeadDimV;
  p.o_row_stride = kHeadDimV;
  p.o_head_stride = int64_t{rows} * kHeadDimV;
  p.block_table = const_cast<int32_t*>(args.block_table);
  p.block_table_batch_stride = args.max_pages;
  p.page_block_size = kPageSize;
  p.seqlens_k_ptr = const_cast<int32_t*>(args.seqlens);
  p.tile_scheduler_metadata_ptr = meta;
  p.num_sm_parts = num_sm_parts_;
  p.num_splits_ptr = num_splits;
  p.total_num_splits = b + num_sm_parts_;
  p.softmax_lseaccum_ptr = lse_accum;
  p.oaccum_ptr = out_accum;
  p.stream = stream;

  // The combine: requests split over several parts get their rows from the partial rows; the others were written
  // by the split-KV kernel itself. Strides in elements of out / lse ([b][s_q][h_q]) and of the partial rows
  // ([split][s_q][h_q]).
  CombineParams c{};
  c.b = b;
  c.s_q = s_q;
  c.h_q = h_q;
  c.d_v = kHeadDimV;
  c.lse = args.lse;
  c.out = args.out;
  c.stride_lse_b = rows;
  c.stride_lse_s_q = h_q;
  c.stride_o_b = rows * kHeadDimV;
  c.stride_o_s_q = h_q * kHeadDimV;
  c.stride_o_h_q = kHeadDimV;
  c.lse_accum = lse_accum;
  c.o_accum = out_accum;
  c.stride_lse_accum_split = rows;
  c.stride_lse_accum_s_q = h_q;
  c.stride_o_accum_split = rows * kHeadDimV;
  c.stride_o_accum_s_q = h_q * kHeadDimV;
  c.stride_o_accum_h_q = kHeadDimV;
  c.tile_scheduler_metadata_ptr = meta;
  c.num_splits_ptr = num_splits;
  c.num_sm_parts = num_sm_parts_;
  c.attn_sink = nullptr;
  c.stream = stream;

  if (shape_.kv_format == KVFormat::kFP16) {
    ::sm90::run_flash_splitkv_mla_kernel<cutlass::half_t>(p);
    ::smxx::decode::run_flash_mla_combine_kernel<cutlass::half_t>(c);
  } else {
    ::sm90::run_flash_splitkv_mla_kernel<cutlass::bfloat16_t>(p);
    ::smxx::decode::run_flash_mla_combine_kernel<cutlass::bfloat16_t>(c);
  }
}

// The sparse entry (csrc/api/sparse_decode.h, sparse_attn_decode_interface) without its tensors: the schedule
// over topk keys per query token, as it computes it when no metadata is passed.
void SparseDecode::plan(void* workspace, cudaStream_t stream) const {
  GetDecodeSchedMetaParams p{};
  p.b = shape_.batch_size;
  p.s_q = shape_.q_len;
  p.block_size_n = kSparseTopkBlock;            // Decode_Sm90_Impl::get_meta: block_size_topk
  p.fixed_overhead_num_blocks = kSchedFixedOverheadBlocks;  // and its fixed overhead, 5 blocks as for dense
  p.topk = shape_.topk;
  p.extra_topk = 0;  // the entry's value without extra indices
  p.topk_length = nullptr;
  p.extra_topk_length = nullptr;
  p.seqlens_k_ptr = nullptr;  // read by dense schedules only
  p.tile_scheduler_metadata_ptr = at<DecodingSchedMeta>(workspace, meta_offset_);
  p.num_splits_ptr = at<int>(workspace, splits_offset_);
  p.num_sm_parts = num_sm_parts_;
  p.stream = stream;
  ::smxx::decode::run_get_decoding_sched_meta_kernel(p);
}

void SparseDecode::run(const SparseArgs& args, void* workspace, cudaStream_t stream) const {
  using bf16 = cutlass::bfloat16_t;
  const int b = shape_.batch_size, s_q = shape_.q_len, h_q = shape_.num_heads, topk = shape_.topk;
  const int rows = s_q * h_q;

  // Strides in elements, of tensors laid out as the entry's: q [b][s_q][h_q][576], the cache [page][64][656]
  // bytes, indices [b][s_q][topk], lse [b][s_q][h_q], out [b][s_q][h_q][512], the partial rows
  // [split][s_q][h_q](, 512).
  SparseAttnDecodeParams p{};
  p.b = b;
  p.s_q = s_q;
  p.h_q = h_q;
  p.h_kv = 1;
  p.d_qk = kHeadDimQK;
  p.d_v = kHeadDimV;
  p.sm_scale = args.softmax_scale;
  p.sm_scale_div_log2 = static_cast<float>(args.softmax_scale * M_LOG2E);  // the entry's sm_scale * LOG_2_E
  p.num_blocks = static_cast<int>(args.num_pages);
  p.page_block_size = kPageSize;
  p.topk = topk;
  p.model_type = ModelType::V32;
  p.q = static_cast<bf16*>(const_cast<void*>(args.q));
  p.kv = static_cast<bf16*>(const_cast<void*>(args.kv));
  p.indices = const_cast<int*>(args.indices);
  p.topk_length = nullptr;
  p.attn_sink = nullptr;
  p.lse = args.lse;
  p.out = static_cast<bf16*>(args.out);
  p.extra_num_blocks = 0;
  p.extra_page_block_size = 0;
  p.extra_topk = 0;
  p.extra_kv = nullptr;
  p.extra_indices = nullptr;
  p.extra_topk_length = nullptr;
  p.stride_q_b = rows * kHeadDimQK;
  p.stride_q_s_q = h_q * kHeadDimQK;
  p.stride_q_h_q = kHeadDimQK;
  p.stride_kv_block = kPageSize * kDsMlaBytesPerToken;
  p.stride_kv_row = kDsMlaBytesPerToken;
  p.stride_indices_b = s_q * topk;
  p.stride_indices_s_q = topk;
  p.stride_lse_b = rows;
  p.stride_lse_s_q = h_q;
  p.stride_o_b = rows * kHeadDimV;
  p.stride_o_s_q = h_q * kHeadDimV;
  p.stride_o_h_q = kHeadDimV;
  p.stride_extra_kv_block = 0;
  p.stride_extra_kv_row = 0;
  p.stride_extra_indices_b = 0;
  p.stride_extra_indices_s_q = 0;
  p.stream = stream;
  p.lse_accum = at<float>(workspace, lse_accum_offset_);
  p.o_accum = at<float>(workspace, out_accum_offset_);
  p.stride_lse_accum_split = rows;
  p.stride_lse_accum_s_q = h_q;
  p.stride_o_accum_split = rows * kHeadDimV;
  p.stride_o_accum_s_q = h_q * kHeadDimV;
  p.stride_o_accum_h_q = kHeadDimV;
  p.tile_scheduler_metadata_ptr = at<DecodingSchedMeta>(workspace, meta_offset_);
  p.num_splits_ptr = at<int>(workspace, splits_offset_);
  p.num_sm_parts = num_sm_parts_;

  CombineParams c{};
  c.b = b;
  c.s_q = s_q;
  c.h_q = h_q;
  c.d_v = kHeadDimV;
  c.lse = p.lse;
  c.out = p.out;
  c.stride_lse_b = p.stride_lse_b;
  c.stride_lse_s_q = p.stride_lse_s_q;
  c.stride_o_b = p.stride_o_b;
  c.stride_o_s_q = p.stride_o_s_q;
  c.stride_o_h_q = p.stride_o_h_q;
  c.lse_accum = p.lse_accum;
  c.o_accum = p.o_accum;
  c.stride_lse_accum_split = p.stride_lse_accum_split;
  c.stride_lse_accum_s_q = p.stride_lse_accum_s_q;
  c.stride_o_accum_split = p.stride_o_accum_split;
  c.stride_o_accum_s_q = p.stride_o_accum_s_q;
  c.stride_o_accum_h_q = p.stride_o_accum_h_q;
  c.tile_scheduler_metadata_ptr = p.tile_scheduler_metadata_ptr;
  c.num_splits_ptr = p.num_splits_ptr;
  c.num_sm_parts = num_sm_parts_;
  c.attn_sink = nullptr;
  c.stream = stream;

  try {
    if (h_q == 64) {
      ::sm90::decode::sparse_fp8::run_flash_splitkv_mla_fp8_sparse_kernel<ModelType::V32, 64>(p);
    } else {
      ::sm90::decode::sparse_fp8::run_flash_splitkv_mla_fp8_sparse_kernel<ModelType::V32, 128>(p);
    }
  } catch (const std::exception& e) {  // its host checks and CUDA checks throw kerutils::KUException
    detail::fail(Status::kCudaError, "FlashMLA sparse decode: ", e.what());
  }
  ::smxx::decode::run_flash_mla_combine_kernel<bf16>(c);
}

}  // namespace openmla::bench::flashmla
