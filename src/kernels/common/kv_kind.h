// How the cache stores a token, as the kernels are instantiated (bf16 and fp16 caches are the
// 16-bit kind, read in the query's type). Byte layouts: docs/kv-formats.md.
#pragma once

#include "openmla/kv_format.h"

namespace openmla::kernels {

enum KvKind : int {
  kKv16Bit = 0,  // 576 x bf16/fp16 (1152 B)
  kKvE4M3 = 1,   // 576 x e4m3, per-tensor scale folded into the softmax scale and the output (576 B)
  kKvDsMla = 2,  // 512 x e4m3 | 4 x f32 tile scale | 64 x bf16 rope (656 B)
};

inline constexpr KvKind kv_kind(KVFormat f) {
  return f == KVFormat::kFP8E4M3 ? kKvE4M3 : f == KVFormat::kFP8DsMla ? kKvDsMla : kKv16Bit;
}

}  // namespace openmla::kernels
