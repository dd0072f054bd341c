// KV tensor maps (page id as the third coordinate), the wide kernel's Q map, and dispatch on the query type and
// cache kind.
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include "kernels/common/dispatch.cuh"
#include "kernels/common/kv_kind.h"
#include "kernels/common/launch.h"
#include "kernels/sm90/decode/wide/config.h"
#include "kernels/sm90/decode/fp8_math/config.h"
#include "kernels/sm90/decode/fp8_math/launch.h"
#include "kernels/sm90/decode/narrow/config.h"
#include "kernels/sm90/decode/narrow/launch.h"
#include "kernels/sm90/decode/wide/launch.h"

namespace openmla::kernels::sm90 {
namespace {

// cuTensorMapEncodeTiled through the runtime's driver entry point: no link against libcuda.
PFN_cuTensorMapEncodeTiled_v12000 encode_tiled() {
  static PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* ptr = nullptr;
    cudaDriverEntryPointQueryResult status{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &ptr, 12000, cudaEnableDefault, &status) !=
            cudaSuccess ||
        status != cudaDriverEntryPointSuccess) {
      ptr = nullptr;
    }
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(ptr);
  }();
  return fn;
}

// The cache's page stride in bytes for a tensor map. With a single page it is never used (and not
// validated); any legal value does, here `packed_bytes`, the page's own size.
uint64_t map_page_stride(const DecodeParams& p, uint64_t packed_bytes) {
  return p.num_pages > 1 ? static_cast<uint64_t>(p.page_stride_bytes) : packed_bytes;
}

// One 3-D tensor map over the cache (token bytes, token in page, page): `row_elems` elements of
// `type` per token row, boxes of (box_elems, 64 tokens, 1 page).
cudaError_t encode_map(const DecodeParams& p, CUtensorMapDataType type, int elem_bytes, int row_elems, int box_elems,
                       CUtensorMapSwizzle swizzle, CUtensorMap* map,
                       CUtensorMapL2promotion promotion = CU_TENSOR_MAP_L2_PROMOTION_L2_256B) {
  auto encode = encode_tiled();
  if (encode == nullptr) return cudaErrorNotSupported;
  const uint64_t token_bytes = static_cast<uint64_t>(row_elems) * elem_bytes;
  const uint64_t page_stride = map_page_stride(p, token_bytes * kPageTokens);
  const cuuint64_t dims[3] = {static_cast<cuuint64_t>(row_elems), static_cast<cuuint64_t>(kPageTokens),
                              static_cast<cuuint64_t>(p.num_pages)};
  const cuuint64_t strides[2] = {token_bytes, page_stride};
  const cuuint32_t box[3] = {static_cast<cuuint32_t>(box_elems), static_cast<cuuint32_t>(kPageTokens), 1};
  const cuuint32_t elem_strides[3] = {1, 1, 1};
  const CUresult r = encode(map, type, 3, const_cast<uint8_t*>(p.kv), dims, strides, box, elem_strides,
                            CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, promotion, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue;
}

// A page of an FP8 cache as `chunks` boxes of chunk_bytes x 64 tokens, in one copy: dims (chunk_bytes,
// 64 tokens, chunks, pages) with strides (row_bytes, chunk_bytes, page stride), so that one box lands as
// the chunks' sub-tiles back to back. The chunk dimension has the smaller stride, which the driver
// accepts. (Nine copies of one sub-tile each took the issuing thread ~1,200 clocks per page:
// bench/results/2026-12-02-h200-fp8-math-one-copy.md.)
cudaError_t encode_page_chunks_map(const DecodeParams& p, int row_bytes, int chunk_bytes, int chunks,
                                   CUtensorMapSwizzle swizzle, CUtensorMap* map,
                                   CUtensorMapL2promotion promotion = CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                   int box_chunks = 0) {
  auto encode = encode_tiled();
  if (encode == nullptr) return cudaErrorNotSupported;
  const cuuint64_t kChunk = static_cast<cuuint64_t>(chunk_bytes);
  const uint64_t page_stride = map_page_stride(p, static_cast<uint64_t>(row_bytes) * kPageTokens);
  const cuuint64_t dims[4] = {kChunk, static_cast<cuuint64_t>(kPageTokens), static_cast<cuuint64_t>(chunks),
                              static_cast<cuuint64_t>(p.num_pages)};
  const cuuint64_t strides[3] = {static_cast<cuuint64_t>(row_bytes), kChunk, page_stride};
  const cuuint32_t box[4] = {static_cast<cuuint32_t>(kChunk), static_cast<cuuint32_t>(kPageTokens),
                             static_cast<cuuint32_t>(box_chunks > 0 ? box_chunks : chunks), 1};
  const cuuint32_t elem_strides[4] = {1, 1, 1, 1};
  const CUresult r = encode(map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 4, const_cast<uint8_t*>(p.kv), dims, strides, box,
                            elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, promotion,
                            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue;
}

// The wide kernel's Q map (kernel.cuh, issue_q_load): dims (576, h_q, s_q, b) with the query's strides,
// boxes of 64 dims x one m-tile (64 rows: h_q heads x 64 / h_q tokens below 64 heads, else 64 heads x 1),
// SW128 like the KV tiles. Rows past s_q * h_q are out of bounds and land as zeros. A dimension of size
// 1 gets a packed stride (its stride is never used, and need not be aligned).
cudaError_t encode_q_map(const DecodeParams& p, bool q_is_bf16, CUtensorMap* map) {
  auto encode = encode_tiled();
  if (encode == nullptr) return cudaErrorNotSupported;
  const int h = p.num_heads;
  const cuuint64_t dims[4] = {static_cast<cuuint64_t>(kHeadDimQK), static_cast<cuuint64_t>(h),
                              static_cast<cuuint64_t>(p.q_len), static_cast<cuuint64_t>(p.batch)};
  const int64_t elem_strides_in[3] = {p.q_stride_h, p.q_stride_s, p.q_stride_b};
  cuuint64_t strides[3];
  uint64_t packed = static_cast<uint64_t>(kHeadDimQK) * 2;
  for (int d = 0; d < 3; ++d) {
    strides[d] = dims[d + 1] > 1 ? static_cast<cuuint64_t>(elem_strides_in[d]) * 2 : packed;
    packed = strides[d] * dims[d + 1];
  }
  const cuuint32_t box[4] = {static_cast<cuuint32_t>(WideConfig::kBoxDims),
                             static_cast<cuuint32_t>(h < WideConfig::kRows ? h : WideConfig::kRows),
                             static_cast<cuuint32_t>(h < WideConfig::kRows ? WideConfig::kRows / h : 1), 1};
  const cuuint32_t elem_strides[4] = {1, 1, 1, 1};
  const CUresult r = encode(map, q_is_bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 4,
                            const_cast<void*>(p.q), dims, strides, box, elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                            CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue;
}

// The maps the kernel of a kind reads (kernel.cuh, TensorMaps). 16-bit: tiles of 64 dims with the
// 128-B swizzle that wgmma's K-major and MN-major SW128 operands expect. FP8: raw bytes.
cudaError_t encode_kv_maps(const DecodeParams& p, KVFormat format, TensorMaps* maps) {
  constexpr auto kBytes = CU_TENSOR_MAP_DATA_TYPE_UINT8;
  switch (format) {
    case KVFormat::kBF16:
    case KVFormat::kFP16:
      return encode_map(p, format == KVFormat::kBF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
                        2, kHeadDimQK, WideConfig::kBoxDims, CU_TENSOR_MAP_SWIZZLE_128B, &maps->kv,
                        p.rows <= kKvNoPromotionMaxRows ? CU_TENSOR_MAP_L2_PROMOTION_NONE
                                                        : CU_TENSOR_MAP_L2_PROMOTION_L2_256B);
    case KVFormat::kFP8E4M3:  // the page as stored, in one copy (fp8_stage.cuh)
      return encode_page_chunks_map(p, kHeadDimQK, 64, kHeadDimQK / 64, CU_TENSOR_MAP_SWIZZLE_NONE, &maps->kv);
    case KVFormat::kFP8DsMla: {  // the 512 latent bytes in one copy, the scales and the rope in one each
      cudaError_t e =
          encode_page_chunks_map(p, kDsMlaBytesPerToken, 64, kHeadDimV / 64, CU_TENSOR_MAP_SWIZZLE_NONE, &maps->kv);
      if (e == cudaSuccess) e = encode_map(p, kBytes, 1, kDsMlaBytesPerToken, 16, CU_TENSOR_MAP_SWIZZLE_NONE, &maps->scales);
      if (e == cudaSuccess) e = encode_map(p, kBytes, 1, kDsMlaBytesPerToken, 128, CU_TENSOR_MAP_SWIZZLE_128B, &maps->rope);
      return e;
    }
  }
  return cudaErrorInvalidValue;
}

// The FP8-math kernel's map (fp8_math_config.h): the e4m3 page as stored, 9 sub-tiles with the 64-B
// swizzle, the K-major layout of its e4m3 wgmma operands.
cudaError_t encode_fp8_math_kv_map(const DecodeParams& p, TensorMaps* maps) {
  return encode_page_chunks_map(p, kHeadDimQK, Fp8MathConfig::kBoxDims, Fp8MathConfig::kBoxes,
                                CU_TENSOR_MAP_SWIZZLE_64B, &maps->kv);
}

// The narrow kernel's maps (narrow_config.h, NarrowPage). e4m3: `kv` = the 512 latent bytes in
// boxes of 128 B x 64 tokens (SW128), `rope` = the 64 rope bytes (64 x 64). ds_mla: `kv` = a page
// as rows of 256 B (kNarrowCopyRowBytes), one box per page. 16-bit: `kv` = the page's nine 64-dim
// boxes (128 B x 64 tokens, SW128) in copies of kPartBoxes boxes. The 16-bit and ds_mla maps go
// without L2 promotion, as the wide kernel's 16-bit map for few rows (kKvNoPromotionMaxRows): for ds_mla
// that measured 1.003-1.019x, e4m3's boxes of 576-B rows 0.982-0.994x, so e4m3 keeps 256 B (run 6 of
// bench/results/2026-12-03-h200-session42.md).
cudaError_t encode_narrow_kv_maps(const DecodeParams& p, KVFormat format, TensorMaps* maps) {
  constexpr auto kBytes = CU_TENSOR_MAP_DATA_TYPE_UINT8;
  if (kv_format_is_16bit(format))
    return encode_page_chunks_map(p, kHeadDimQK * 2, 128, NarrowPage<kKv16Bit>::kBoxes, CU_TENSOR_MAP_SWIZZLE_128B,
                                  &maps->kv, CU_TENSOR_MAP_L2_PROMOTION_NONE, NarrowPage<kKv16Bit>::kPartBoxes);
  if (format == KVFormat::kFP8E4M3) {
    // The latent in one copy (4 boxes of 128 B x 64 tokens, SW128), the rope in another.
    cudaError_t e = encode_page_chunks_map(p, kHeadDimQK, 128, kHeadDimV / 128, CU_TENSOR_MAP_SWIZZLE_128B, &maps->kv);
    if (e == cudaSuccess) e = encode_map(p, kBytes, 1, kHeadDimQK, 64, CU_TENSOR_MAP_SWIZZLE_NONE, &maps->rope);
    return e;
  }
  if (format != KVFormat::kFP8DsMla) return cudaErrorInvalidValue;
  auto encode = encode_tiled();
  if (encode == nullptr) return cudaErrorNotSupported;
  constexpr uint64_t kPageBytes = NarrowPage<kKvDsMla>::kBytes;
  constexpr uint64_t kRows = kPageBytes / kNarrowCopyRowBytes;
  const uint64_t page_stride = map_page_stride(p, kPageBytes);
  const cuuint64_t dims[3] = {kNarrowCopyRowBytes, kRows, static_cast<cuuint64_t>(p.num_pages)};
  const cuuint64_t strides[2] = {kNarrowCopyRowBytes, page_stride};
  const cuuint32_t box[3] = {kNarrowCopyRowBytes, static_cast<cuuint32_t>(kRows), 1};
  const cuuint32_t elem_strides[3] = {1, 1, 1};
  const CUresult r = encode(&maps->kv, kBytes, 3, const_cast<uint8_t*>(p.kv), dims, strides, box, elem_strides,
                            CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                            CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue;
}

}  // namespace

}  // namespace openmla::kernels::sm90

namespace openmla::kernels {

// The schedules' constants (core/decode_config.h, tested on the CPU) are the kernels' own.
static_assert(detail::kSm90Wide.rows_per_cta == sm90::WideConfig::kRows && detail::kSm90Wide.ctas_per_sm == 1);
static_assert(detail::kSm90WideSeesaw.rows_per_cta == sm90::WideConfig::kRows && detail::kSm90WideSeesaw.ctas_per_sm == 1);
static_assert(detail::kSm90Narrow16.rows_per_cta == sm90::NarrowConfig<16, kKvE4M3, 1>::kRows &&
              detail::kSm90Narrow16.ctas_per_sm == sm90::NarrowConfig<16, kKvE4M3, 1>::kCtasPerSm &&
              detail::kSm90Narrow16.narrow_producer_warps == sm90::NarrowConfig<16, kKvE4M3, 1>::kProducerWarps);
static_assert(detail::kSm90Narrow16Split.rows_per_cta == sm90::NarrowConfig<16, kKvE4M3, 2>::kRows &&
              detail::kSm90Narrow16Split.ctas_per_sm == sm90::NarrowConfig<16, kKvE4M3, 2>::kCtasPerSm &&
              detail::kSm90Narrow16Split.narrow_producer_warps == sm90::NarrowConfig<16, kKvE4M3, 2>::kProducerWarps);
static_assert(detail::kSm90WideFp8Math.rows_per_cta == sm90::Fp8MathConfig::kRows &&
              detail::kSm90WideFp8Math.ctas_per_sm == 1 && detail::kSm90WideFp8Math.seesaw);
static_assert(detail::kSm90Narrow16Bit16.rows_per_cta == sm90::NarrowConfig<16, kKv16Bit>::kRows &&
              detail::kSm90Narrow16Bit16.ctas_per_sm == sm90::NarrowConfig<16, kKv16Bit>::kCtasPerSm &&
              detail::kSm90Narrow16Bit16.narrow_producer_warps == sm90::NarrowConfig<16, kKv16Bit>::kProducerWarps);
static_assert(detail::kSm90Narrow16Bit32.rows_per_cta == sm90::NarrowConfig<32, kKv16Bit>::kRows &&
              detail::kSm90Narrow16Bit32.ctas_per_sm == sm90::NarrowConfig<32, kKv16Bit>::kCtasPerSm &&
              detail::kSm90Narrow16Bit32.narrow_producer_warps == sm90::NarrowConfig<32, kKv16Bit>::kProducerWarps);
static_assert(detail::kSm90Narrow32.rows_per_cta == sm90::NarrowConfig<32>::kRows &&
              detail::kSm90Narrow32.ctas_per_sm == sm90::NarrowConfig<32>::kCtasPerSm &&
              detail::kSm90Narrow32.narrow_producer_warps == sm90::NarrowConfig<32>::kProducerWarps);

namespace {

// The (query type, cache kind) pairs the narrow kernel is instantiated for (choose_sm90_schedule
// picks it for no other).
template <typename T, int kKind>
inline constexpr bool kNarrowInstantiated =
    kKind == kKvE4M3 || kKind == kKv16Bit || (kKind == kKvDsMla && std::is_same_v<T, __nv_bfloat16>);

// Calls fn(rows, producer warps) (integral constants) for the narrow kernel's instantiated forms:
// (16, 1), (32, 2) for FP8, (32, 1) for 16-bit, and (16, 2) for ds_mla (choose_sm90_schedule picks no
// other); any other form is an error, never another kernel.
template <int kKind, class Fn>
cudaError_t with_narrow_form(const detail::Sm90Schedule& schedule, Fn&& fn) {
  using std::integral_constant;
  const int rows = schedule.rows_per_cta, warps = schedule.narrow_producer_warps;
  if constexpr (kKind == kKv16Bit) {
    if (rows == 32 && warps == 1) return fn(integral_constant<int, 32>{}, integral_constant<int, 1>{});
  } else {
    if (rows == 32 && warps == 2) return fn(integral_constant<int, 32>{}, integral_constant<int, 2>{});
  }
  if (rows == 16 && warps == 1) return fn(integral_constant<int, 16>{}, integral_constant<int, 1>{});
  if constexpr (kKind == kKvDsMla) {
    if (rows == 16 && warps == 2) return fn(integral_constant<int, 16>{}, integral_constant<int, 2>{});
  }
  return cudaErrorInvalidConfiguration;
}

}  // namespace

cudaError_t prepare_sm90_decode(KVFormat format, bool q_is_bf16, const detail::Sm90Schedule& schedule) {
  if (schedule.rows_per_cta == 0) return cudaErrorInvalidValue;
  if (schedule.fp8_math) {
    if (format != KVFormat::kFP8E4M3) return cudaErrorInvalidValue;
    return q_is_bf16 ? sm90::prepare_fp8_math_decode_kernel<__nv_bfloat16>()
                     : sm90::prepare_fp8_math_decode_kernel<__half>();
  }
  return with_query_and_kind(format, q_is_bf16, [&](auto t, auto kind) -> cudaError_t {
    using T = decltype(t);
    constexpr int kKind = decltype(kind)::value;
    if constexpr (kNarrowInstantiated<T, kKind>) {
      if (schedule.narrow())
        return with_narrow_form<kKind>(schedule, [](auto r, auto w) {
          return sm90::prepare_narrow_decode_kernel<T, kKind, decltype(r)::value, decltype(w)::value>();
        });
    }
    return sm90::prepare_wide_decode_kernel<T, kKind>();
  });
}

cudaError_t launch_sm90_decode(DecodeParams& p, KVFormat format, bool q_is_bf16,
                               const detail::Sm90Schedule& schedule, bool programmatic, cudaStream_t stream) {
  if (schedule.rows_per_cta == 0) return cudaErrorInvalidValue;
  alignas(64) sm90::TensorMaps maps;
  if (schedule.fp8_math) {
    if (format != KVFormat::kFP8E4M3) return cudaErrorInvalidValue;
    if (const cudaError_t e = sm90::encode_fp8_math_kv_map(p, &maps); e != cudaSuccess) return e;
    p.fp16_partials = sm90::kFp8MathFp16Partials;
    return q_is_bf16 ? sm90::run_fp8_math_decode<__nv_bfloat16>(p, maps, programmatic, stream)
                     : sm90::run_fp8_math_decode<__half>(p, maps, programmatic, stream);
  }
  cudaError_t e =
      schedule.narrow() ? sm90::encode_narrow_kv_maps(p, format, &maps) : sm90::encode_kv_maps(p, format, &maps);
  if (e == cudaSuccess && !schedule.narrow()) e = sm90::encode_q_map(p, q_is_bf16, &maps.q);
  if (e != cudaSuccess) return e;
  return with_query_and_kind(format, q_is_bf16, [&](auto t, auto kind) -> cudaError_t {
    using T = decltype(t);
    constexpr int kKind = decltype(kind)::value;
    if constexpr (kNarrowInstantiated<T, kKind>) {
      if (schedule.narrow()) {
        p.fp16_partials = sm90::kNarrowFp16Partials<kKind>;
        return with_narrow_form<kKind>(schedule, [&](auto r, auto w) {
          return sm90::run_narrow_decode<T, kKind, decltype(r)::value, decltype(w)::value>(p, maps, programmatic,
                                                                                          stream);
        });
      }
    }
    p.fp16_partials = detail::sm90_wide_fp16_partials(p.rows, schedule.seesaw, p.batch, p.num_parts, p.max_pages);
    return sm90::run_wide_decode<T, kKind>(p, maps, schedule.seesaw, programmatic, stream);
  });
}

}  // namespace openmla::kernels
