// The CPU oracle (reference.decode / sparse_decode / write_kv / move_kv / read_kv_token) and the host FP8 codecs, on CPU
// tensors (NumPy in tests). The codecs are vectorised here: a Python loop over 656-byte tokens
// would dominate the test suite's time.
#include <algorithm>
#include <cstdint>
#include <string>

#include "bindings.h"
#include "openmla/error.h"
#include "openmla/fp8.h"
#include "openmla/reference.h"
#include "tensor_args.h"

namespace openmla::python {
namespace {

using namespace nb::literals;

template <typename T>
using CpuArray = nb::ndarray<T, nb::c_contig, nb::device::cpu>;

// The reference derives its DecodeShape from q (and, ragged, from q_indptr's length); a bad shape field is a
// bad q. Ragged q_len: the given one, else min(total_q, the layout's limit) (at least 1), which bounds every
// request's count without reading q_indptr (openmla.decode picks the same).
DecodeShape shape_from_q(const TensorView& q, const TensorView& q_indptr, KVFormat kv_format, bool causal,
                         QueryLayout layout, TreeMask tree_mask, int q_len) {
  DecodeShape shape;
  if (layout == QueryLayout::kRagged) {
    if (q.ndim != 3 || q.shape[2] != kHeadDimQK)
      throw nb::value_error(("q: expected shape [total_q, h_q, 576] (ragged), got " + q.shape_str()).c_str());
    if (!q_indptr.defined())
      throw nb::value_error("q_indptr: expected an int32 tensor [b + 1] for query_layout ragged, got None");
    if (q_indptr.ndim != 1 || q_indptr.shape[0] < 2)
      throw nb::value_error(("q_indptr: expected shape [b + 1] with b >= 1, got " + q_indptr.shape_str()).c_str());
    shape.batch_size = static_cast<int>(q_indptr.shape[0] - 1);
    const int64_t limit = tree_mask == TreeMask::kNone ? kMaxQueryLen : kMaxTreeQueryLen;
    shape.q_len = q_len > 0 ? q_len : static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(q.shape[0], limit)));
    shape.num_heads = static_cast<int>(q.shape[1]);
  } else {
    if (q.ndim != 4 || q.shape[3] != kHeadDimQK)
      throw nb::value_error(("q: expected shape [b, s_q, h_q, 576], got " + q.shape_str()).c_str());
    shape.batch_size = static_cast<int>(q.shape[0]);
    shape.q_len = static_cast<int>(q.shape[1]);
    shape.num_heads = static_cast<int>(q.shape[2]);
  }
  if (q.dtype != DType::kBFloat16 && q.dtype != DType::kFloat16 && q.dtype != DType::kFloat8E4M3)
    throw nb::type_error(
        (std::string("q: expected dtype bfloat16, float16 or float8_e4m3fn, got ") + dtype_name(q.dtype)).c_str());
  shape.q_dtype = q.dtype;
  shape.kv_format = kv_format;
  shape.causal = causal;
  shape.query_layout = layout;
  shape.tree_mask = tree_mask;
  return shape;
}

unsigned reference_decode(nb::handle q, nb::handle kv_cache, nb::handle block_table, nb::handle cache_seqlens,
                          float softmax_scale, nb::handle out, nb::handle lse, KVFormat kv_format, float kv_scale,
                          bool causal, Fp8Math fp8_math, nb::handle q_indptr, nb::handle mask, QueryLayout query_layout,
                          TreeMask tree_mask, int q_len, nb::handle q_scale, nb::handle kv_device_scale) {
  Input q_t = input_tensor(q, "q");
  Input kv_t = input_tensor(kv_cache, "kv_cache");
  Input table_t = input_tensor(block_table, "block_table");
  Input seqlens_t = input_tensor(cache_seqlens, "cache_seqlens");
  Output out_t = optional_output(out, "out");
  Output lse_t = optional_output(lse, "lse");
  Input indptr_t = optional_input(q_indptr, "q_indptr");
  Input mask_t = optional_input(mask, "mask");
  Input q_scale_t = optional_input(q_scale, "q_scale");
  Input kv_scale_t = optional_input(kv_device_scale, "kv_device_scale");
  DecodeShape shape = shape_from_q(q_t.view, indptr_t.view, kv_format, causal, query_layout, tree_mask, q_len);
  shape.device_scales = kv_scale_t.view.defined();
  DecodeArgs args;
  args.q_scale = q_scale_t.view;
  args.kv.device_scale = kv_scale_t.view;
  args.q = q_t.view;
  args.kv.data = kv_t.view;
  args.kv.format = kv_format;
  args.kv.scale = kv_scale;
  args.block_table = table_t.view;
  args.cache_seqlens = seqlens_t.view;
  args.softmax_scale = softmax_scale;
  args.out = out_t.view;
  args.lse = lse_t.view;
  args.q_indptr = indptr_t.view;
  args.mask = mask_t.view;
  try {
    nb::gil_scoped_release release;
    return reference::decode(args, shape, fp8_math);
  } catch (const Error& e) {
    const std::string message = e.what();
    if (message.rfind("shape.", 0) == 0) throw Error(e.status(), "q: " + message);  // derived from q
    throw;
  }
}

// The sparse reference derives its SparseDecodeShape from q, indices and which optional tensors come; a bad
// shape field is a bad q (b, s_q, h_q, dtype) or indices (topk) / extra_indices (extra_topk).
unsigned reference_sparse_decode(nb::handle q, nb::handle kv_cache, nb::handle indices, float softmax_scale,
                                 nb::handle out, nb::handle lse, KVFormat kv_format, float kv_scale,
                                 nb::handle kv_device_scale, nb::handle topk_length, nb::handle attn_sink,
                                 nb::handle extra_kv_cache, nb::handle extra_indices, nb::handle extra_topk_length) {
  Input q_t = input_tensor(q, "q");
  Input kv_t = input_tensor(kv_cache, "kv_cache");
  Input indices_t = input_tensor(indices, "indices");
  Output out_t = optional_output(out, "out");
  Output lse_t = optional_output(lse, "lse");
  Input scale_t = optional_input(kv_device_scale, "kv_device_scale");
  Input lengths_t = optional_input(topk_length, "topk_length");
  Input sink_t = optional_input(attn_sink, "attn_sink");
  Input extra_t = optional_input(extra_kv_cache, "extra_kv_cache");
  Input extra_indices_t = optional_input(extra_indices, "extra_indices");
  Input extra_lengths_t = optional_input(extra_topk_length, "extra_topk_length");
  const TensorView& qv = q_t.view;
  if (qv.ndim != 4 || qv.shape[3] != kHeadDimQK)
    throw nb::value_error(("q: expected shape [b, s_q, h_q, 576], got " + qv.shape_str()).c_str());
  if (qv.dtype != DType::kBFloat16 && qv.dtype != DType::kFloat16)
    throw nb::type_error((std::string("q: expected dtype bfloat16 or float16, got ") + dtype_name(qv.dtype)).c_str());
  const TensorView& iv = indices_t.view;
  if (iv.ndim != 3)
    throw nb::value_error(("indices: expected shape [b, s_q, topk], got " + iv.shape_str()).c_str());
  const TensorView& ev = extra_indices_t.view;
  if (ev.defined() && ev.ndim != 3)
    throw nb::value_error(("extra_indices: expected shape [b, s_q, extra_topk], got " + ev.shape_str()).c_str());
  if (ev.defined() != extra_t.view.defined())
    throw nb::value_error(ev.defined() ? "extra_kv_cache: expected a cache with extra_indices, got None"
                                       : "extra_indices: expected an int32 tensor [b, s_q, extra_topk] with "
                                         "extra_kv_cache, got None");
  SparseDecodeShape shape;
  shape.batch_size = static_cast<int>(qv.shape[0]);
  shape.q_len = static_cast<int>(qv.shape[1]);
  shape.num_heads = static_cast<int>(qv.shape[2]);
  shape.q_dtype = qv.dtype;
  shape.kv_format = kv_format;
  shape.topk = static_cast<int>(std::min<int64_t>(iv.shape[2], int64_t{1} << 30));
  shape.extra_topk = ev.defined() ? static_cast<int>(std::min<int64_t>(ev.shape[2], int64_t{1} << 30)) : 0;
  shape.topk_length = lengths_t.view.defined();
  shape.extra_topk_length = extra_lengths_t.view.defined();
  shape.attn_sink = sink_t.view.defined();
  SparseDecodeArgs args;
  args.q = qv;
  args.kv.data = kv_t.view;
  args.kv.format = kv_format;
  args.kv.scale = kv_scale;
  args.kv.device_scale = scale_t.view;
  args.indices = iv;
  if (extra_t.view.defined()) {
    args.extra_kv = args.kv;
    args.extra_kv.data = extra_t.view;
  }
  args.extra_indices = ev;
  args.attn_sink = sink_t.view;
  args.softmax_scale = softmax_scale;
  args.out = out_t.view;
  args.lse = lse_t.view;
  try {
    nb::gil_scoped_release release;
    return reference::sparse_decode(args, shape, lengths_t.view, extra_lengths_t.view);
  } catch (const Error& e) {
    const std::string message = e.what();
    const char* owner = message.rfind("shape.topk", 0) == 0 ? "indices: "
                        : message.rfind("shape.extra_topk_length", 0) == 0 ? "extra_topk_length: "
                        : message.rfind("shape.extra_topk", 0) == 0 ? "extra_indices: "
                        : message.rfind("shape.", 0) == 0 ? "q: " : nullptr;
    if (owner) throw Error(e.status(), owner + message);
    throw;
  }
}

unsigned reference_write_kv(nb::handle kv_latent, nb::handle k_rope, nb::handle slots, nb::handle kv_cache,
                            KVFormat kv_format, float kv_scale, nb::handle device_scale, E4M3Overflow overflow) {
  Input latent_t = input_tensor(kv_latent, "kv_latent");
  Input rope_t = input_tensor(k_rope, "k_rope");
  Input slots_t = input_tensor(slots, "slots");
  Output cache_t = output_tensor(kv_cache, "kv_cache");
  Input scale_t = optional_input(device_scale, "kv_scale");
  WriteKVArgs args;
  args.kv_latent = latent_t.view;
  args.k_rope = rope_t.view;
  args.slots = slots_t.view;
  args.cache.data = cache_t.view;
  args.cache.format = kv_format;
  args.cache.scale = kv_scale;
  args.cache.device_scale = scale_t.view;
  args.e4m3_overflow = overflow;
  nb::gil_scoped_release release;
  return reference::write_kv(args);
}

unsigned reference_move_kv(nb::handle caches, nb::handle src_slots, nb::handle dst_slots, nb::handle row_indptr,
                           KVFormat kv_format) {
  Input src_t = input_tensor(src_slots, "src_slots");
  Input dst_t = input_tensor(dst_slots, "dst_slots");
  Input indptr_t = input_tensor(row_indptr, "row_indptr");
  CacheList list = cache_list(caches, kv_format, nullptr);
  MoveKVArgs args;
  args.src_slots = src_t.view;
  args.dst_slots = dst_t.view;
  args.row_indptr = indptr_t.view;
  args.caches = list.caches.data();
  args.num_caches = static_cast<int>(list.caches.size());
  nb::gil_scoped_release release;
  return reference::move_kv(args);
}

nb::ndarray<nb::numpy, float> read_kv_token(nb::handle kv_cache, int64_t page, int offset, KVFormat kv_format,
                                            float kv_scale) {
  Input cache_t = input_tensor(kv_cache, "kv_cache");
  KVCache cache;
  cache.data = cache_t.view;
  cache.format = kv_format;
  cache.scale = kv_scale;
  auto result = new_numpy<float>({static_cast<size_t>(kHeadDimQK)});
  reference::read_kv_token(cache, page, offset, result.data());
  return result;
}

// Elementwise map over a contiguous CPU array into a fresh NumPy array of the same shape.
template <typename In, typename OutT, typename F>
nb::ndarray<nb::numpy, OutT> map_elements(const CpuArray<const In>& in, F&& f) {
  std::vector<size_t> shape(in.ndim());
  size_t n = 1;
  for (size_t d = 0; d < in.ndim(); ++d) n *= (shape[d] = in.shape(d));
  auto* storage = new std::vector<OutT>(n);
  nb::capsule owner(storage, [](void* p) noexcept { delete static_cast<std::vector<OutT>*>(p); });
  const In* src = in.data();
  for (size_t i = 0; i < n; ++i) (*storage)[i] = f(src[i]);
  return nb::ndarray<nb::numpy, OutT>(storage->data(), shape.size(), shape.data(), owner);
}

void require_rows(size_t ndim, size_t last, size_t width, const char* name, const char* expected) {
  if (ndim != 2 || last != width)
    throw nb::value_error((std::string(name) + ": expected shape " + expected + ", got ndim " +
                           std::to_string(ndim) + " with last dimension " + std::to_string(last))
                              .c_str());
}

void register_fp8(nb::module_& fp8) {
  fp8.attr("E4M3_MAX") = fp8::kE4M3Max;
  // Each codec maps a contiguous CPU array elementwise into a new NumPy array of the same shape.
  fp8.def("e4m3_from_float", [](const CpuArray<const float>& x) {
    return map_elements<float, uint8_t>(x, [](float v) { return fp8::e4m3_from_float(v); });
  }, "x"_a, "float32 -> e4m3 bits (round to nearest even, saturate to +-448, NaN -> 0x7F).");
  fp8.def("e4m3_to_float", [](const CpuArray<const uint8_t>& x) {
    return map_elements<uint8_t, float>(x, [](uint8_t v) { return fp8::e4m3_to_float(v); });
  }, "bits"_a, "e4m3 bits -> float32 (exact; 0x7F / 0xFF are NaN).");
  fp8.def("e4m3_encode_scaled", [](const CpuArray<const float>& x, float scale) {
    return map_elements<float, uint8_t>(x, [scale](float v) { return fp8::e4m3_encode_scaled(v, scale); });
  }, "x"_a, "scale"_a, "Per-tensor e4m3: stored = e4m3(x / scale).");
  fp8.def("bf16_from_float", [](const CpuArray<const float>& x) {
    return map_elements<float, uint16_t>(x, [](float v) { return fp8::float_to_bf16(v); });
  }, "x"_a, "float32 -> bfloat16 bits (round to nearest even).");
  fp8.def("bf16_to_float", [](const CpuArray<const uint16_t>& x) {
    return map_elements<uint16_t, float>(x, [](uint16_t v) { return fp8::bf16_to_float(v); });
  }, "bits"_a, "bfloat16 bits -> float32 (exact).");
  fp8.def("fp16_from_float", [](const CpuArray<const float>& x) {
    return map_elements<float, uint16_t>(x, [](float v) { return fp8::float_to_fp16(v); });
  }, "x"_a, "float32 -> float16 bits (round to nearest even).");
  fp8.def("fp16_to_float", [](const CpuArray<const uint16_t>& x) {
    return map_elements<uint16_t, float>(x, [](uint16_t v) { return fp8::fp16_to_float(v); });
  }, "bits"_a, "float16 bits -> float32 (exact).");
  fp8.def("ds_mla_tile_scale", &fp8::ds_mla_tile_scale, "amax"_a,
          "Scale of one 128-value ds_mla tile: 2^ceil(log2(amax / 448)).");
  fp8.def(
      "ds_mla_encode",
      [](const CpuArray<const float>& latent, const CpuArray<const float>& rope) {
        require_rows(latent.ndim(), latent.ndim() ? latent.shape(latent.ndim() - 1) : 0, kHeadDimV, "latent",
                     "[n, 512]");
        require_rows(rope.ndim(), rope.ndim() ? rope.shape(rope.ndim() - 1) : 0, kRopeDim, "rope", "[n, 64]");
        if (rope.shape(0) != latent.shape(0))
          throw nb::value_error(("rope: expected " + std::to_string(latent.shape(0)) +
                                 " rows (the rows of latent), got " + std::to_string(rope.shape(0)))
                                    .c_str());
        const size_t n = latent.shape(0);
        auto* storage = new std::vector<uint8_t>(n * kDsMlaBytesPerToken);
        nb::capsule owner(storage, [](void* p) noexcept { delete static_cast<std::vector<uint8_t>*>(p); });
        for (size_t i = 0; i < n; ++i)
          fp8::ds_mla_encode_token(latent.data() + i * kHeadDimV, rope.data() + i * kRopeDim,
                                   storage->data() + i * kDsMlaBytesPerToken);
        const size_t shape[2] = {n, static_cast<size_t>(kDsMlaBytesPerToken)};
        return nb::ndarray<nb::numpy, uint8_t>(storage->data(), 2, shape, owner);
      },
      "latent"_a, "rope"_a, "[n, 512] + [n, 64] float32 -> [n, 656] ds_mla tokens (uint8).");
  fp8.def(
      "ds_mla_decode",
      [](const CpuArray<const uint8_t>& tokens) {
        require_rows(tokens.ndim(), tokens.ndim() ? tokens.shape(tokens.ndim() - 1) : 0, kDsMlaBytesPerToken,
                     "tokens", "[n, 656]");
        const size_t n = tokens.shape(0);
        auto result = new_numpy<float>({n, static_cast<size_t>(kHeadDimQK)});
        for (size_t i = 0; i < n; ++i)
          fp8::ds_mla_decode_token(tokens.data() + i * kDsMlaBytesPerToken, result.data() + i * kHeadDimQK);
        return result;
      },
      "tokens"_a, "[n, 656] ds_mla tokens -> [n, 576] float32 (512 latent, then 64 rope).");
}

}  // namespace

void register_reference(nb::module_& m) {
  nb::module_ ref = m.def_submodule("reference", "CPU oracle (float64 accumulation) on CPU tensors.");
  ref.def("decode", &reference_decode, "q"_a.none(), "kv_cache"_a.none(), "block_table"_a.none(),
          "cache_seqlens"_a.none(), "softmax_scale"_a, "out"_a.none(), "lse"_a.none(), "kv_format"_a,
          "kv_scale"_a = 1.0f, "causal"_a = true, "fp8_math"_a = Fp8Math::kOff, "q_indptr"_a = nb::none(),
          "mask"_a = nb::none(), "query_layout"_a = QueryLayout::kUniform, "tree_mask"_a = TreeMask::kNone,
          "q_len"_a = 0, "q_scale"_a = nb::none(), "kv_device_scale"_a = nb::none(),
          "Exact attention (float64 accumulation; fp8_math qk_and_pv: the FP8-math kernel's arithmetic) on CPU "
          "tensors, arguments as DecodePlan.run; out (float64, float32, bfloat16 or float16) and lse (float64 or "
          "float32) are required here. The shape comes from q: [b, s_q, h_q, 576], or with query_layout ragged "
          "[total_q, h_q, 576] and b = len(q_indptr) - 1, q_len (the most tokens of a request; 0: "
          "min(total_q, MAX_QUERY_LEN, or MAX_TREE_QUERY_LEN with a tree mask)). kv_device_scale: the fp8_e4m3 "
          "cache's scale as a float32 tensor of one element (the GPU's device-held scale; kv_scale is then ignored); "
          "q_scale: with a float8_e4m3fn query (which needs kv_device_scale), value = code * q_scale[0]. Returns the "
          "device error word (DEVICE_ERROR_* bits) the GPU kernel would set for the same input; the rows it "
          "guards are NaN. Raises ValueError / TypeError for bad arguments.");
  ref.def("sparse_decode", &reference_sparse_decode, "q"_a.none(), "kv_cache"_a.none(), "indices"_a.none(),
          "softmax_scale"_a, "out"_a.none(), "lse"_a.none(), "kv_format"_a, "kv_scale"_a = 1.0f,
          "kv_device_scale"_a = nb::none(), "topk_length"_a = nb::none(), "attn_sink"_a = nb::none(),
          "extra_kv_cache"_a = nb::none(), "extra_indices"_a = nb::none(), "extra_topk_length"_a = nb::none(),
          "Exact (float64) sparse top-k decode on CPU tensors, arguments as SparseDecodePlan.run (the shape from q, "
          "indices and the optional tensors given); out float64/float32/bfloat16/float16 [b, s_q, h_q, 512], lse "
          "float64/float32 [b, s_q, h_q]. Returns the device error word the GPU kernels would set. A query token "
          "with nothing to attend gets out 0 and lse -inf.");
  ref.def("write_kv", &reference_write_kv, "kv_latent"_a.none(), "k_rope"_a.none(), "slots"_a.none(),
          "kv_cache"_a.none(), "kv_format"_a, "kv_scale"_a = 1.0f, "device_scale"_a = nb::none(),
          "overflow"_a = E4M3Overflow::kSaturate,
          "CPU write_kv with the GPU writer's codecs and skip rules, arguments as write_kv on CPU tensors (a "
          "device_scale is a one-element float32 CPU tensor here); returns the device error word "
          "(DEVICE_ERROR_SLOT_OUT_OF_RANGE for slots beyond the cache, which are skipped; DEVICE_ERROR_SCALE alone "
          "for a device_scale that is not finite and > 0, which writes nothing).");
  ref.def("move_kv", &reference_move_kv, "caches"_a.none(), "src_slots"_a.none(), "dst_slots"_a.none(),
          "row_indptr"_a.none(), "kv_format"_a,
          "CPU move_kv with the GPU kernel's moves, guards and error bits, arguments as move_kv on CPU tensors "
          "(the caches written in place); returns the device error word (DEVICE_ERROR_SLOT_OUT_OF_RANGE for a "
          "slot beyond the caches, whose row is skipped; DEVICE_ERROR_QUERY_OFFSETS for a bad group range, whose "
          "group moves nothing).");
  ref.def("read_kv_token", &read_kv_token, "kv_cache"_a.none(), "page"_a, "offset"_a, "kv_format"_a,
          "kv_scale"_a = 1.0f,
          "The 576 values decode reads for one token (float32 NumPy array: 512 latent, then 64 rope); page in "
          "[0, num_pages), offset in [0, 64), ValueError otherwise.");

  nb::module_ fp8 = m.def_submodule("fp8", "Host FP8 / bf16 / fp16 codecs (bit-exact with the GPU writers).");
  register_fp8(fp8);
}

}  // namespace openmla::python
