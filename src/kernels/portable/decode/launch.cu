// Dispatch from (tile, query dtype, cache kind) to the instantiations.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/common/dispatch.cuh"
#include "kernels/common/launch.h"
#include "kernels/portable/decode/launch.h"
#include "kernels/portable/decode/tiles.h"

namespace openmla::kernels {

namespace {

template <class Cfg, class Fn>
cudaError_t with_kind(KVFormat format, bool q_is_bf16, Fn&& fn) {
  return with_query_and_kind(format, q_is_bf16, [&](auto t, auto kind) { return fn(Cfg{}, t, kind); });
}

template <class Fn>
cudaError_t with_kernel(detail::PortableTile tile, KVFormat format, bool q_is_bf16, Fn&& fn) {
  using namespace portable;
  switch (tile) {
    case detail::PortableTile::kRows16Tokens64: return with_kind<TileRows16Tokens64>(format, q_is_bf16, fn);
    case detail::PortableTile::kRows64Tokens64: return with_kind<TileRows64Tokens64>(format, q_is_bf16, fn);
    case detail::PortableTile::kRows64Tokens32: return with_kind<TileRows64Tokens32>(format, q_is_bf16, fn);
    case detail::PortableTile::kRows16Tokens32Warps4: return with_kind<TileRows16Tokens32Warps4>(format, q_is_bf16, fn);
  }
  return cudaErrorInvalidValue;
}

}  // namespace

cudaError_t prepare_portable_decode(detail::PortableTile tile, KVFormat format, bool q_is_bf16) {
  return with_kernel(tile, format, q_is_bf16, [](auto cfg, auto t, auto kind) {
    return portable::prepare_portable_decode_kernel<decltype(cfg), decltype(t), decltype(kind)::value>();
  });
}

cudaError_t portable_decode_ctas_per_sm(detail::PortableTile tile, KVFormat format, bool q_is_bf16, int* ctas) {
  return with_kernel(tile, format, q_is_bf16, [&](auto cfg, auto t, auto kind) {
    return portable::portable_decode_occupancy<decltype(cfg), decltype(t), decltype(kind)::value>(ctas);
  });
}

cudaError_t launch_portable_decode(DecodeParams& p, detail::PortableTile tile, KVFormat format, bool q_is_bf16,
                                   bool programmatic, cudaStream_t stream) {
  p.fp16_partials = portable::kPortableFp16Partials;
  return with_kernel(tile, format, q_is_bf16, [&](auto cfg, auto t, auto kind) {
    return portable::run_portable_decode<decltype(cfg), decltype(t), decltype(kind)::value>(p, programmatic, stream);
  });
}

}  // namespace openmla::kernels
