// The KV tensor maps of the sm90 kernels (page id as the outermost coordinate) and the wide kernel's Q map,
// encoded on the host per call (the cache's base address and page stride are call arguments).
#include "kernels/sm90/decode/tensor_maps.h"

#include <cudaTypedefs.h>

#include "kernels/sm90/decode/fp8_math/config.h"
#include "kernels/sm90/decode/narrow/config.h"
#include "kernels/sm90/decode/wide/config.h"

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
// accepts. (Nine copies of one sub-tile each would cost the issuing thread ~1,200 clocks per page.)
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

}  // namespace

// The wide kernel's Q map (wide/kernel.cuh, issue_q_load): dims (576, h_q, s_q, b) with the query's strides,
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

// The wide kernel's KV maps for a kind (wide/kernel.cuh). 16-bit: tiles of 64 dims with the
// 128-B swizzle that wgmma's K-major and MN-major SW128 operands expect. FP8: raw bytes.
cudaError_t encode_wide_kv_maps(const DecodeParams& p, KVFormat format, TensorMaps* maps) {
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

// The FP8-math kernel's map (fp8_math/config.h): the e4m3 page as stored, 9 sub-tiles with the 64-B
// swizzle, the K-major layout of its e4m3 wgmma operands.
cudaError_t encode_fp8_math_kv_map(const DecodeParams& p, TensorMaps* maps) {
  return encode_page_chunks_map(p, kHeadDimQK, Fp8MathConfig::kBoxDims, Fp8MathConfig::kBoxes,
                                CU_TENSOR_MAP_SWIZZLE_64B, &maps->kv);
}

// The narrow kernel's maps (narrow/config.h, NarrowPage). e4m3: `kv` = the 512 latent bytes in
// boxes of 128 B x 64 tokens (SW128), `rope` = the 64 rope bytes (64 x 64). ds_mla: `kv` = a page
// as rows of 256 B (kNarrowCopyRowBytes), one box per page. 16-bit: `kv` = the page's nine 64-dim
// boxes (128 B x 64 tokens, SW128) in copies of kPartBoxes boxes. The 16-bit and ds_mla maps go
// without L2 promotion, as the wide kernel's 16-bit map for few rows (kKvNoPromotionMaxRows); e4m3's maps
// keep the 256-B promotion, which its boxes of 576-B rows need.
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

}  // namespace openmla::kernels::sm90
