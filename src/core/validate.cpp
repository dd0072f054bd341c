// Host-side argument checks. Every failure names the argument, the expectation and what came;
// docs/validation.md lists each check (and the device-side guards that complement them).
#include "core/validate.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "core/check.h"
#include "openmla/kv_format.h"

namespace openmla::detail {
namespace {

constexpr int kRowAlignBytes = 16;        // rows are read/written with 16-byte vector accesses
constexpr uintptr_t kWorkspaceAlign = 256;  // the workspace carver aligns regions to 256 bytes

std::string device_str(DeviceType type, int id) {
  if (type == DeviceType::kCPU) return concat("cpu:", id);
  if (type == DeviceType::kCUDA) return concat("cuda:", id);
  return concat("device_type(", static_cast<int>(type), "):", id);
}

std::string shape_list(std::initializer_list<int64_t> dims) {
  std::string s = "[";
  bool first = true;
  for (int64_t d : dims) {
    if (!first) s += ", ";
    s += std::to_string(d);
    first = false;
  }
  return s + "]";
}

std::string float_str(float x) { return concat(x); }

void check_defined(const TensorView& t, const char* name, const char* expected_shape) {
  if (t.ndim <= 0 || t.ndim > kMaxTensorDims)
    fail_arg(name, concat("a tensor of shape ", expected_shape),
             t.ndim == 0 ? std::string("an undefined view (ndim 0)") : concat("ndim ", t.ndim));
}

void check_device(const TensorView& t, const char* name, DeviceType device, int device_id) {
  if (t.device != device || t.device_id != device_id)
    fail_arg(name, concat("a tensor on ", device_str(device, device_id)),
             concat("a tensor on ", device_str(t.device, t.device_id)));
}

void check_dtype(const TensorView& t, const char* name, DType expected) {
  if (t.dtype != expected) fail_arg(name, concat("dtype ", dtype_name(expected)), dtype_name(t.dtype));
}

// Shape equality with the symbolic form beside the numbers: "[b, s_q, h_q, 576] = [4, 1, 16, 576]".
void check_shape(const TensorView& t, const char* name, const char* symbolic,
                 std::initializer_list<int64_t> expected) {
  bool ok = t.ndim == static_cast<int>(expected.size());
  int d = 0;
  for (int64_t e : expected) {
    if (!ok) break;
    ok = t.shape[d++] == e;
  }
  if (!ok)
    fail_arg(name, concat("shape ", symbolic, " = ", shape_list(expected)), t.shape_str());
}

void check_shape_vec(const TensorView& t, const char* name, const char* symbolic, const std::vector<int64_t>& expected) {
  bool ok = t.ndim == static_cast<int>(expected.size());
  for (int d = 0; ok && d < t.ndim; ++d) ok = t.shape[d] == expected[d];
  if (!ok) {
    std::string numbers = "[";
    for (size_t d = 0; d < expected.size(); ++d) numbers += (d ? ", " : "") + std::to_string(expected[d]);
    fail_arg(name, concat("shape ", symbolic, " = ", numbers, "]"), t.shape_str());
  }
}

void check_data(const TensorView& t, const char* name) {
  if (t.data == nullptr && t.numel() > 0)
    fail_arg(name, concat("a non-null data pointer for shape ", t.shape_str()), "nullptr");
}

// Strides of size-1 dimensions are never multiplied by a non-zero index, so they are not checked.
void check_last_stride_one(const TensorView& t, const char* name) {
  const int last = t.ndim - 1;
  if (t.shape[last] > 1 && t.strides[last] != 1)
    fail_arg(name, "last-dimension stride 1 (contiguous rows)",
             concat("strides ", t.strides_str(), " for shape ", t.shape_str()));
}

void check_non_negative_strides(const TensorView& t, const char* name) {
  for (int d = 0; d < t.ndim; ++d)
    if (t.shape[d] > 1 && t.strides[d] < 0)
      fail_arg(name, "non-negative strides",
               concat("strides ", t.strides_str(), " for shape ", t.shape_str()));
}

void check_contiguous(const TensorView& t, const char* name) {
  if (!t.is_contiguous())
    fail_arg(name, "a contiguous tensor",
             concat("strides ", t.strides_str(), " for shape ", t.shape_str()));
}

// Data pointer and every outer stride (in bytes) a multiple of 16: each row starts 16-byte aligned.
void check_row_alignment(const TensorView& t, const char* name) {
  const auto address = reinterpret_cast<uintptr_t>(t.data);
  if (address % kRowAlignBytes != 0)
    fail_arg(name, concat("a ", kRowAlignBytes, "-byte aligned data pointer"),
             concat("address ", t.data, " (address % ", kRowAlignBytes, " = ", address % kRowAlignBytes, ")"));
  const int64_t elem = dtype_size(t.dtype);
  for (int d = 0; d + 1 < t.ndim; ++d)
    if (t.shape[d] > 1 && (t.strides[d] * elem) % kRowAlignBytes != 0)
      fail_arg(name, concat("strides whose byte sizes are multiples of ", kRowAlignBytes, " (aligned rows)"),
               concat("strides ", t.strides_str(), " (elements of ", elem, " bytes) in dimension ", d));
}

// Written tensors: no two index tuples may share an address. Sufficient rule (the one strided
// row-major and transposed layouts such as FlashMLA's lse satisfy): ordered by stride, each stride
// exceeds the span of all smaller-stride dimensions.
void check_no_overlap(const TensorView& t, const char* name) {
  std::vector<std::pair<int64_t, int64_t>> dims;  // (stride, extent) of dimensions of size > 1
  for (int d = 0; d < t.ndim; ++d) {
    if (t.shape[d] <= 1) continue;
    if (t.strides[d] == 0)
      fail_arg(name, "a non-overlapping layout (no zero stride on a dimension of size > 1)",
               concat("strides ", t.strides_str(), " for shape ", t.shape_str()));
    dims.emplace_back(t.strides[d], t.shape[d]);
  }
  std::sort(dims.begin(), dims.end());
  int64_t span = 0;  // largest offset reachable with the dimensions seen so far
  for (const auto& [stride, extent] : dims) {
    if (stride <= span)
      fail_arg(name, "a non-overlapping layout (each stride larger than the span of the smaller ones)",
               concat("strides ", t.strides_str(), " for shape ", t.shape_str()));
    span += (extent - 1) * stride;
  }
}

// A device-held scale: float32, one element (any shape of one element, e.g. [1] or [1, 1]). Its value is data,
// checked where it is read (kDeviceErrorScale).
void check_scale_tensor(const TensorView& t, const char* name, DeviceType device, int device_id) {
  check_defined(t, name, "[1]");
  check_device(t, name, device, device_id);
  check_dtype(t, name, DType::kFloat32);
  if (t.numel() != 1) fail_arg(name, "one element (shape [1])", t.shape_str());
  check_data(t, name);
}

bool is_valid_format(KVFormat f) { return static_cast<unsigned>(f) <= static_cast<unsigned>(KVFormat::kFP8DsMla); }

// Page sizes validate_kv_cache_named accepts: decode's fixed 64, or any >= 1 (sparse decode addresses tokens by
// slot, page * page_block_size + offset, so the page size is the cache's own).
constexpr int64_t kAnyPageSize = 0;

void validate_kv_cache_named(const KVCache& kv, const char* prefix, DeviceType device, int device_id,
                             int64_t page_size = kPageSize) {
  const std::string format_name = concat(prefix, ".format");
  const std::string data_name_s = concat(prefix, ".data");
  const char* data_name = data_name_s.c_str();
  if (!is_valid_format(kv.format))
    fail_arg(format_name.c_str(), "one of bf16, fp16, fp8_e4m3, fp8_ds_mla",
             concat("KVFormat(", static_cast<int>(kv.format), ")"));
  const int64_t row = kv.format == KVFormat::kFP8DsMla ? kDsMlaBytesPerToken : kHeadDimQK;  // W
  const bool any_page_size = page_size == kAnyPageSize;
  const std::string page_dim = any_page_size ? std::string("page_block_size") : concat(page_size);
  const std::string expected_shape =
      concat("[num_pages, ", page_dim, ", 1, ", row, "] or [num_pages, ", page_dim, ", ", row, "]");
  check_defined(kv.data, data_name, expected_shape.c_str());
  check_device(kv.data, data_name, device, device_id);

  const TensorView& t = kv.data;
  switch (kv.format) {
    case KVFormat::kBF16: {
      if (t.dtype != DType::kBFloat16)
        fail_arg(data_name, "dtype bfloat16 for kv format bf16", dtype_name(t.dtype));
      break;
    }
    case KVFormat::kFP16: {
      if (t.dtype != DType::kFloat16)
        fail_arg(data_name, "dtype float16 for kv format fp16", dtype_name(t.dtype));
      break;
    }
    case KVFormat::kFP8E4M3:
    case KVFormat::kFP8DsMla: {
      if (t.dtype != DType::kFloat8E4M3 && t.dtype != DType::kUInt8)
        fail_arg(data_name, concat("dtype float8_e4m3 or uint8 for kv format ", kv_format_name(kv.format)),
                 dtype_name(t.dtype));
      break;
    }
  }

  if (t.ndim != 3 && t.ndim != 4)
    fail_arg(data_name, concat("shape ", expected_shape), t.shape_str());
  const int w_dim = t.ndim - 1;
  if (any_page_size ? t.shape[1] < 1 : t.shape[1] != page_size)
    fail_arg(data_name,
             any_page_size ? concat("page size >= 1 (dimension 1) in shape ", expected_shape)
                           : concat("page size ", page_size, " (dimension 1) in shape ", expected_shape),
             concat("page size ", t.shape[1], " in ", t.shape_str()));
  const int64_t tokens_per_page = t.shape[1];
  if (t.ndim == 4 && t.shape[2] != 1)
    fail_arg(data_name, concat("1 KV head (dimension 2) in shape ", expected_shape),
             concat(t.shape[2], " KV heads in ", t.shape_str()));
  if (t.shape[w_dim] != row)
    fail_arg(data_name, concat("a token row of ", row, " elements for kv format ", kv_format_name(kv.format),
                               " (shape ", expected_shape, ")"),
             concat(t.shape[w_dim], " in ", t.shape_str()));
  const int64_t num_pages = t.shape[0];
  if (num_pages < 1 || num_pages >= (int64_t{1} << 31))
    fail_arg(data_name, "num_pages (dimension 0) in [1, 2^31)", concat(num_pages, " in ", t.shape_str()));
  check_data(t, data_name);
  if (t.strides[w_dim] != 1)
    fail_arg(data_name, "last-dimension stride 1 (contiguous token rows)",
             concat("strides ", t.strides_str(), " for shape ", t.shape_str()));
  if (t.shape[1] > 1 && t.strides[1] != row)
    fail_arg(data_name, concat("token stride (dimension 1) ", row, " (dense tokens inside a page)"),
             concat("strides ", t.strides_str(), " for shape ", t.shape_str()));
  const int64_t elem = dtype_size(t.dtype);
  const int64_t page_stride = t.strides[0];
  if (num_pages > 1 && (page_stride < tokens_per_page * row || (page_stride * elem) % kRowAlignBytes != 0))
    fail_arg(data_name, concat("page stride (dimension 0) >= ", tokens_per_page * row, " elements and a multiple of ",
                               kRowAlignBytes, " bytes"),
             concat("strides ", t.strides_str(), " for shape ", t.shape_str()));
  const auto address = reinterpret_cast<uintptr_t>(t.data);
  if (address % kRowAlignBytes != 0)
    fail_arg(data_name, concat("a ", kRowAlignBytes, "-byte aligned data pointer"),
             concat("address ", t.data, " (address % ", kRowAlignBytes, " = ", address % kRowAlignBytes, ")"));
  if (kv.device_scale.defined()) {
    const std::string scale_name = concat(prefix, ".device_scale");
    if (kv.format != KVFormat::kFP8E4M3)
      fail_arg(scale_name.c_str(), concat("an undefined view for kv format ", kv_format_name(kv.format),
                                          " (device-held scales are for per-tensor fp8_e4m3)"),
               concat("a tensor of shape ", kv.device_scale.shape_str()));
    check_scale_tensor(kv.device_scale, scale_name.c_str(), device, device_id);
  } else if (kv.format == KVFormat::kFP8E4M3 && !(std::isfinite(kv.scale) && kv.scale > 0.0f)) {
    fail_arg(concat(prefix, ".scale").c_str(), "a finite value > 0 for kv format fp8_e4m3", float_str(kv.scale));
  }
}

bool is_half_type(DType t) { return t == DType::kBFloat16 || t == DType::kFloat16; }

// out [tokens..., 512] and lse [tokens...] of a decode call (token_dims: [b, s_q, h_q] or [total_q, h_q]).
// kDevice: out in out_dtype (why: the reason named in the message, or none), lse float32; kReference: wider types.
void check_outputs(const TensorView& out, const TensorView& lse, const char* out_dims, const char* lse_dims,
                   const std::vector<int64_t>& token_dims, DType out_dtype, const char* why, DeviceType device,
                   int device_id, DecodeOutputs outputs) {
  check_defined(out, "out", out_dims);
  check_device(out, "out", device, device_id);
  if (outputs == DecodeOutputs::kDevice) {
    if (out.dtype != out_dtype)
      fail_arg("out", why ? concat("dtype ", dtype_name(out_dtype), " (", why, ")") : concat("dtype ", dtype_name(out_dtype)),
               dtype_name(out.dtype));
  } else if (!is_half_type(out.dtype) && out.dtype != DType::kFloat32 && out.dtype != DType::kFloat64) {
    fail_arg("out", "dtype float64, float32, bfloat16 or float16", dtype_name(out.dtype));
  }
  std::vector<int64_t> out_shape = token_dims;
  out_shape.push_back(kHeadDimV);
  check_shape_vec(out, "out", out_dims, out_shape);
  check_data(out, "out");
  check_last_stride_one(out, "out");
  check_non_negative_strides(out, "out");
  check_no_overlap(out, "out");
  check_row_alignment(out, "out");

  check_defined(lse, "lse", lse_dims);
  check_device(lse, "lse", device, device_id);
  if (outputs == DecodeOutputs::kDevice) {
    check_dtype(lse, "lse", DType::kFloat32);
  } else if (lse.dtype != DType::kFloat32 && lse.dtype != DType::kFloat64) {
    fail_arg("lse", "dtype float32 or float64", dtype_name(lse.dtype));
  }
  check_shape_vec(lse, "lse", lse_dims, token_dims);
  check_data(lse, "lse");
  check_non_negative_strides(lse, "lse");
  check_no_overlap(lse, "lse");
}

}  // namespace

void validate_decode_shape(const DecodeShape& shape) {
  if (shape.batch_size < 1) fail_arg("shape.batch_size", ">= 1", shape.batch_size);
  if (shape.q_len < 1 || shape.q_len > kMaxQueryLen)
    fail_arg("shape.q_len", concat("a value in [1, ", kMaxQueryLen, "]"), shape.q_len);
  // Any count: the kernels' row layout pads it to a power of two >= 8 (kernels/common/schedule.h, row_layout_heads).
  const int h = shape.num_heads;
  if (h < 1 || h > 128) fail_arg("shape.num_heads", "a value in [1, 128]", h);
  if (!is_valid_format(shape.kv_format))
    fail_arg("shape.kv_format", "one of bf16, fp16, fp8_e4m3, fp8_ds_mla",
             concat("KVFormat(", static_cast<int>(shape.kv_format), ")"));
  if (shape.device_scales && shape.kv_format != KVFormat::kFP8E4M3)
    fail_arg("shape.device_scales", concat("false for kv format ", kv_format_name(shape.kv_format),
                                           " (device-held scales are for per-tensor fp8_e4m3)"),
             "true");
  if (shape.q_dtype == DType::kFloat8E4M3) {
    if (shape.kv_format != KVFormat::kFP8E4M3 || !shape.device_scales)
      fail_arg("shape.q_dtype", "bfloat16 or float16 (float8_e4m3 queries need kv format fp8_e4m3 and device_scales)",
               concat("float8_e4m3 with kv format ", kv_format_name(shape.kv_format), " and device_scales ",
                      shape.device_scales ? "true" : "false"));
  } else if (!is_half_type(shape.q_dtype)) {
    fail_arg("shape.q_dtype", "bfloat16 or float16 (or float8_e4m3 with kv format fp8_e4m3)",
             dtype_name(shape.q_dtype));
  }
  if (shape.query_layout != QueryLayout::kUniform && shape.query_layout != QueryLayout::kRagged)
    fail_arg("shape.query_layout", "kUniform or kRagged", concat("QueryLayout(", static_cast<int>(shape.query_layout), ")"));
  switch (shape.tree_mask) {
    case TreeMask::kNone: break;
    case TreeMask::kShared: break;
    case TreeMask::kPerRequest:
      if (shape.query_layout != QueryLayout::kUniform)
        fail_arg("shape.tree_mask", "kShared or kPacked with ragged queries (kPerRequest needs uniform queries)",
                 tree_mask_name(shape.tree_mask));
      break;
    case TreeMask::kPacked:
      if (shape.query_layout != QueryLayout::kRagged)
        fail_arg("shape.tree_mask", "kShared or kPerRequest with uniform queries (kPacked needs ragged queries)",
                 tree_mask_name(shape.tree_mask));
      break;
    default:
      fail_arg("shape.tree_mask", "one of kNone, kShared, kPerRequest, kPacked",
               concat("TreeMask(", static_cast<int>(shape.tree_mask), ")"));
  }
  if (shape.tree_mask != TreeMask::kNone && shape.q_len > kMaxTreeQueryLen)
    fail_arg("shape.q_len", concat("a value in [1, ", kMaxTreeQueryLen, "] with a tree mask (one 64-bit word per row)"),
             shape.q_len);
}

void validate_seqlens(const TensorView& cache_seqlens, int batch_size, DeviceType expected_device,
                      int device_id) {
  const char* name = "cache_seqlens";
  check_defined(cache_seqlens, name, "[b]");
  check_device(cache_seqlens, name, expected_device, device_id);
  check_dtype(cache_seqlens, name, DType::kInt32);
  check_shape(cache_seqlens, name, "[b]", {batch_size});
  check_data(cache_seqlens, name);
  check_contiguous(cache_seqlens, name);
}

void validate_kv_cache(const KVCache& kv, DeviceType expected_device, int device_id) {
  validate_kv_cache_named(kv, "kv", expected_device, device_id);
}

void validate_decode_args(const DecodeArgs& args, const DecodeShape& shape, DeviceType expected_device,
                          int device_id) {
  validate_decode_args(args, shape, expected_device, device_id, DecodeOutputs::kDevice);
}

void validate_decode_args(const DecodeArgs& args, const DecodeShape& shape, DeviceType expected_device,
                          int device_id, DecodeOutputs outputs) {
  validate_decode_shape(shape);
  const int64_t b = shape.batch_size, s_q = shape.q_len, h_q = shape.num_heads;
  const bool ragged = shape.query_layout == QueryLayout::kRagged;
  // The query-token dimensions of q, out and lse: [b, s_q] or [total_q] (q's first dimension).
  const TensorView& q = args.q;
  const char* q_dims = ragged ? "[total_q, h_q, 576]" : "[b, s_q, h_q, 576]";
  check_defined(q, "q", q_dims);
  check_device(q, "q", expected_device, device_id);
  if (q.dtype != shape.q_dtype)
    fail_arg("q", concat("dtype ", dtype_name(shape.q_dtype), " (the planned shape.q_dtype)"), dtype_name(q.dtype));
  int64_t total_q = 0;
  if (ragged) {
    if (q.ndim != 3 || q.shape[0] < 1)
      fail_arg("q", "shape [total_q, h_q, 576] with total_q >= 1 (ragged queries)", q.shape_str());
    total_q = q.shape[0];
    check_shape(q, "q", q_dims, {total_q, h_q, kHeadDimQK});
  } else {
    check_shape(q, "q", q_dims, {b, s_q, h_q, kHeadDimQK});
  }
  check_data(q, "q");
  check_last_stride_one(q, "q");
  check_non_negative_strides(q, "q");
  check_row_alignment(q, "q");
  if (shape.q_dtype == DType::kFloat8E4M3 && ragged && total_q > b * s_q)
    fail_arg("q", concat("total_q <= b * q_len = ", b * s_q, " for float8_e4m3 queries (the widened query's workspace)"),
             concat("total_q ", total_q));
  if (shape.q_dtype == DType::kFloat8E4M3) {
    check_scale_tensor(args.q_scale, "q_scale", expected_device, device_id);
  } else if (args.q_scale.defined()) {
    fail_arg("q_scale", concat("an undefined view for a ", dtype_name(shape.q_dtype), " query"),
             concat("a tensor of shape ", args.q_scale.shape_str()));
  }

  const TensorView& indptr = args.q_indptr;
  if (ragged) {
    check_defined(indptr, "q_indptr", "[b + 1] (ragged queries)");
    check_device(indptr, "q_indptr", expected_device, device_id);
    check_dtype(indptr, "q_indptr", DType::kInt32);
    check_shape(indptr, "q_indptr", "[b + 1]", {b + 1});
    check_data(indptr, "q_indptr");
    check_contiguous(indptr, "q_indptr");
  } else if (indptr.defined()) {
    fail_arg("q_indptr", "an undefined view with uniform queries (shape.query_layout = uniform)",
             concat("a tensor of shape ", indptr.shape_str()));
  }

  const TensorView& mask = args.mask;
  if (shape.tree_mask != TreeMask::kNone) {
    const char* mask_dims = shape.tree_mask == TreeMask::kShared      ? "[s_q]"
                            : shape.tree_mask == TreeMask::kPerRequest ? "[b, s_q]"
                                                                       : "[total_q]";
    check_defined(mask, "mask", mask_dims);
    check_device(mask, "mask", expected_device, device_id);
    check_dtype(mask, "mask", DType::kInt64);
    if (shape.tree_mask == TreeMask::kShared) {
      check_shape(mask, "mask", mask_dims, {s_q});
    } else if (shape.tree_mask == TreeMask::kPerRequest) {
      check_shape(mask, "mask", mask_dims, {b, s_q});
    } else {
      check_shape(mask, "mask", mask_dims, {total_q});
    }
    check_data(mask, "mask");
    check_contiguous(mask, "mask");
  } else if (mask.defined()) {
    fail_arg("mask", "an undefined view without a tree mask (shape.tree_mask = none)",
             concat("a tensor of shape ", mask.shape_str()));
  }

  validate_kv_cache_named(args.kv, "kv", expected_device, device_id);
  if (args.kv.format != shape.kv_format)
    fail_arg("kv.format", concat(kv_format_name(shape.kv_format), " (the planned shape.kv_format)"),
             kv_format_name(args.kv.format));
  if (shape.device_scales != args.kv.device_scale.defined())
    fail_arg("kv.device_scale",
             shape.device_scales ? "a float32 tensor of one element (the plan has device_scales)"
                                 : "an undefined view (the plan has no device_scales; plan with them to use one)",
             args.kv.device_scale.defined() ? concat("a tensor of shape ", args.kv.device_scale.shape_str())
                                            : std::string("an undefined view"));

  const TensorView& table = args.block_table;
  check_defined(table, "block_table", "[b, max_pages]");
  check_device(table, "block_table", expected_device, device_id);
  check_dtype(table, "block_table", DType::kInt32);
  if (table.ndim != 2 || table.shape[0] != b)
    fail_arg("block_table", concat("shape [b, max_pages] = [", b, ", max_pages]"), table.shape_str());
  if (table.shape[1] < 1)
    fail_arg("block_table", "max_pages (dimension 1) >= 1", concat(table.shape[1], " in ", table.shape_str()));
  check_data(table, "block_table");
  check_last_stride_one(table, "block_table");
  check_non_negative_strides(table, "block_table");

  validate_seqlens(args.cache_seqlens, shape.batch_size, expected_device, device_id);

  const char* out_dims = ragged ? "[total_q, h_q, 512]" : "[b, s_q, h_q, 512]";
  const char* lse_dims = ragged ? "[total_q, h_q]" : "[b, s_q, h_q]";
  const std::vector<int64_t> token_dims = ragged ? std::vector<int64_t>{total_q, h_q} : std::vector<int64_t>{b, s_q, h_q};
  // FlashMLA's FP8 decode writes bf16 for an e4m3 query too.
  const DType out_dtype = shape.q_dtype == DType::kFloat8E4M3 ? DType::kBFloat16 : shape.q_dtype;
  check_outputs(args.out, args.lse, out_dims, lse_dims, token_dims, out_dtype,
                shape.q_dtype == DType::kFloat8E4M3 ? nullptr : "the dtype of q", expected_device, device_id, outputs);

  if (!(std::isfinite(args.softmax_scale) && args.softmax_scale > 0.0f))
    fail_arg("softmax_scale", "a finite value > 0", float_str(args.softmax_scale));
}

void validate_sparse_decode_shape(const SparseDecodeShape& shape) {
  if (shape.batch_size < 1) fail_arg("shape.batch_size", ">= 1", shape.batch_size);
  if (shape.q_len < 1 || shape.q_len > kMaxSparseQueryLen)
    fail_arg("shape.q_len", concat("a value in [1, ", kMaxSparseQueryLen, "] (sparse decode)"), shape.q_len);
  const int h = shape.num_heads;
  if (h < 1 || h > 128) fail_arg("shape.num_heads", "a value in [1, 128]", h);
  if (!is_half_type(shape.q_dtype))
    fail_arg("shape.q_dtype", "bfloat16 or float16 (sparse decode)", dtype_name(shape.q_dtype));
  if (!is_valid_format(shape.kv_format))
    fail_arg("shape.kv_format", "one of bf16, fp16, fp8_e4m3, fp8_ds_mla",
             concat("KVFormat(", static_cast<int>(shape.kv_format), ")"));
  if (shape.topk < 1 || shape.topk > kMaxSparseTopk)
    fail_arg("shape.topk", concat("a value in [1, ", kMaxSparseTopk, "]"), shape.topk);
  if (shape.extra_topk < 0 || shape.extra_topk > kMaxSparseTopk)
    fail_arg("shape.extra_topk", concat("a value in [0, ", kMaxSparseTopk, "] (0 = no extra cache)"), shape.extra_topk);
  if (shape.extra_topk_length && shape.extra_topk == 0)
    fail_arg("shape.extra_topk_length", "false without an extra cache (shape.extra_topk = 0)", "true");
}

namespace {

// A plan()-time length tensor: [b] int32 contiguous when the shape has it, else undefined.
void check_length_tensor(const TensorView& t, const char* name, bool planned, int batch_size, DeviceType device,
                         int device_id) {
  if (!planned) {
    if (t.defined())
      fail_arg(name, concat("an undefined view (shape.", name, " = false)"), concat("a tensor of shape ", t.shape_str()));
    return;
  }
  check_defined(t, name, "[b]");
  check_device(t, name, device, device_id);
  check_dtype(t, name, DType::kInt32);
  check_shape(t, name, "[b]", {batch_size});
  check_data(t, name);
  check_contiguous(t, name);
}

// indices / extra_indices: [b, s_q, k] int32, last dim contiguous.
void check_index_tensor(const TensorView& t, const char* name, const char* dims, int64_t b, int64_t s_q, int64_t k,
                        DeviceType device, int device_id) {
  check_defined(t, name, dims);
  check_device(t, name, device, device_id);
  check_dtype(t, name, DType::kInt32);
  check_shape(t, name, dims, {b, s_q, k});
  check_data(t, name);
  check_last_stride_one(t, name);
  check_non_negative_strides(t, name);
}

void check_sparse_cache(const KVCache& kv, const char* prefix, KVFormat planned, DeviceType device, int device_id) {
  validate_kv_cache_named(kv, prefix, device, device_id, kAnyPageSize);
  if (kv.format != planned)
    fail_arg(concat(prefix, ".format").c_str(), concat(kv_format_name(planned), " (the planned shape.kv_format)"),
             kv_format_name(kv.format));
}

}  // namespace

void validate_sparse_lengths(const TensorView& topk_length, const TensorView& extra_topk_length,
                             const SparseDecodeShape& shape, DeviceType expected_device, int device_id) {
  check_length_tensor(topk_length, "topk_length", shape.topk_length, shape.batch_size, expected_device, device_id);
  check_length_tensor(extra_topk_length, "extra_topk_length", shape.extra_topk_length, shape.batch_size,
                      expected_device, device_id);
}

void validate_sparse_decode_args(const SparseDecodeArgs& args, const SparseDecodeShape& shape,
                                 DeviceType expected_device, int device_id, DecodeOutputs outputs) {
  validate_sparse_decode_shape(shape);
  const int64_t b = shape.batch_size, s_q = shape.q_len, h_q = shape.num_heads;
  const TensorView& q = args.q;
  const char* q_dims = "[b, s_q, h_q, 576]";
  check_defined(q, "q", q_dims);
  check_device(q, "q", expected_device, device_id);
  if (q.dtype != shape.q_dtype)
    fail_arg("q", concat("dtype ", dtype_name(shape.q_dtype), " (the planned shape.q_dtype)"), dtype_name(q.dtype));
  check_shape(q, "q", q_dims, {b, s_q, h_q, kHeadDimQK});
  check_data(q, "q");
  check_last_stride_one(q, "q");
  check_non_negative_strides(q, "q");
  check_row_alignment(q, "q");
  // Query token t = r * s_q + i is read at t * stride(1); with one request stride(0) is never used.
  if (b > 1 && q.strides[0] != s_q * q.strides[1])
    fail_arg("q", concat("stride(0) == s_q * stride(1) = ", s_q * q.strides[1],
                         " (its tokens are addressed as one [b * s_q] dimension)"),
             concat("strides ", q.strides_str(), " for shape ", q.shape_str()));

  check_sparse_cache(args.kv, "kv", shape.kv_format, expected_device, device_id);
  check_index_tensor(args.indices, "indices", "[b, s_q, topk]", b, s_q, shape.topk, expected_device, device_id);

  if (shape.extra_topk > 0) {
    check_sparse_cache(args.extra_kv, "extra_kv", shape.kv_format, expected_device, device_id);
    check_index_tensor(args.extra_indices, "extra_indices", "[b, s_q, extra_topk]", b, s_q, shape.extra_topk,
                       expected_device, device_id);
    // Both caches' keys meet in one softmax whose scores carry one per-tensor scale: the extra cache's must be
    // the main one's (the same float, or the same device tensor).
    if (shape.kv_format == KVFormat::kFP8E4M3) {
      if (args.extra_kv.device_scale.data != args.kv.device_scale.data)
        fail_arg("extra_kv.device_scale", "the main cache's device_scale (one per-tensor scale for both caches)",
                 args.extra_kv.device_scale.defined() ? concat("another tensor (", args.extra_kv.device_scale.data, ")")
                                                      : std::string("an undefined view"));
      if (!args.kv.device_scale.defined() && args.extra_kv.scale != args.kv.scale)
        fail_arg("extra_kv.scale", concat("the main cache's scale ", float_str(args.kv.scale),
                                          " (one per-tensor scale for both caches)"),
                 float_str(args.extra_kv.scale));
    }
  } else {
    if (args.extra_kv.data.defined())
      fail_arg("extra_kv.data", "an undefined view without an extra cache (shape.extra_topk = 0)",
               concat("a tensor of shape ", args.extra_kv.data.shape_str()));
    if (args.extra_kv.device_scale.defined())
      fail_arg("extra_kv.device_scale", "an undefined view without an extra cache (shape.extra_topk = 0)",
               concat("a tensor of shape ", args.extra_kv.device_scale.shape_str()));
    if (args.extra_indices.defined())
      fail_arg("extra_indices", "an undefined view without an extra cache (shape.extra_topk = 0)",
               concat("a tensor of shape ", args.extra_indices.shape_str()));
  }

  const TensorView& sink = args.attn_sink;
  if (shape.attn_sink) {
    check_defined(sink, "attn_sink", "[h_q]");
    check_device(sink, "attn_sink", expected_device, device_id);
    check_dtype(sink, "attn_sink", DType::kFloat32);
    check_shape(sink, "attn_sink", "[h_q]", {h_q});
    check_data(sink, "attn_sink");
    check_contiguous(sink, "attn_sink");
  } else if (sink.defined()) {
    fail_arg("attn_sink", "an undefined view (shape.attn_sink = false)", concat("a tensor of shape ", sink.shape_str()));
  }

  check_outputs(args.out, args.lse, "[b, s_q, h_q, 512]", "[b, s_q, h_q]", {b, s_q, h_q}, shape.q_dtype,
                "the dtype of q", expected_device, device_id, outputs);

  if (!(std::isfinite(args.softmax_scale) && args.softmax_scale > 0.0f))
    fail_arg("softmax_scale", "a finite value > 0", float_str(args.softmax_scale));
}

void validate_write_kv_args(const WriteKVArgs& args, DeviceType expected_device, int device_id) {
  const TensorView& latent = args.kv_latent;
  check_defined(latent, "kv_latent", "[n, 512]");
  check_device(latent, "kv_latent", expected_device, device_id);
  if (!is_half_type(latent.dtype) && latent.dtype != DType::kFloat32)
    fail_arg("kv_latent", "dtype bfloat16, float16 or float32", dtype_name(latent.dtype));
  if (latent.ndim != 2 || latent.shape[1] != kHeadDimV)
    fail_arg("kv_latent", "shape [n, 512]", latent.shape_str());
  const int64_t n = latent.shape[0];
  check_data(latent, "kv_latent");
  check_last_stride_one(latent, "kv_latent");
  check_non_negative_strides(latent, "kv_latent");

  const TensorView& rope = args.k_rope;
  check_defined(rope, "k_rope", "[n, 64]");
  check_device(rope, "k_rope", expected_device, device_id);
  if (rope.dtype != latent.dtype)
    fail_arg("k_rope", concat("dtype ", dtype_name(latent.dtype), " (the dtype of kv_latent)"), dtype_name(rope.dtype));
  check_shape(rope, "k_rope", "[n, 64]", {n, kRopeDim});
  check_data(rope, "k_rope");
  check_last_stride_one(rope, "k_rope");
  check_non_negative_strides(rope, "k_rope");

  const TensorView& slots = args.slots;
  check_defined(slots, "slots", "[n]");
  check_device(slots, "slots", expected_device, device_id);
  if (slots.dtype != DType::kInt32 && slots.dtype != DType::kInt64)
    fail_arg("slots", "dtype int32 or int64", dtype_name(slots.dtype));
  check_shape(slots, "slots", "[n]", {n});
  check_data(slots, "slots");
  check_contiguous(slots, "slots");

  validate_kv_cache_named(args.cache, "cache", expected_device, device_id);
  if (args.e4m3_overflow != E4M3Overflow::kSaturate && args.e4m3_overflow != E4M3Overflow::kNaN)
    fail_arg("e4m3_overflow", "kSaturate or kNaN", concat("E4M3Overflow(", static_cast<int>(args.e4m3_overflow), ")"));
  // Only per-tensor fp8_e4m3 values can round past 448 (ds_mla's tile scales keep them within it).
  if (args.e4m3_overflow == E4M3Overflow::kNaN && args.cache.format != KVFormat::kFP8E4M3)
    fail_arg("e4m3_overflow", concat("kSaturate for kv format ", kv_format_name(args.cache.format),
                                     " (kNaN applies to fp8_e4m3 only)"),
             "kNaN");
}

void validate_move_kv_args(const MoveKVArgs& args, DeviceType expected_device, int device_id) {
  const TensorView& src = args.src_slots;
  check_defined(src, "src_slots", "[m]");
  check_device(src, "src_slots", expected_device, device_id);
  if (src.dtype != DType::kInt32 && src.dtype != DType::kInt64)
    fail_arg("src_slots", "dtype int32 or int64", dtype_name(src.dtype));
  if (src.ndim != 1) fail_arg("src_slots", "shape [m]", src.shape_str());
  const int64_t m = src.shape[0];
  check_data(src, "src_slots");
  check_contiguous(src, "src_slots");

  const TensorView& dst = args.dst_slots;
  check_defined(dst, "dst_slots", "[m]");
  check_device(dst, "dst_slots", expected_device, device_id);
  if (dst.dtype != src.dtype)
    fail_arg("dst_slots", concat("dtype ", dtype_name(src.dtype), " (the dtype of src_slots)"), dtype_name(dst.dtype));
  check_shape(dst, "dst_slots", "[m]", {m});
  check_data(dst, "dst_slots");
  check_contiguous(dst, "dst_slots");

  const TensorView& indptr = args.row_indptr;
  check_defined(indptr, "row_indptr", "[g + 1]");
  check_device(indptr, "row_indptr", expected_device, device_id);
  check_dtype(indptr, "row_indptr", DType::kInt32);
  if (indptr.ndim != 1 || indptr.shape[0] < 1 || indptr.shape[0] - 1 > int64_t{0x7FFFFFFF})
    fail_arg("row_indptr", "shape [g + 1] with 0 <= g < 2^31", indptr.shape_str());
  check_data(indptr, "row_indptr");
  check_contiguous(indptr, "row_indptr");

  if (args.num_caches < 1 || args.num_caches > kMaxMoveCaches)
    fail_arg("num_caches", concat("in [1, ", kMaxMoveCaches, "] (kMaxMoveCaches)"), args.num_caches);
  if (args.caches == nullptr) fail_arg("caches", concat("a pointer to num_caches = ", args.num_caches, " KVCache views"), "nullptr");
  const KVCache& first = args.caches[0];
  const int64_t page_bytes = int64_t{kPageSize} * kv_bytes_per_token(first.format);
  for (int i = 0; i < args.num_caches; ++i) {
    const KVCache& c = args.caches[i];
    const std::string name = concat("caches[", i, "]");
    validate_kv_cache_named(c, name.c_str(), expected_device, device_id);
    if (i == 0) continue;
    if (c.format != first.format)
      fail_arg(concat(name, ".format").c_str(), concat(kv_format_name(first.format), " (the format of caches[0])"),
               kv_format_name(c.format));
    const int64_t stride_bytes = c.data.strides[0] * dtype_size(c.data.dtype);
    const int64_t first_stride_bytes = first.data.strides[0] * dtype_size(first.data.dtype);
    if (c.data.shape[0] != first.data.shape[0] || (c.data.shape[0] > 1 && stride_bytes != first_stride_bytes))
      fail_arg(name.c_str(), concat(first.data.shape[0], " pages with a page stride of ", first_stride_bytes,
                                    " bytes (as caches[0])"),
               concat(c.data.shape[0], " pages with a page stride of ", stride_bytes, " bytes"));
  }
  // Two caches sharing bytes would have one row moved twice, the second time from moved data.
  // Caches of one page stride S and pages of page_bytes used bytes: bases d bytes apart share a
  // byte when d is within page_bytes of a multiple of S inside the page span.
  const int64_t num_pages = first.data.shape[0];
  const int64_t stride = first.data.strides[0] * dtype_size(first.data.dtype);
  for (int i = 0; i < args.num_caches; ++i) {
    for (int j = i + 1; j < args.num_caches; ++j) {
      const auto a = reinterpret_cast<uintptr_t>(args.caches[i].data.data);
      const auto b = reinterpret_cast<uintptr_t>(args.caches[j].data.data);
      const int64_t d = static_cast<int64_t>(a > b ? a - b : b - a);
      bool shared = d < page_bytes;
      if (!shared && num_pages > 1 && d < (num_pages - 1) * stride + page_bytes) {
        const int64_t r = d % stride;
        shared = r < page_bytes || stride - r < page_bytes;
      }
      if (shared)
        fail_arg(concat("caches[", j, "]").c_str(), concat("memory disjoint from caches[", i, "]"),
                 concat("data at ", args.caches[j].data.data, ", ", d, " bytes from caches[", i, "] (page stride ",
                        stride, " bytes, ", num_pages, " pages)"));
    }
  }
}

void validate_workspace(const void* workspace, size_t given, size_t needed) {
  if (workspace == nullptr) fail_arg("workspace", "a non-null pointer", "nullptr");
  const auto address = reinterpret_cast<uintptr_t>(workspace);
  if (address % kWorkspaceAlign != 0)
    fail_arg("workspace", concat("a ", kWorkspaceAlign, "-byte aligned pointer"),
             concat("address ", workspace, " (address % ", kWorkspaceAlign, " = ", address % kWorkspaceAlign, ")"));
  if (given < needed)
    fail(Status::kWorkspaceTooSmall, "workspace_bytes: expected >= ", needed,
         " (DecodePlan::workspace_bytes()), got ", given);
}

}  // namespace openmla::detail
