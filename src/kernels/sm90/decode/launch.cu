// KV tensor map (page id as the third coordinate) and dispatch on the query type.
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/common/launch.h"
#include "kernels/sm90/decode/config.h"
#include "kernels/sm90/decode/launch.h"

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

// The whole 16-bit cache as a 3-D tensor (dim, token in page, page): box (64 dims, 64 tokens, 1
// page) with the 128-B swizzle that wgmma's K-major and MN-major SW128 operands expect.
cudaError_t encode_kv_map(const DecodeParams& p, bool bf16, CUtensorMap* map) {
  auto encode = encode_tiled();
  if (encode == nullptr) return cudaErrorNotSupported;
  // With a single page the page stride is never used (and not validated); any legal value does.
  const uint64_t page_stride = p.num_pages > 1 ? static_cast<uint64_t>(p.page_stride_bytes)
                                               : static_cast<uint64_t>(WideConfig::kTileBytes);
  const cuuint64_t dims[3] = {static_cast<cuuint64_t>(kHeadDimQK), static_cast<cuuint64_t>(kPageTokens),
                              static_cast<cuuint64_t>(p.num_pages)};
  const cuuint64_t strides[2] = {static_cast<cuuint64_t>(kHeadDimQK * 2), page_stride};
  const cuuint32_t box[3] = {WideConfig::kBoxDims, WideConfig::kTokens, 1};
  const cuuint32_t elem_strides[3] = {1, 1, 1};
  const CUresult r = encode(map, bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 3,
                            const_cast<uint8_t*>(p.kv), dims, strides, box, elem_strides,
                            CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                            CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue;
}

}  // namespace

}  // namespace openmla::kernels::sm90

namespace openmla::kernels {

cudaError_t prepare_sm90_decode(bool q_is_bf16) {
  return q_is_bf16 ? sm90::prepare_wide_decode_kernel<__nv_bfloat16>() : sm90::prepare_wide_decode_kernel<__half>();
}

cudaError_t launch_sm90_decode(const DecodeParams& p, bool q_is_bf16, bool programmatic, cudaStream_t stream) {
  alignas(64) CUtensorMap map;
  if (const cudaError_t e = sm90::encode_kv_map(p, q_is_bf16, &map); e != cudaSuccess) return e;
  return q_is_bf16 ? sm90::run_wide_decode<__nv_bfloat16>(p, &map, programmatic, stream)
                   : sm90::run_wide_decode<__half>(p, &map, programmatic, stream);
}

}  // namespace openmla::kernels
