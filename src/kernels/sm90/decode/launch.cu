// Dispatch from the launch configuration (kernel form, query type, cache kind) to the instantiations.
#include "kernels/sm90/decode/launch.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include "kernels/common/dispatch.cuh"
#include "kernels/common/kv_kind.h"
#include "kernels/sm90/decode/fp8_math/launch.h"
#include "kernels/sm90/decode/narrow/launch.h"
#include "kernels/sm90/decode/tensor_maps.h"
#include "kernels/sm90/decode/wide/launch.h"

namespace openmla::kernels::sm90 {
namespace {

// The (query type, cache kind) pairs the narrow kernel is instantiated for (choose_schedule picks it for no
// other).
template <typename T, int kKind>
inline constexpr bool kNarrowInstantiated =
    kKind == kKvE4M3 || kKind == kKv16Bit || (kKind == kKvDsMla && std::is_same_v<T, __nv_bfloat16>);

// Calls fn(rows, producer warps) (integral constants) for the narrow kernel's instantiated forms:
// (16, 1), (32, 2) for FP8, (32, 1) for 16-bit, and (16, 2) for ds_mla (choose_schedule picks no other);
// any other form is an error, never another kernel.
template <int kKind, class Fn>
cudaError_t with_narrow_form(const Schedule& schedule, Fn&& fn) {
  using std::integral_constant;
  const int rows = schedule.rows_per_cta, warps = schedule.producer_warps;
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

cudaError_t prepare_decode(const LaunchConfig& config) {
  const Schedule& schedule = config.schedule;
  switch (schedule.variant) {
    case Variant::kNone: return cudaErrorInvalidValue;
    case Variant::kFp8Math:
      if (config.kv_format != KVFormat::kFP8E4M3) return cudaErrorInvalidValue;
      return config.q_is_bf16 ? prepare_fp8_math_decode_kernel<__nv_bfloat16>()
                              : prepare_fp8_math_decode_kernel<__half>();
    case Variant::kNarrow:
    case Variant::kWide: break;
  }
  return with_query_and_kind(config.kv_format, config.q_is_bf16, [&](auto t, auto kind) -> cudaError_t {
    using T = decltype(t);
    constexpr int kKind = decltype(kind)::value;
    if (schedule.variant == Variant::kNarrow) {
      if constexpr (kNarrowInstantiated<T, kKind>) {
        return with_narrow_form<kKind>(schedule, [](auto r, auto w) {
          return prepare_narrow_decode_kernel<T, kKind, decltype(r)::value, decltype(w)::value>();
        });
      }
      return cudaErrorInvalidConfiguration;
    }
    return prepare_wide_decode_kernel<T, kKind>();
  });
}

cudaError_t launch_decode(const DecodeParams& p, const LaunchConfig& config, bool programmatic, cudaStream_t stream) {
  const Schedule& schedule = config.schedule;
  alignas(64) TensorMaps maps;
  switch (schedule.variant) {
    case Variant::kNone: return cudaErrorInvalidValue;
    case Variant::kFp8Math:
      if (config.kv_format != KVFormat::kFP8E4M3) return cudaErrorInvalidValue;
      if (const cudaError_t e = encode_fp8_math_kv_map(p, &maps); e != cudaSuccess) return e;
      return config.q_is_bf16 ? run_fp8_math_decode<__nv_bfloat16>(p, maps, programmatic, stream)
                              : run_fp8_math_decode<__half>(p, maps, programmatic, stream);
    case Variant::kNarrow:
      if (const cudaError_t e = encode_narrow_kv_maps(p, config.kv_format, &maps); e != cudaSuccess) return e;
      break;
    case Variant::kWide: {
      cudaError_t e = encode_wide_kv_maps(p, config.kv_format, &maps);
      if (e == cudaSuccess) e = encode_q_map(p, config.q_is_bf16, &maps.q);
      if (e != cudaSuccess) return e;
      break;
    }
  }
  return with_query_and_kind(config.kv_format, config.q_is_bf16, [&](auto t, auto kind) -> cudaError_t {
    using T = decltype(t);
    constexpr int kKind = decltype(kind)::value;
    if (schedule.variant == Variant::kNarrow) {
      if constexpr (kNarrowInstantiated<T, kKind>) {
        return with_narrow_form<kKind>(schedule, [&](auto r, auto w) {
          return run_narrow_decode<T, kKind, decltype(r)::value, decltype(w)::value>(p, maps, programmatic, stream);
        });
      }
      return cudaErrorInvalidConfiguration;
    }
    return run_wide_decode<T, kKind>(p, maps, schedule.seesaw, programmatic, stream);
  });
}

}  // namespace openmla::kernels::sm90
