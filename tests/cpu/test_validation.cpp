// Host validation: each kind of bad input is rejected with the right Status and a message naming
// the argument and the offending value. Every case starts from a valid call and breaks one thing.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "core/validate.h"
#include "openmla/error.h"
#include "openmla/reference.h"

namespace openmla {
namespace {

// A valid decode call (b=2, s_q=2, h_q=16, bf16 cache of 4 pages) and a valid write_kv call.
struct Fixture {
  static constexpr int64_t b = 2, s_q = 2, h_q = 16, pages = 4, max_pages = 2, n = 3;
  std::vector<uint16_t> q = std::vector<uint16_t>(b * s_q * h_q * kHeadDimQK + 64, 0);
  std::vector<uint16_t> cache = std::vector<uint16_t>(pages * kPageSize * kHeadDimQK + 64, 0);
  std::vector<int32_t> table = {0, 1, 2, 3};
  std::vector<int32_t> seqlens = {100, 70};
  std::vector<uint16_t> out = std::vector<uint16_t>(b * s_q * h_q * kHeadDimV + 64);
  std::vector<double> out64 = std::vector<double>(b * s_q * h_q * kHeadDimV);
  std::vector<float> lse = std::vector<float>(b * s_q * h_q);
  std::vector<float> latent = std::vector<float>(n * kHeadDimV, 0.5f);
  std::vector<float> rope = std::vector<float>(n * kRopeDim, 0.25f);
  std::vector<int64_t> slots = {0, 65, -1};
  std::vector<float> scales = {2.0f, 3.0f};

  // The cache's memory as an fp8_e4m3 cache (for the device-scale checks).
  KVCache fp8_cache() {
    KVCache kv;
    kv.format = KVFormat::kFP8E4M3;
    kv.data = make_tensor(cache.data(), DType::kUInt8, {pages, kPageSize, 1, kHeadDimQK});
    return kv;
  }

  DecodeShape shape;
  DecodeArgs args;
  WriteKVArgs write;

  // A valid sparse decode call: b=2, s_q=2, h_q=16, topk 8 into the bf16 cache seen with page block size 2 (128
  // pages), extra_topk 4 into the same memory seen as 4 pages of 64, topk_length, extra_topk_length and a sink.
  static constexpr int64_t topk = 8, extra_topk = 4;
  std::vector<int32_t> sparse_indices = std::vector<int32_t>(b * s_q * topk, 1);
  std::vector<int32_t> extra_indices = std::vector<int32_t>(b * s_q * extra_topk, -1);
  std::vector<int32_t> lengths = {8, 3};
  std::vector<float> sink = std::vector<float>(h_q, 0.5f);
  SparseDecodeShape sshape;
  SparseDecodeArgs sargs;
  TensorView topk_length, extra_topk_length;

  Fixture() {
    shape.batch_size = b;
    shape.q_len = s_q;
    shape.num_heads = h_q;
    args.q = make_tensor(q.data(), DType::kBFloat16, {b, s_q, h_q, kHeadDimQK});
    args.kv.data = make_tensor(cache.data(), DType::kBFloat16, {pages, kPageSize, 1, kHeadDimQK});
    args.block_table = make_tensor(table.data(), DType::kInt32, {b, max_pages});
    args.cache_seqlens = make_tensor(seqlens.data(), DType::kInt32, {b});
    args.out = make_tensor(out.data(), DType::kBFloat16, {b, s_q, h_q, kHeadDimV});
    args.lse = make_tensor(lse.data(), DType::kFloat32, {b, s_q, h_q});
    args.softmax_scale = 0.0416f;
    write.kv_latent = make_tensor(latent.data(), DType::kFloat32, {n, kHeadDimV});
    write.k_rope = make_tensor(rope.data(), DType::kFloat32, {n, kRopeDim});
    write.slots = make_tensor(slots.data(), DType::kInt64, {n});
    write.cache = args.kv;
    sshape.batch_size = b;
    sshape.q_len = s_q;
    sshape.num_heads = h_q;
    sshape.kv_format = KVFormat::kBF16;
    sshape.topk = topk;
    sshape.extra_topk = extra_topk;
    sshape.topk_length = sshape.extra_topk_length = sshape.attn_sink = true;
    sargs.q = args.q;
    sargs.kv.data = make_tensor(cache.data(), DType::kBFloat16, {128, 2, 1, kHeadDimQK});
    sargs.indices = make_tensor(sparse_indices.data(), DType::kInt32, {b, s_q, topk});
    sargs.extra_kv = args.kv;
    sargs.extra_indices = make_tensor(extra_indices.data(), DType::kInt32, {b, s_q, extra_topk});
    sargs.attn_sink = make_tensor(sink.data(), DType::kFloat32, {h_q});
    sargs.softmax_scale = 0.0416f;
    sargs.out = args.out;
    sargs.lse = args.lse;
    topk_length = make_tensor(lengths.data(), DType::kInt32, {b});
    extra_topk_length = make_tensor(lengths.data(), DType::kInt32, {b});
  }

  // The sparse call without its extra cache (extra_topk 0).
  void no_extra() {
    sshape.extra_topk = 0;
    sshape.extra_topk_length = false;
    sargs.extra_kv = KVCache();
    sargs.extra_indices = TensorView();
    extra_topk_length = TensorView();
  }
};

// Per-tensor FP8 with device-held scales: an e4m3 cache (the bf16 cache's bytes), its scale as a tensor, and with
// fp8_query an e4m3 query with its scale.
void use_device_scales(Fixture& f, bool fp8_query) {
  using F = Fixture;
  f.shape.kv_format = f.args.kv.format = KVFormat::kFP8E4M3;
  f.args.kv.data = make_tensor(f.cache.data(), DType::kUInt8, {F::pages, kPageSize, 1, kHeadDimQK});
  f.shape.device_scales = true;
  f.args.kv.device_scale = make_tensor(&f.scales[1], DType::kFloat32, {1});
  if (fp8_query) {
    f.shape.q_dtype = DType::kFloat8E4M3;
    f.args.q = make_tensor(f.q.data(), DType::kFloat8E4M3, {F::b, F::s_q, F::h_q, kHeadDimQK});
    f.args.q_scale = make_tensor(&f.scales[0], DType::kFloat32, {1});
  }
}

enum class Entry {
  kDecodeShape,
  kDecodeArgs,
  kReferenceDecode,
  kWriteKV,
  kReferenceWriteKV,
  kSparseShape,
  kSparseArgs,
  kSparseLengths,
  kReferenceSparse,
};

struct BadInput {
  const char* name;  // the kind of bad input (test name)
  Entry entry;
  std::function<void(Fixture&)> breaks;
  Status status;
  std::vector<std::string> message_has;  // argument name and offending value, at least
};

void call(Entry entry, Fixture& f) {
  using F = Fixture;
  switch (entry) {
    case Entry::kDecodeShape: detail::validate_decode_shape(f.shape); break;
    case Entry::kDecodeArgs: detail::validate_decode_args(f.args, f.shape, DeviceType::kCPU, 0); break;
    case Entry::kReferenceDecode: reference::decode(f.args, f.shape); break;
    case Entry::kWriteKV: detail::validate_write_kv_args(f.write, DeviceType::kCPU, 0); break;
    case Entry::kReferenceWriteKV: reference::write_kv(f.write); break;
    case Entry::kSparseShape: detail::validate_sparse_decode_shape(f.sshape); break;
    case Entry::kSparseArgs: detail::validate_sparse_decode_args(f.sargs, f.sshape, DeviceType::kCPU, 0); break;
    case Entry::kSparseLengths:
      detail::validate_sparse_lengths(f.topk_length, f.extra_topk_length, f.sshape, DeviceType::kCPU, 0);
      break;
    case Entry::kReferenceSparse: {
      std::vector<double> out(f.out64.size());
      f.sargs.out = make_tensor(out.data(), DType::kFloat64, {F::b, F::s_q, F::h_q, kHeadDimV});
      reference::sparse_decode(f.sargs, f.sshape, f.topk_length, f.extra_topk_length);
      break;
    }
  }
}

const float kNaNf = std::numeric_limits<float>::quiet_NaN();
constexpr Status kInvalid = Status::kInvalidArgument;

std::vector<BadInput> bad_inputs() {
  using F = Fixture;
  return {
      // ---- DecodeShape
      {"batch_size_zero", Entry::kDecodeShape, [](F& f) { f.shape.batch_size = 0; }, kInvalid, {"shape.batch_size", "got 0"}},
      {"q_len_129", Entry::kDecodeShape, [](F& f) { f.shape.q_len = 129; }, kInvalid, {"shape.q_len", "[1, 128]", "got 129"}},
      {"tree_q_len_65", Entry::kDecodeShape,
       [](F& f) {
         f.shape.q_len = 65;
         f.shape.tree_mask = TreeMask::kShared;
       },
       kInvalid, {"shape.q_len", "[1, 64]", "tree mask", "got 65"}},
      {"packed_mask_uniform", Entry::kDecodeShape, [](F& f) { f.shape.tree_mask = TreeMask::kPacked; }, kInvalid,
       {"shape.tree_mask", "kPacked needs ragged", "got packed"}},
      {"query_layout_out_of_enum", Entry::kDecodeShape, [](F& f) { f.shape.query_layout = static_cast<QueryLayout>(5); },
       kInvalid, {"shape.query_layout", "QueryLayout(5)"}},
      {"q_len_zero", Entry::kDecodeArgs, [](F& f) { f.shape.q_len = 0; }, kInvalid, {"shape.q_len", "got 0"}},
      {"num_heads_129", Entry::kDecodeShape, [](F& f) { f.shape.num_heads = 129; }, kInvalid,
       {"shape.num_heads", "[1, 128]", "got 129"}},
      {"num_heads_zero", Entry::kDecodeShape, [](F& f) { f.shape.num_heads = 0; }, kInvalid, {"shape.num_heads", "got 0"}},
      {"q_dtype_float32", Entry::kDecodeShape, [](F& f) { f.shape.q_dtype = DType::kFloat32; }, kInvalid,
       {"shape.q_dtype", "got float32"}},
      {"kv_format_out_of_enum", Entry::kDecodeShape, [](F& f) { f.shape.kv_format = static_cast<KVFormat>(9); }, kInvalid,
       {"shape.kv_format", "9"}},
      // ---- device-held FP8 scales
      {"device_scales_bf16_cache", Entry::kDecodeShape, [](F& f) { f.shape.device_scales = true; }, kInvalid,
       {"shape.device_scales", "false for kv format bf16", "got true"}},
      {"e4m3_query_without_device_scales", Entry::kDecodeShape,
       [](F& f) {
         f.shape.kv_format = KVFormat::kFP8E4M3;
         f.shape.q_dtype = DType::kFloat8E4M3;
       },
       kInvalid, {"shape.q_dtype", "device_scales", "got float8_e4m3 with kv format fp8_e4m3 and device_scales false"}},
      {"e4m3_query_bf16_cache", Entry::kDecodeShape, [](F& f) { f.shape.q_dtype = DType::kFloat8E4M3; }, kInvalid,
       {"shape.q_dtype", "kv format bf16"}},
      {"device_scale_missing", Entry::kDecodeArgs,
       [](F& f) {
         use_device_scales(f, false);
         f.args.kv.device_scale = TensorView();
       },
       kInvalid, {"kv.device_scale", "plan has device_scales", "got an undefined view"}},
      {"device_scale_without_plan", Entry::kReferenceDecode,
       [](F& f) {
         use_device_scales(f, false);
         f.shape.device_scales = false;
       },
       kInvalid, {"kv.device_scale", "plan has no device_scales", "[1]"}},
      {"device_scale_two_elements", Entry::kDecodeArgs,
       [](F& f) {
         use_device_scales(f, false);
         f.args.kv.device_scale = make_tensor(f.scales.data(), DType::kFloat32, {2});
       },
       kInvalid, {"kv.device_scale", "one element", "got [2]"}},
      {"device_scale_float16", Entry::kDecodeArgs,
       [](F& f) {
         use_device_scales(f, false);
         f.args.kv.device_scale.dtype = DType::kFloat16;
       },
       kInvalid, {"kv.device_scale", "float32", "got float16"}},
      {"device_scale_on_cuda", Entry::kDecodeArgs,
       [](F& f) {
         use_device_scales(f, true);
         f.args.kv.device_scale.device = DeviceType::kCUDA;
       },
       kInvalid, {"kv.device_scale", "cuda:0"}},
      {"device_scale_bf16_cache", Entry::kDecodeArgs,
       [](F& f) { f.args.kv.device_scale = make_tensor(&f.scales[1], DType::kFloat32, {1}); }, kInvalid,
       {"kv.device_scale", "kv format bf16", "[1]"}},
      {"q_scale_missing", Entry::kDecodeArgs,
       [](F& f) {
         use_device_scales(f, true);
         f.args.q_scale = TensorView();
       },
       kInvalid, {"q_scale", "undefined view"}},
      {"q_scale_with_bf16_query", Entry::kReferenceDecode,
       [](F& f) {
         use_device_scales(f, false);
         f.args.q_scale = make_tensor(&f.scales[0], DType::kFloat32, {1});
       },
       kInvalid, {"q_scale", "bfloat16 query", "[1]"}},
      {"e4m3_query_out_fp16", Entry::kDecodeArgs,
       [](F& f) {
         use_device_scales(f, true);
         f.args.out.dtype = DType::kFloat16;
       },
       kInvalid, {"out", "bfloat16", "got float16"}},
      // ---- arguments of other query layouts and masks
      {"q_indptr_with_uniform_queries", Entry::kDecodeArgs,
       [](F& f) { f.args.q_indptr = make_tensor(f.seqlens.data(), DType::kInt32, {3}); }, kInvalid,
       {"q_indptr", "undefined view with uniform queries", "[3]"}},
      {"mask_without_tree", Entry::kReferenceDecode,
       [](F& f) { f.args.mask = make_tensor(f.seqlens.data(), DType::kInt32, {2, 1}); }, kInvalid,
       {"mask", "without a tree mask", "[2, 1]"}},
      // ---- q
      {"q_undefined", Entry::kDecodeArgs, [](F& f) { f.args.q = TensorView(); }, kInvalid, {"q:", "undefined"}},
      {"q_on_cuda", Entry::kDecodeArgs, [](F& f) { f.args.q.device = DeviceType::kCUDA; }, kInvalid, {"q:", "cuda:0"}},
      {"q_wrong_device_id", Entry::kDecodeArgs, [](F& f) { f.args.q.device_id = 3; }, kInvalid, {"q:", "cpu:3"}},
      {"q_dtype_mismatch", Entry::kDecodeArgs, [](F& f) { f.args.q.dtype = DType::kFloat16; }, kInvalid,
       {"q:", "bfloat16", "got float16"}},
      {"q_head_dim_512", Entry::kDecodeArgs,
       [](F& f) { f.args.q = make_tensor(f.q.data(), DType::kBFloat16, {2, 2, 16, 512}); }, kInvalid,
       {"q:", "[b, s_q, h_q, 576]", "got [2, 2, 16, 512]"}},
      {"q_batch_mismatch", Entry::kReferenceDecode,
       [](F& f) { f.args.q = make_tensor(f.q.data(), DType::kBFloat16, {1, 2, 16, 576}); }, kInvalid,
       {"q:", "[2, 2, 16, 576]", "got [1, 2, 16, 576]"}},
      {"q_null_data", Entry::kDecodeArgs, [](F& f) { f.args.q.data = nullptr; }, kInvalid, {"q:", "nullptr"}},
      {"q_last_stride_2", Entry::kDecodeArgs, [](F& f) { f.args.q.strides[3] = 2; }, kInvalid, {"q:", "stride 1", "2]"}},
      {"q_negative_stride", Entry::kDecodeArgs, [](F& f) { f.args.q.strides[0] = -f.args.q.strides[0]; }, kInvalid,
       {"q:", "non-negative", "-18432"}},
      {"q_misaligned_pointer", Entry::kDecodeArgs, [](F& f) { f.args.q.data = f.q.data() + 1; }, kInvalid,
       {"q:", "16-byte aligned", "% 16 = 2"}},
      {"q_row_stride_not_16_bytes", Entry::kDecodeArgs,
       [](F& f) {
         f.args.q = make_tensor_strided(f.q.data(), DType::kBFloat16, {2, 2, 16, 576}, {9000, 4500, 580, 1});
       },
       kInvalid, {"q:", "multiples of 16", "580"}},
      // ---- kv cache
      {"kv_dtype_fp16_for_bf16", Entry::kDecodeArgs, [](F& f) { f.args.kv.data.dtype = DType::kFloat16; }, kInvalid,
       {"kv.data", "bfloat16", "got float16"}},
      {"kv_2d", Entry::kDecodeArgs,
       [](F& f) { f.args.kv.data = make_tensor(f.cache.data(), DType::kBFloat16, {256, 576}); }, kInvalid,
       {"kv.data", "[num_pages, 64, 1, 576]", "got [256, 576]"}},
      {"kv_page_size_32", Entry::kDecodeArgs,
       [](F& f) { f.args.kv.data = make_tensor(f.cache.data(), DType::kBFloat16, {8, 32, 1, 576}); }, kInvalid,
       {"kv.data", "page size 64", "page size 32"}},
      {"kv_two_heads", Entry::kDecodeArgs,
       [](F& f) { f.args.kv.data = make_tensor(f.cache.data(), DType::kBFloat16, {2, 64, 2, 576}); }, kInvalid,
       {"kv.data", "1 KV head", "2 KV heads"}},
      {"kv_row_512", Entry::kDecodeArgs,
       [](F& f) { f.args.kv.data = make_tensor(f.cache.data(), DType::kBFloat16, {4, 64, 512}); }, kInvalid,
       {"kv.data", "576", "got 512"}},
      {"kv_ds_mla_row_576", Entry::kDecodeArgs,
       [](F& f) {
         f.shape.kv_format = f.args.kv.format = KVFormat::kFP8DsMla;
         f.args.kv.data = make_tensor(f.cache.data(), DType::kUInt8, {4, 64, 1, 576});
       },
       kInvalid, {"kv.data", "656", "fp8_ds_mla", "got 576"}},
      {"kv_token_stride_gap", Entry::kDecodeArgs,
       [](F& f) {
         f.args.kv.data = make_tensor_strided(f.cache.data(), DType::kBFloat16, {2, 64, 1, 576}, {65536, 584, 584, 1});
       },
       kInvalid, {"kv.data", "token stride", "584"}},
      {"kv_page_stride_too_small", Entry::kDecodeArgs,
       [](F& f) {
         f.args.kv.data = make_tensor_strided(f.cache.data(), DType::kBFloat16, {4, 64, 1, 576}, {36000, 576, 576, 1});
       },
       kInvalid, {"kv.data", ">= 36864", "36000"}},
      {"kv_page_stride_not_16_bytes", Entry::kDecodeArgs,
       [](F& f) {
         f.args.kv.data = make_tensor_strided(f.cache.data(), DType::kBFloat16, {2, 64, 1, 576}, {36868, 576, 576, 1});
       },
       kInvalid, {"kv.data", "multiple of 16 bytes", "36868"}},
      {"kv_misaligned_pointer", Entry::kDecodeArgs, [](F& f) { f.args.kv.data.data = f.cache.data() + 4; }, kInvalid,
       {"kv.data", "16-byte aligned", "% 16 = 8"}},
      {"kv_no_pages", Entry::kDecodeArgs,
       [](F& f) { f.args.kv.data = make_tensor(f.cache.data(), DType::kBFloat16, {0, 64, 1, 576}); }, kInvalid,
       {"kv.data", "num_pages", "0 in [0, 64, 1, 576]"}},
      {"kv_too_many_pages", Entry::kDecodeArgs,
       [](F& f) { f.args.kv.data.shape[0] = int64_t{1} << 31; }, kInvalid, {"kv.data", "2^31", "2147483648"}},
      {"kv_fp8_scale_nan", Entry::kDecodeArgs,
       [](F& f) {
         f.shape.kv_format = f.args.kv.format = KVFormat::kFP8E4M3;
         f.args.kv.data.dtype = DType::kFloat8E4M3;
         f.args.kv.scale = kNaNf;
       },
       kInvalid, {"kv.scale", "finite value > 0", "nan"}},
      {"kv_fp8_scale_negative", Entry::kReferenceDecode,
       [](F& f) {
         f.shape.kv_format = f.args.kv.format = KVFormat::kFP8E4M3;
         f.args.kv.data.dtype = DType::kUInt8;
         f.args.kv.scale = -2.0f;
       },
       kInvalid, {"kv.scale", "-2"}},
      {"kv_fp8_cache_as_bf16", Entry::kDecodeArgs,
       [](F& f) { f.shape.kv_format = f.args.kv.format = KVFormat::kFP8E4M3; }, kInvalid,
       {"kv.data", "float8_e4m3 or uint8", "got bfloat16"}},
      {"kv_format_differs_from_plan", Entry::kDecodeArgs,
       [](F& f) { f.args.kv.format = KVFormat::kFP16; f.args.kv.data.dtype = DType::kFloat16; }, kInvalid,
       {"kv.format", "bf16", "got fp16"}},
      {"kv_cache_format_out_of_enum", Entry::kDecodeArgs, [](F& f) { f.args.kv.format = static_cast<KVFormat>(7); }, kInvalid,
       {"kv.format", "KVFormat(7)"}},
      // ---- block_table, cache_seqlens
      {"block_table_int64", Entry::kDecodeArgs, [](F& f) { f.args.block_table.dtype = DType::kInt64; }, kInvalid,
       {"block_table", "int32", "got int64"}},
      {"block_table_batch_3", Entry::kDecodeArgs,
       [](F& f) { f.args.block_table = make_tensor(f.table.data(), DType::kInt32, {3, 1}); }, kInvalid,
       {"block_table", "[2, max_pages]", "got [3, 1]"}},
      {"block_table_no_columns", Entry::kDecodeArgs,
       [](F& f) { f.args.block_table = make_tensor(f.table.data(), DType::kInt32, {2, 0}); }, kInvalid,
       {"block_table", ">= 1", "0 in [2, 0]"}},
      {"block_table_column_major", Entry::kDecodeArgs,
       [](F& f) { f.args.block_table = make_tensor_strided(f.table.data(), DType::kInt32, {2, 2}, {1, 2}); }, kInvalid,
       {"block_table", "stride 1", "[1, 2]"}},
      {"cache_seqlens_int64", Entry::kDecodeArgs, [](F& f) { f.args.cache_seqlens.dtype = DType::kInt64; }, kInvalid,
       {"cache_seqlens", "int32", "got int64"}},
      {"cache_seqlens_length_1", Entry::kDecodeArgs,
       [](F& f) { f.args.cache_seqlens = make_tensor(f.seqlens.data(), DType::kInt32, {1}); }, kInvalid,
       {"cache_seqlens", "[2]", "got [1]"}},
      {"cache_seqlens_strided", Entry::kDecodeArgs, [](F& f) { f.args.cache_seqlens.strides[0] = 2; }, kInvalid,
       {"cache_seqlens", "contiguous", "[2]"}},
      // ---- out, lse, softmax_scale
      {"out_float32_on_device_path", Entry::kDecodeArgs, [](F& f) { f.args.out.dtype = DType::kFloat32; }, kInvalid,
       {"out:", "bfloat16", "got float32"}},
      {"out_int32_in_reference", Entry::kReferenceDecode, [](F& f) { f.args.out.dtype = DType::kInt32; }, kInvalid,
       {"out:", "float64, float32, bfloat16 or float16", "got int32"}},
      {"out_head_dim_576", Entry::kDecodeArgs,
       [](F& f) { f.args.out = make_tensor(f.out.data(), DType::kBFloat16, {2, 2, 16, 576}); }, kInvalid,
       {"out:", "[b, s_q, h_q, 512]", "got [2, 2, 16, 576]"}},
      {"out_zero_stride_aliases", Entry::kDecodeArgs, [](F& f) { f.args.out.strides[2] = 0; }, kInvalid,
       {"out:", "non-overlapping", "[16384, 8192, 0, 1]"}},
      {"out_rows_overlap", Entry::kReferenceDecode,
       [](F& f) {
         f.args.out = make_tensor_strided(f.out64.data(), DType::kFloat64, {2, 2, 16, 512}, {16384, 8192, 256, 1});
       },
       kInvalid, {"out:", "non-overlapping", "256"}},
      {"out_row_stride_not_16_bytes", Entry::kDecodeArgs,
       [](F& f) {
         f.args.out = make_tensor_strided(f.out.data(), DType::kBFloat16, {2, 2, 16, 512}, {16800, 8400, 516, 1});
       },
       kInvalid, {"out:", "multiples of 16", "516"}},
      {"out_on_other_device", Entry::kDecodeArgs, [](F& f) { f.args.out.device = DeviceType::kCUDA; }, kInvalid,
       {"out:", "cuda:0"}},
      {"lse_bf16", Entry::kDecodeArgs, [](F& f) { f.args.lse.dtype = DType::kBFloat16; }, kInvalid,
       {"lse:", "float32", "got bfloat16"}},
      {"lse_wrong_shape", Entry::kDecodeArgs,
       [](F& f) { f.args.lse = make_tensor(f.lse.data(), DType::kFloat32, {2, 16, 2}); }, kInvalid,
       {"lse:", "[2, 2, 16]", "got [2, 16, 2]"}},
      {"lse_zero_stride", Entry::kDecodeArgs,
       [](F& f) { f.args.lse = make_tensor_strided(f.lse.data(), DType::kFloat32, {2, 2, 16}, {32, 0, 1}); }, kInvalid,
       {"lse:", "no zero stride", "[32, 0, 1]"}},
      {"lse_overlapping_strides", Entry::kDecodeArgs,
       [](F& f) { f.args.lse = make_tensor_strided(f.lse.data(), DType::kFloat32, {2, 2, 16}, {16, 8, 1}); }, kInvalid,
       {"lse:", "non-overlapping", "[16, 8, 1]"}},
      {"lse_null", Entry::kReferenceDecode, [](F& f) { f.args.lse.data = nullptr; }, kInvalid, {"lse:", "nullptr"}},
      {"softmax_scale_zero", Entry::kDecodeArgs, [](F& f) { f.args.softmax_scale = 0.0f; }, kInvalid,
       {"softmax_scale", "finite value > 0", "got 0"}},
      {"softmax_scale_inf", Entry::kReferenceDecode,
       [](F& f) { f.args.softmax_scale = std::numeric_limits<float>::infinity(); }, kInvalid, {"softmax_scale", "inf"}},
      // ---- sparse decode: SparseDecodeShape
      {"sparse_q_len_17", Entry::kSparseShape, [](F& f) { f.sshape.q_len = 17; }, kInvalid,
       {"shape.q_len", "[1, 16]", "got 17"}},
      {"sparse_batch_size_zero", Entry::kSparseShape, [](F& f) { f.sshape.batch_size = 0; }, kInvalid,
       {"shape.batch_size", "got 0"}},
      {"sparse_num_heads_129", Entry::kSparseShape, [](F& f) { f.sshape.num_heads = 129; }, kInvalid,
       {"shape.num_heads", "[1, 128]", "got 129"}},
      {"sparse_q_dtype_e4m3", Entry::kSparseShape, [](F& f) { f.sshape.q_dtype = DType::kFloat8E4M3; }, kInvalid,
       {"shape.q_dtype", "bfloat16 or float16", "got float8_e4m3"}},
      {"sparse_kv_format_out_of_enum", Entry::kSparseShape, [](F& f) { f.sshape.kv_format = static_cast<KVFormat>(4); },
       kInvalid, {"shape.kv_format", "KVFormat(4)"}},
      {"sparse_topk_zero", Entry::kSparseShape, [](F& f) { f.sshape.topk = 0; }, kInvalid,
       {"shape.topk", "[1, 65536]", "got 0"}},
      {"sparse_topk_too_large", Entry::kSparseArgs, [](F& f) { f.sshape.topk = 65537; }, kInvalid,
       {"shape.topk", "got 65537"}},
      {"sparse_extra_topk_negative", Entry::kSparseShape, [](F& f) { f.sshape.extra_topk = -1; }, kInvalid,
       {"shape.extra_topk", "[0, 65536]", "got -1"}},
      {"sparse_extra_topk_length_without_extra", Entry::kSparseShape,
       [](F& f) {
         f.sshape.extra_topk = 0;
         f.sshape.extra_topk_length = true;
       },
       kInvalid, {"shape.extra_topk_length", "false without an extra cache", "got true"}},
      // ---- sparse decode: plan()'s length tensors
      {"sparse_topk_length_missing", Entry::kSparseLengths, [](F& f) { f.topk_length = TensorView(); }, kInvalid,
       {"topk_length", "[b]", "undefined view"}},
      {"sparse_topk_length_unplanned", Entry::kSparseLengths, [](F& f) { f.sshape.topk_length = false; }, kInvalid,
       {"topk_length", "undefined view (shape.topk_length = false)", "got a tensor of shape [2]"}},
      {"sparse_topk_length_int64", Entry::kSparseLengths, [](F& f) { f.topk_length.dtype = DType::kInt64; }, kInvalid,
       {"topk_length", "int32", "got int64"}},
      {"sparse_topk_length_wrong_b", Entry::kReferenceSparse,
       [](F& f) { f.topk_length = make_tensor(f.lengths.data(), DType::kInt32, {1}); }, kInvalid,
       {"topk_length", "[b] = [2]", "got [1]"}},
      {"sparse_extra_topk_length_strided", Entry::kSparseLengths, [](F& f) { f.extra_topk_length.strides[0] = 2; },
       kInvalid, {"extra_topk_length", "contiguous", "[2]"}},
      {"sparse_extra_topk_length_unplanned", Entry::kReferenceSparse, [](F& f) { f.sshape.extra_topk_length = false; },
       kInvalid, {"extra_topk_length", "shape.extra_topk_length = false", "[2]"}},
      // ---- sparse decode: q
      {"sparse_q_tokens_not_one_dimension", Entry::kSparseArgs,
       [](F& f) {
         f.sargs.q = make_tensor_strided(f.q.data(), DType::kBFloat16, {2, 2, 16, 576}, {18432 + 64, 9216, 576, 1});
       },
       kInvalid, {"q:", "stride(0) == s_q * stride(1) = 18432", "one [b * s_q] dimension", "[18496, 9216, 576, 1]"}},
      {"sparse_q_dtype_mismatch", Entry::kSparseArgs, [](F& f) { f.sargs.q.dtype = DType::kFloat16; }, kInvalid,
       {"q:", "bfloat16 (the planned shape.q_dtype)", "got float16"}},
      {"sparse_q_s_q_mismatch", Entry::kReferenceSparse,
       [](F& f) { f.sargs.q = make_tensor(f.q.data(), DType::kBFloat16, {2, 1, 16, 576}); }, kInvalid,
       {"q:", "[b, s_q, h_q, 576] = [2, 2, 16, 576]", "got [2, 1, 16, 576]"}},
      {"sparse_q_misaligned", Entry::kSparseArgs, [](F& f) { f.sargs.q.data = f.q.data() + 1; }, kInvalid,
       {"q:", "16-byte aligned"}},
      // ---- sparse decode: caches
      {"sparse_kv_page_size_zero", Entry::kSparseArgs,
       [](F& f) { f.sargs.kv.data = make_tensor(f.cache.data(), DType::kBFloat16, {4, 0, 1, 576}); }, kInvalid,
       {"kv.data", "page size >= 1", "[num_pages, page_block_size, 1, 576]", "got page size 0"}},
      {"sparse_kv_page_stride_too_small", Entry::kSparseArgs,
       [](F& f) {
         f.sargs.kv.data = make_tensor_strided(f.cache.data(), DType::kBFloat16, {4, 2, 1, 576}, {576, 576, 576, 1});
       },
       kInvalid, {"kv.data", "page stride (dimension 0) >= 1152", "[576, 576, 576, 1]"}},
      {"sparse_kv_format_differs", Entry::kSparseArgs,
       [](F& f) {
         f.sargs.kv.format = KVFormat::kFP16;
         f.sargs.kv.data.dtype = DType::kFloat16;
       },
       kInvalid, {"kv.format", "bf16 (the planned shape.kv_format)", "got fp16"}},
      {"sparse_kv_fp8_scale_zero", Entry::kReferenceSparse,
       [](F& f) {
         f.sshape.kv_format = f.sargs.kv.format = f.sargs.extra_kv.format = KVFormat::kFP8E4M3;
         f.sargs.kv.data.dtype = f.sargs.extra_kv.data.dtype = DType::kUInt8;
         f.sargs.kv.scale = 0.0f;
       },
       kInvalid, {"kv.scale", "finite value > 0", "got 0"}},
      {"sparse_extra_kv_fp8_scale_differs", Entry::kSparseArgs,
       [](F& f) {
         f.sshape.kv_format = f.sargs.kv.format = f.sargs.extra_kv.format = KVFormat::kFP8E4M3;
         f.sargs.kv.data.dtype = f.sargs.extra_kv.data.dtype = DType::kUInt8;
         f.sargs.kv.scale = 0.5f;
         f.sargs.extra_kv.scale = 0.25f;
       },
       kInvalid, {"extra_kv.scale", "the main cache's scale 0.5", "got 0.25"}},
      {"sparse_extra_kv_own_device_scale", Entry::kReferenceSparse,
       [](F& f) {
         f.sshape.kv_format = f.sargs.kv.format = f.sargs.extra_kv.format = KVFormat::kFP8E4M3;
         f.sargs.kv.data.dtype = f.sargs.extra_kv.data.dtype = DType::kUInt8;
         f.sargs.kv.device_scale = make_tensor(&f.scales[0], DType::kFloat32, {1});
         f.sargs.extra_kv.device_scale = make_tensor(&f.scales[1], DType::kFloat32, {1});
       },
       kInvalid, {"extra_kv.device_scale", "the main cache's device_scale", "another tensor"}},
      {"sparse_extra_kv_format_differs", Entry::kSparseArgs,
       [](F& f) {
         f.sargs.extra_kv.format = KVFormat::kFP16;
         f.sargs.extra_kv.data.dtype = DType::kFloat16;
       },
       kInvalid, {"extra_kv.format", "bf16 (the planned shape.kv_format)", "got fp16"}},
      {"sparse_extra_kv_missing", Entry::kSparseArgs, [](F& f) { f.sargs.extra_kv = KVCache(); }, kInvalid,
       {"extra_kv.data", "undefined view"}},
      {"sparse_extra_kv_two_heads", Entry::kReferenceSparse,
       [](F& f) { f.sargs.extra_kv.data = make_tensor(f.cache.data(), DType::kBFloat16, {2, 64, 2, 576}); }, kInvalid,
       {"extra_kv.data", "1 KV head", "2 KV heads"}},
      {"sparse_extra_kv_without_extra_topk", Entry::kSparseArgs,
       [](F& f) {
         const KVCache extra = f.sargs.extra_kv;
         f.no_extra();
         f.sargs.extra_kv = extra;
       },
       kInvalid, {"extra_kv.data", "undefined view without an extra cache (shape.extra_topk = 0)", "[4, 64, 1, 576]"}},
      {"sparse_extra_indices_without_extra_topk", Entry::kReferenceSparse,
       [](F& f) {
         const TensorView extra = f.sargs.extra_indices;
         f.no_extra();
         f.sargs.extra_indices = extra;
       },
       kInvalid, {"extra_indices", "undefined view without an extra cache", "[2, 2, 4]"}},
      // ---- sparse decode: indices, attn_sink
      {"sparse_indices_int64", Entry::kSparseArgs, [](F& f) { f.sargs.indices.dtype = DType::kInt64; }, kInvalid,
       {"indices", "int32", "got int64"}},
      {"sparse_indices_wrong_topk", Entry::kSparseArgs,
       [](F& f) { f.sargs.indices = make_tensor(f.sparse_indices.data(), DType::kInt32, {2, 2, 7}); }, kInvalid,
       {"indices", "[b, s_q, topk] = [2, 2, 8]", "got [2, 2, 7]"}},
      {"sparse_indices_last_stride", Entry::kReferenceSparse,
       [](F& f) { f.sargs.indices = make_tensor_strided(f.sparse_indices.data(), DType::kInt32, {2, 2, 8}, {2, 1, 4}); },
       kInvalid, {"indices", "stride 1", "[2, 1, 4]"}},
      {"sparse_indices_missing", Entry::kSparseArgs, [](F& f) { f.sargs.indices = TensorView(); }, kInvalid,
       {"indices", "[b, s_q, topk]", "undefined view"}},
      {"sparse_extra_indices_wrong_shape", Entry::kSparseArgs,
       [](F& f) { f.sargs.extra_indices = make_tensor(f.extra_indices.data(), DType::kInt32, {2, 1, 4}); }, kInvalid,
       {"extra_indices", "[b, s_q, extra_topk] = [2, 2, 4]", "got [2, 1, 4]"}},
      {"sparse_attn_sink_missing", Entry::kSparseArgs, [](F& f) { f.sargs.attn_sink = TensorView(); }, kInvalid,
       {"attn_sink", "[h_q]", "undefined view"}},
      {"sparse_attn_sink_unplanned", Entry::kReferenceSparse, [](F& f) { f.sshape.attn_sink = false; }, kInvalid,
       {"attn_sink", "undefined view (shape.attn_sink = false)", "[16]"}},
      {"sparse_attn_sink_bf16", Entry::kSparseArgs, [](F& f) { f.sargs.attn_sink.dtype = DType::kBFloat16; }, kInvalid,
       {"attn_sink", "float32", "got bfloat16"}},
      {"sparse_attn_sink_wrong_heads", Entry::kSparseArgs,
       [](F& f) { f.sargs.attn_sink = make_tensor(f.sink.data(), DType::kFloat32, {8}); }, kInvalid,
       {"attn_sink", "[h_q] = [16]", "got [8]"}},
      // ---- sparse decode: out, lse, softmax_scale
      {"sparse_out_float32_on_device_path", Entry::kSparseArgs, [](F& f) { f.sargs.out.dtype = DType::kFloat32; },
       kInvalid, {"out:", "bfloat16 (the dtype of q)", "got float32"}},
      {"sparse_lse_wrong_shape", Entry::kSparseArgs,
       [](F& f) { f.sargs.lse = make_tensor(f.lse.data(), DType::kFloat32, {2, 16, 2}); }, kInvalid,
       {"lse:", "[2, 2, 16]", "got [2, 16, 2]"}},
      {"sparse_softmax_scale_nan", Entry::kReferenceSparse, [](F& f) { f.sargs.softmax_scale = kNaNf; }, kInvalid,
       {"softmax_scale", "finite value > 0", "nan"}},
      // ---- write_kv
      {"kv_latent_int32", Entry::kWriteKV, [](F& f) { f.write.kv_latent.dtype = DType::kInt32; }, kInvalid,
       {"kv_latent", "bfloat16, float16 or float32", "got int32"}},
      {"kv_latent_width_576", Entry::kWriteKV,
       [](F& f) { f.write.kv_latent = make_tensor(f.latent.data(), DType::kFloat32, {2, 576}); }, kInvalid,
       {"kv_latent", "[n, 512]", "got [2, 576]"}},
      {"kv_latent_strided_columns", Entry::kReferenceWriteKV,
       [](F& f) { f.write.kv_latent = make_tensor_strided(f.latent.data(), DType::kFloat32, {1, 512}, {1024, 2}); },
       kInvalid, {"kv_latent", "stride 1", "[1024, 2]"}},
      {"k_rope_dtype_differs", Entry::kWriteKV, [](F& f) { f.write.k_rope.dtype = DType::kBFloat16; }, kInvalid,
       {"k_rope", "float32", "got bfloat16"}},
      {"k_rope_count_differs", Entry::kWriteKV,
       [](F& f) { f.write.k_rope = make_tensor(f.rope.data(), DType::kFloat32, {2, 64}); }, kInvalid,
       {"k_rope", "[3, 64]", "got [2, 64]"}},
      {"slots_float", Entry::kWriteKV, [](F& f) { f.write.slots.dtype = DType::kFloat32; }, kInvalid,
       {"slots", "int32 or int64", "got float32"}},
      {"slots_strided", Entry::kReferenceWriteKV, [](F& f) { f.write.slots.strides[0] = 3; }, kInvalid,
       {"slots", "contiguous", "[3]"}},
      {"slots_count_differs", Entry::kWriteKV,
       [](F& f) { f.write.slots = make_tensor(f.slots.data(), DType::kInt64, {2}); }, kInvalid, {"slots", "[3]", "got [2]"}},
      {"write_cache_page_size_16", Entry::kReferenceWriteKV,
       [](F& f) { f.write.cache.data = make_tensor(f.cache.data(), DType::kBFloat16, {16, 16, 1, 576}); }, kInvalid,
       {"cache.data", "page size 64", "page size 16"}},
      {"write_cache_on_cuda", Entry::kWriteKV, [](F& f) { f.write.cache.data.device = DeviceType::kCUDA; }, kInvalid,
       {"cache.data", "cuda:0"}},
      {"e4m3_overflow_nan_for_bf16", Entry::kWriteKV, [](F& f) { f.write.e4m3_overflow = E4M3Overflow::kNaN; },
       kInvalid, {"e4m3_overflow", "kSaturate for kv format bf16", "got kNaN"}},
      {"e4m3_overflow_nan_for_ds_mla", Entry::kReferenceWriteKV,
       [](F& f) {
         f.write.cache.format = KVFormat::kFP8DsMla;
         f.write.cache.data = make_tensor(f.cache.data(), DType::kUInt8, {1, kPageSize, kDsMlaBytesPerToken});
         f.write.e4m3_overflow = E4M3Overflow::kNaN;
       },
       kInvalid, {"e4m3_overflow", "fp8_ds_mla", "got kNaN"}},
      {"e4m3_overflow_out_of_enum", Entry::kWriteKV,
       [](F& f) { f.write.e4m3_overflow = static_cast<E4M3Overflow>(7); }, kInvalid,
       {"e4m3_overflow", "E4M3Overflow(7)"}},
      {"write_device_scale_for_bf16", Entry::kReferenceWriteKV,
       [](F& f) { f.write.cache.device_scale = make_tensor(f.scales.data(), DType::kFloat32, {1}); }, kInvalid,
       {"cache.device_scale", "undefined view for kv format bf16"}},
      {"write_device_scale_float16", Entry::kWriteKV,
       [](F& f) {
         f.write.cache = f.fp8_cache();
         f.write.cache.device_scale = make_tensor(f.scales.data(), DType::kFloat16, {1});
       },
       kInvalid, {"cache.device_scale", "float32", "got float16"}},
      {"write_device_scale_two_elements", Entry::kReferenceWriteKV,
       [](F& f) {
         f.write.cache = f.fp8_cache();
         f.write.cache.device_scale = make_tensor(f.scales.data(), DType::kFloat32, {2});
       },
       kInvalid, {"cache.device_scale", "one element", "[2]"}},
      {"write_device_scale_on_cuda", Entry::kWriteKV,
       [](F& f) {
         f.write.cache = f.fp8_cache();
         f.write.cache.device_scale = make_tensor(f.scales.data(), DType::kFloat32, {1}, DeviceType::kCUDA, 0);
       },
       kInvalid, {"cache.device_scale", "cuda:0"}},
  };
}

class BadInputTest : public ::testing::TestWithParam<BadInput> {};

TEST_P(BadInputTest, RejectedWithStatusNamingArgumentAndValue) {
  const BadInput& bad = GetParam();
  {
    Fixture valid;
    ASSERT_NO_THROW(call(bad.entry, valid)) << "the unbroken fixture must pass";
  }
  Fixture f;
  bad.breaks(f);
  try {
    call(bad.entry, f);
    FAIL() << bad.name << ": accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), bad.status) << bad.name << ": " << e.what();
    for (const std::string& part : bad.message_has)
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos)
          << bad.name << ": message lacks \"" << part << "\": " << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(Validation, BadInputTest, ::testing::ValuesIn(bad_inputs()),
                         [](const ::testing::TestParamInfo<BadInput>& info) { return std::string(info.param.name); });

TEST(Validation, SparseValidCallsPass) {
  Fixture f;
  EXPECT_NO_THROW(detail::validate_sparse_decode_shape(f.sshape));
  EXPECT_NO_THROW(detail::validate_sparse_decode_args(f.sargs, f.sshape, DeviceType::kCPU, 0));
  EXPECT_NO_THROW(detail::validate_sparse_lengths(f.topk_length, f.extra_topk_length, f.sshape, DeviceType::kCPU, 0));
  // Without an extra cache, lengths and sink; with one request whose q has any stride(0); page block size 1.
  f.no_extra();
  f.sshape.topk_length = f.sshape.attn_sink = false;
  f.sargs.attn_sink = TensorView();
  f.sargs.kv.data = make_tensor(f.cache.data(), DType::kBFloat16, {256, 1, 576});
  EXPECT_NO_THROW(detail::validate_sparse_decode_args(f.sargs, f.sshape, DeviceType::kCPU, 0));
  EXPECT_NO_THROW(detail::validate_sparse_lengths(TensorView(), TensorView(), f.sshape, DeviceType::kCPU, 0));
  f.sshape.batch_size = 1;
  f.sargs.q = make_tensor_strided(f.q.data(), DType::kBFloat16, {1, 2, 16, 576}, {7, 9216, 576, 1});
  f.sargs.out = make_tensor(f.out.data(), DType::kBFloat16, {1, 2, 16, kHeadDimV});
  f.sargs.lse = make_tensor(f.lse.data(), DType::kFloat32, {1, 2, 16});
  f.sargs.indices = make_tensor(f.sparse_indices.data(), DType::kInt32, {1, 2, Fixture::topk});
  EXPECT_NO_THROW(detail::validate_sparse_decode_args(f.sargs, f.sshape, DeviceType::kCPU, 0));
  // The dense path still requires page size 64 (the generalised cache check keeps decode's rule).
  f.args.kv.data = make_tensor(f.cache.data(), DType::kBFloat16, {128, 2, 1, 576});
  EXPECT_THROW(detail::validate_decode_args(f.args, f.shape, DeviceType::kCPU, 0), Error);
}

TEST(Validation, AtLeast35DistinctKinds) {
  std::set<std::string> names;
  for (const BadInput& bad : bad_inputs()) EXPECT_TRUE(names.insert(bad.name).second) << bad.name;
  EXPECT_GE(names.size(), 35u);
}

TEST(Validation, ValidCallsPass) {
  Fixture f;
  EXPECT_NO_THROW(detail::validate_decode_shape(f.shape));
  EXPECT_NO_THROW(detail::validate_decode_args(f.args, f.shape, DeviceType::kCPU, 0));
  EXPECT_NO_THROW(detail::validate_seqlens(f.args.cache_seqlens, 2, DeviceType::kCPU, 0));
  EXPECT_NO_THROW(detail::validate_write_kv_args(f.write, DeviceType::kCPU, 0));
  // FlashMLA's lse layout, a 3-D cache, a padded page stride and a one-page cache are all valid.
  f.args.lse = make_tensor_strided(f.lse.data(), DType::kFloat32, {2, 2, 16}, {32, 1, 2});
  f.args.kv.data = make_tensor_strided(f.cache.data(), DType::kBFloat16, {3, 64, 576}, {65 * 576, 576, 1});
  EXPECT_NO_THROW(detail::validate_decode_args(f.args, f.shape, DeviceType::kCPU, 0));
  f.args.kv.data = make_tensor(f.cache.data(), DType::kBFloat16, {1, 64, 1, 576});
  EXPECT_NO_THROW(detail::validate_decode_args(f.args, f.shape, DeviceType::kCPU, 0));
  // The same views checked for a CUDA device fail on the first tensor, naming both devices.
  try {
    detail::validate_decode_args(f.args, f.shape, DeviceType::kCUDA, 1);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("q: expected a tensor on cuda:1, got a tensor on cpu:0"), std::string::npos)
        << e.what();
  }
  // Device-held scales, with a 16-bit and with an e4m3 query (whose out is bf16), on the device path and the reference.
  for (bool fp8_query : {false, true}) {
    Fixture g;
    use_device_scales(g, fp8_query);
    EXPECT_NO_THROW(detail::validate_decode_shape(g.shape));
    EXPECT_NO_THROW(detail::validate_decode_args(g.args, g.shape, DeviceType::kCPU, 0));
    g.args.out = make_tensor(g.out64.data(), DType::kFloat64, {2, 2, 16, kHeadDimV});
    EXPECT_NO_THROW(reference::decode(g.args, g.shape));
  }
  // write_kv with n = 0 and null data is valid.
  f.write.kv_latent = make_tensor(nullptr, DType::kBFloat16, {0, 512});
  f.write.k_rope = make_tensor(nullptr, DType::kBFloat16, {0, 64});
  f.write.slots = make_tensor(nullptr, DType::kInt32, {0});
  EXPECT_NO_THROW(detail::validate_write_kv_args(f.write, DeviceType::kCPU, 0));
}

TEST(Validation, Workspace) {
  alignas(256) static unsigned char buffer[1024];
  EXPECT_NO_THROW(detail::validate_workspace(buffer, 1024, 1000));
  auto expect = [](const void* ws, size_t given, size_t needed, Status status, std::vector<std::string> parts) {
    try {
      detail::validate_workspace(ws, given, needed);
      FAIL() << "accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), status) << e.what();
      for (const std::string& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
    }
  };
  expect(nullptr, 1024, 10, kInvalid, {"workspace", "nullptr"});
  expect(buffer + 16, 1000, 10, kInvalid, {"workspace", "256-byte aligned", "% 256 = 16"});
  expect(buffer, 999, 1000, Status::kWorkspaceTooSmall, {"workspace_bytes", ">= 1000", "got 999"});
}

TEST(Validation, ReferenceTakesWiderOutputTypes) {
  Fixture f;
  std::vector<double> lse64(f.lse.size());
  f.args.out = make_tensor(f.out64.data(), DType::kFloat64, {2, 2, 16, 512});
  f.args.lse = make_tensor(lse64.data(), DType::kFloat64, {2, 2, 16});
  EXPECT_NO_THROW(detail::validate_decode_args(f.args, f.shape, DeviceType::kCPU, 0, detail::DecodeOutputs::kReference));
  EXPECT_THROW(detail::validate_decode_args(f.args, f.shape, DeviceType::kCPU, 0), Error);
}

}  // namespace
}  // namespace openmla
