// Dispatch from (tile, dtype) to the instantiations.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/common/launch.h"
#include "kernels/sm80/decode/launch.h"
#include "kernels/sm80/decode/tiles.h"

namespace openmla::kernels {

namespace {
template <class Fn>
cudaError_t with_tile(detail::PortableTile tile, bool q_is_bf16, Fn&& fn) {
  using namespace portable;
  switch (tile) {
    case detail::PortableTile::kRows16Tokens64:
      return q_is_bf16 ? fn(TileRows16Tokens64{}, __nv_bfloat16{}) : fn(TileRows16Tokens64{}, __half{});
    case detail::PortableTile::kRows64Tokens64:
      return q_is_bf16 ? fn(TileRows64Tokens64{}, __nv_bfloat16{}) : fn(TileRows64Tokens64{}, __half{});
    case detail::PortableTile::kRows64Tokens32:
      return q_is_bf16 ? fn(TileRows64Tokens32{}, __nv_bfloat16{}) : fn(TileRows64Tokens32{}, __half{});
    case detail::PortableTile::kRows16Tokens32W4:
      return q_is_bf16 ? fn(TileRows16Tokens32W4{}, __nv_bfloat16{}) : fn(TileRows16Tokens32W4{}, __half{});
  }
  return cudaErrorInvalidValue;
}
}  // namespace

cudaError_t prepare_portable_decode(detail::PortableTile tile, bool q_is_bf16) {
  return with_tile(tile, q_is_bf16, [](auto cfg, auto t) {
    return portable::prepare_portable_decode_kernel<decltype(cfg), decltype(t)>();
  });
}

cudaError_t portable_decode_ctas_per_sm(detail::PortableTile tile, bool q_is_bf16, int* ctas) {
  return with_tile(tile, q_is_bf16, [&](auto cfg, auto t) {
    return portable::portable_decode_occupancy<decltype(cfg), decltype(t)>(ctas);
  });
}

cudaError_t launch_portable_decode(const DecodeParams& p, detail::PortableTile tile, bool q_is_bf16,
                                   bool programmatic, cudaStream_t stream) {
  return with_tile(tile, q_is_bf16, [&](auto cfg, auto t) {
    return portable::run_portable_decode<decltype(cfg), decltype(t)>(p, programmatic, stream);
  });
}

}  // namespace openmla::kernels
