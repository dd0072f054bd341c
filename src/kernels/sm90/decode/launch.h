// Host side of the sm90a decode kernels: the KV tensor maps and the launches.
#pragma once

#include <cuda_runtime_api.h>

#include "kernels/common/decode_params.h"
#include "kernels/sm90/decode/config.h"

namespace openmla::kernels::sm90 {

// The instantiations (instantiations/*.cu) behind kernels::prepare_sm90_decode and
// kernels::launch_sm90_decode (kernels/common/launch.h): grid (m_tiles of 64 rows, p.num_parts).
// kKind: kernels/common/kv_kind.h. seesaw: the consumers' schedule (Sm90Schedule::seesaw, kernel.cuh);
// prepare readies both.
template <typename T, int kKind>
cudaError_t run_wide_decode(const DecodeParams& p, const TensorMaps& maps, bool seesaw, bool programmatic,
                            cudaStream_t stream);
template <typename T, int kKind>
cudaError_t prepare_wide_decode_kernel();

// The narrow kernel (narrow_kernel.cuh): grid (m_tiles of kRows rows, p.num_parts), its own maps
// (launch.cu, NarrowPage). kRows: 16 or 32; kProducerWarps: 1 or 2 (NarrowConfig).
template <typename T, int kKind, int kRows, int kProducerWarps>
cudaError_t run_narrow_decode(const DecodeParams& p, const TensorMaps& maps, bool programmatic, cudaStream_t stream);
template <typename T, int kKind, int kRows, int kProducerWarps>
cudaError_t prepare_narrow_decode_kernel();

// The FP8-math kernel (fp8_math_kernel.cuh; per-tensor e4m3 caches): grid (m_tiles of 64 rows,
// p.num_parts), the `kv` map of encode_fp8_math_kv_map (launch.cu). T: the query type.
template <typename T>
cudaError_t run_fp8_math_decode(const DecodeParams& p, const TensorMaps& maps, bool programmatic, cudaStream_t stream);
template <typename T>
cudaError_t prepare_fp8_math_decode_kernel();

}  // namespace openmla::kernels::sm90
