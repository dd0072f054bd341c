// Dispatch from the launch configuration (tile, query type, cache kind) to the instantiations.
#include "kernels/portable/decode/launch.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include "kernels/common/dispatch.cuh"
#include "kernels/portable/decode/tiles.h"

namespace openmla::kernels::portable {
namespace {

template <class Cfg, class Fn>
cudaError_t with_kind(const LaunchConfig& c, Fn&& fn) {
  return with_query_and_kind(c.kv_format, c.q_is_bf16, [&](auto t, auto kind) {
    if (c.sparse_keys) return fn(Cfg{}, t, kind, std::integral_constant<int, kSparseKeys>{});
    if (c.general_queries) return fn(Cfg{}, t, kind, std::integral_constant<int, kGeneralQueries>{});
    return fn(Cfg{}, t, kind, std::integral_constant<int, kUniformQueries>{});
  });
}

// Calls fn(Cfg{}, T{}, kind, queries) for the config's instantiation.
template <class Fn>
cudaError_t with_kernel(const LaunchConfig& c, Fn&& fn) {
  switch (c.tile) {
    case PortableTile::kRows16Tokens64: return with_kind<TileRows16Tokens64>(c, fn);
    case PortableTile::kRows64Tokens64: return with_kind<TileRows64Tokens64>(c, fn);
    case PortableTile::kRows64Tokens32: return with_kind<TileRows64Tokens32>(c, fn);
    case PortableTile::kRows16Tokens32Warps4: return with_kind<TileRows16Tokens32Warps4>(c, fn);
    case PortableTile::kAuto: break;
  }
  return cudaErrorInvalidValue;
}

}  // namespace

cudaError_t prepare_decode(const LaunchConfig& config, int* resident_ctas_per_sm) {
  return with_kernel(config, [&](auto cfg, auto t, auto kind, auto queries) {
    using Cfg = decltype(cfg);
    using T = decltype(t);
    constexpr int kKind = decltype(kind)::value;
    constexpr int kQueries = decltype(queries)::value;
    if (const cudaError_t e = prepare_portable_decode_kernel<Cfg, T, kKind, kQueries>(); e != cudaSuccess) return e;
    return portable_decode_occupancy<Cfg, T, kKind, kQueries>(resident_ctas_per_sm);
  });
}

cudaError_t launch_decode(const DecodeParams& p, const LaunchConfig& config, bool programmatic, cudaStream_t stream) {
  return with_kernel(config, [&](auto cfg, auto t, auto kind, auto queries) {
    return run_portable_decode<decltype(cfg), decltype(t), decltype(kind)::value, decltype(queries)::value>(
        p, programmatic, stream);
  });
}

}  // namespace openmla::kernels::portable
