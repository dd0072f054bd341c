// Host dispatch from run-time (query type, cache format) to the compile-time pair the kernels are
// instantiated for. Shared by the launchers of every decode kernel.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <type_traits>

#include "kernels/common/kv_kind.h"

namespace openmla::kernels {

// Calls fn(T{}, std::integral_constant<int, kind>{}) with T the query type (bf16 or fp16) and kind
// the cache format's KvKind; returns what fn returns.
template <class Fn>
cudaError_t with_query_and_kind(KVFormat format, bool q_is_bf16, Fn&& fn) {
  const auto call = [&](auto t) -> cudaError_t {
    switch (kv_kind(format)) {
      case kKv16Bit: return fn(t, std::integral_constant<int, kKv16Bit>{});
      case kKvE4M3: return fn(t, std::integral_constant<int, kKvE4M3>{});
      case kKvDsMla: return fn(t, std::integral_constant<int, kKvDsMla>{});
    }
    return cudaErrorInvalidValue;
  };
  return q_is_bf16 ? call(__nv_bfloat16{}) : call(__half{});
}

}  // namespace openmla::kernels
