// How the cache stores a token, as the kernels are instantiated: the compile-time form of the API's
// KVFormat (bf16 and fp16 caches are one kind, the 16-bit one, read in the query's type). The mapping
// from KVFormat is here and nowhere else. Byte layouts: docs/kv-formats.md.
#pragma once

#include <type_traits>

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

// Calls fn(std::integral_constant<int, kind>{}) with the format's kind; returns what fn returns.
template <class Fn>
constexpr decltype(auto) with_kv_kind(KVFormat format, Fn&& fn) {
  switch (kv_kind(format)) {
    case kKvE4M3: return fn(std::integral_constant<int, kKvE4M3>{});
    case kKvDsMla: return fn(std::integral_constant<int, kKvDsMla>{});
    case kKv16Bit: break;
  }
  return fn(std::integral_constant<int, kKv16Bit>{});
}

}  // namespace openmla::kernels
