// Host dispatch from run-time (query type, cache format) to the compile-time pair the kernels are
// instantiated for. Shared by the launchers of every decode kernel.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include "kernels/common/kv_kind.h"

namespace openmla::kernels {

// Calls fn(T{}, std::integral_constant<int, kind>{}) with T the query type (bf16 or fp16) and kind
// the cache format's KvKind (with_kv_kind); returns what fn returns.
template <class Fn>
cudaError_t with_query_and_kind(KVFormat format, bool q_is_bf16, Fn&& fn) {
  const auto call = [&](auto t) -> cudaError_t {
    return with_kv_kind(format, [&](auto kind) -> cudaError_t { return fn(t, kind); });
  };
  return q_is_bf16 ? call(__nv_bfloat16{}) : call(__half{});
}

}  // namespace openmla::kernels
