// What the sm90a decode kernels (wide/, narrow/, fp8_math/) share: the head dimensions, the page size and
// the tensor maps of a call.
#pragma once

#include <cuda.h>  // CUtensorMap

namespace openmla::kernels::sm90 {

inline constexpr int kHeadDimQK = 576;
inline constexpr int kHeadDimV = 512;
inline constexpr int kPageTokens = 64;

// The tensor maps of a call (tensor_maps.cu): the cache's and, for the wide kernel, the query's. 16-bit
// caches: `kv` only, boxes of 64 dims x 64 tokens, SW128. e4m3: `kv`, bytes, boxes of 64 x 64. ds_mla:
// `kv` (latent bytes, 64 x 64), `scales` (16 B x 64 tokens) and `rope` (128 B x 64 tokens, SW128: lands
// as the bf16 tile of box 8). The wide kernel also reads the query through `q`.
struct TensorMaps {
  CUtensorMap kv;
  CUtensorMap scales;
  CUtensorMap rope;
  CUtensorMap q;  // the wide kernel's Q: (576 dims, h_q, s_q, b), boxes of 64 dims x one m-tile's 64 rows, SW128
};

}  // namespace openmla::kernels::sm90
