// Test data for sparse decode: random paged caches of any format and page block size, with the dequantized value
// of every slot kept beside the encoded bytes (what an oracle reads without the library's addressing).
#pragma once

#include <cstdint>
#include <vector>

#include "openmla/kv_format.h"

namespace openmla::testing {

struct SparseCache {
  KVFormat format = KVFormat::kBF16;
  int num_pages = 0;
  int page_block_size = 64;
  int page_pad_tokens = 0;            // page stride = (page_block_size + pad) tokens
  float scale = 1.0f;                 // kFP8E4M3: value = code * scale
  bool device_scale = false;          // kFP8E4M3: scale held as a (host) tensor, KVCache::device_scale
  std::vector<uint8_t> bytes;         // num_pages pages; 16-byte aligned (operator new)
  std::vector<float> values;          // [num_pages * page_block_size, 576]: the dequantized slots
  int64_t num_slots() const { return int64_t{num_pages} * page_block_size; }
  int64_t page_stride_elems() const;  // in elements of the view's dtype
  KVCache view();                     // a CPU view (device_scale pointing at `scale`)
};

// Random latent / rope values (about N(0, 1)) encoded in `format`; padding tokens hold 0xFF bytes (NaN).
SparseCache make_sparse_cache(KVFormat format, int num_pages, int page_block_size, uint64_t seed,
                              int page_pad_tokens = 0, float e4m3_scale = 0.03125f, bool device_scale = false);

}  // namespace openmla::testing
