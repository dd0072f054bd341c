// reference::move_kv: gather-then-scatter per group over raw token rows of every format, chained
// and swapped moves, several caches at once, device-guard error bits (bad slots, bad row ranges)
// with the rest of the cache untouched, and the host validation of its arguments.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "openmla/error.h"
#include "openmla/kv_format.h"
#include "openmla/move_kv.h"
#include "openmla/reference.h"

namespace openmla {
namespace {

constexpr KVFormat kAllFormats[] = {KVFormat::kBF16, KVFormat::kFP16, KVFormat::kFP8E4M3, KVFormat::kFP8DsMla};

DType cache_dtype(KVFormat f) {
  return f == KVFormat::kBF16 ? DType::kBFloat16 : f == KVFormat::kFP16 ? DType::kFloat16 : DType::kUInt8;
}

// A CPU cache of random bytes, with optional padding tokens per page.
struct Cache {
  KVFormat format;
  int num_pages;
  int64_t page_stride_bytes;
  std::vector<uint8_t> bytes;

  Cache(KVFormat f, int pages, int pad, uint64_t seed) : format(f), num_pages(pages) {
    page_stride_bytes = static_cast<int64_t>(kPageSize + pad) * kv_bytes_per_token(f);
    bytes.resize(static_cast<size_t>(pages * page_stride_bytes));
    std::mt19937_64 rng(seed);
    for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
  }
  KVCache view() {
    const DType dtype = cache_dtype(format);
    const int64_t w = kv_bytes_per_token(format) / dtype_size(dtype);
    KVCache kv;
    kv.format = format;
    kv.data = make_tensor_strided(bytes.data(), dtype, {num_pages, kPageSize, 1, w},
                                  {page_stride_bytes / dtype_size(dtype), w, w, 1});
    return kv;
  }
  std::vector<uint8_t> row(int64_t slot) const {
    const uint8_t* p = bytes.data() + slot / kPageSize * page_stride_bytes + slot % kPageSize * kv_bytes_per_token(format);
    return std::vector<uint8_t>(p, p + kv_bytes_per_token(format));
  }
};

struct Moves {
  std::vector<int32_t> src, dst, indptr{0};
  void group(std::initializer_list<std::pair<int32_t, int32_t>> rows) {
    for (const auto& [s, d] : rows) {
      src.push_back(s);
      dst.push_back(d);
    }
    indptr.push_back(static_cast<int32_t>(src.size()));
  }
  MoveKVArgs args(KVCache* caches, int num_caches) {
    MoveKVArgs a;
    a.src_slots = make_tensor(src.data(), DType::kInt32, {static_cast<int64_t>(src.size())});
    a.dst_slots = make_tensor(dst.data(), DType::kInt32, {static_cast<int64_t>(dst.size())});
    a.row_indptr = make_tensor(indptr.data(), DType::kInt32, {static_cast<int64_t>(indptr.size())});
    a.caches = caches;
    a.num_caches = num_caches;
    return a;
  }
};

// The expected cache after the moves: rows copied from a snapshot, so sources are old values.
std::vector<uint8_t> expected_after(const Cache& before, const std::vector<std::pair<int64_t, int64_t>>& moves) {
  Cache after = before;
  for (const auto& [src, dst] : moves) {
    const std::vector<uint8_t> row = before.row(src);
    std::memcpy(after.bytes.data() + dst / kPageSize * after.page_stride_bytes +
                    dst % kPageSize * kv_bytes_per_token(after.format),
                row.data(), row.size());
  }
  return after.bytes;
}

TEST(MoveKVRef, ChainedMovesReadOldSourcesInEveryFormat) {
  for (KVFormat f : kAllFormats) {
    for (int pad : {0, 1}) {
      SCOPED_TRACE(std::string(kv_format_name(f)) + " pad " + std::to_string(pad));
      Cache cache(f, 4, pad, 7);
      const Cache before = cache;
      // Group 0: an accepted path 0, 2, 5, 6 of a tree at slots 70..: 72 -> 71, 75 -> 72, 76 -> 73.
      // Group 1: a swap and a no-op. Group 2: empty. Group 3: a move across pages.
      Moves m;
      m.group({{72, 71}, {75, 72}, {76, 73}});
      m.group({{10, 11}, {11, 10}, {12, 12}});
      m.group({});
      m.group({{200, 130}});
      KVCache kv = cache.view();
      EXPECT_EQ(reference::move_kv(m.args(&kv, 1)), 0u);
      EXPECT_EQ(cache.bytes, expected_after(before, {{72, 71}, {75, 72}, {76, 73}, {10, 11}, {11, 10}, {200, 130}}));
    }
  }
}

TEST(MoveKVRef, SameMovesInEveryCache) {
  std::vector<Cache> layers;
  for (int l = 0; l < 3; ++l) layers.emplace_back(KVFormat::kFP8DsMla, 2, 0, 100 + l);
  std::vector<Cache> before = layers;
  std::vector<KVCache> views;
  for (Cache& c : layers) views.push_back(c.view());
  Moves m;
  m.group({{3, 1}, {1, 0}});
  EXPECT_EQ(reference::move_kv(m.args(views.data(), 3)), 0u);
  for (int l = 0; l < 3; ++l) EXPECT_EQ(layers[l].bytes, expected_after(before[l], {{3, 1}, {1, 0}})) << "layer " << l;
}

TEST(MoveKVRef, BadSlotsAreFlaggedAndSkipped) {
  Cache cache(KVFormat::kBF16, 2, 0, 9);  // slots 0..127
  const Cache before = cache;
  Moves m;
  m.group({{5, 4}, {128, 6}, {7, -1}, {-3, 8}, {9, 8}});
  KVCache kv = cache.view();
  EXPECT_EQ(reference::move_kv(m.args(&kv, 1)), unsigned{kDeviceErrorSlotOutOfRange});
  EXPECT_EQ(cache.bytes, expected_after(before, {{5, 4}, {9, 8}}));
}

TEST(MoveKVRef, BadRowRangesMoveNothingForThatGroup) {
  Cache cache(KVFormat::kFP16, 4, 0, 11);
  const Cache before = cache;
  for (std::vector<int32_t> indptr : {std::vector<int32_t>{0, 1, 0}, {0, 1, 3}, {-1, 1, 1}, {0, 1, 1}}) {
    cache.bytes = before.bytes;
    Moves m;
    m.src = {20, 30};
    m.dst = {10, 21};
    m.indptr = indptr;
    KVCache kv = cache.view();
    const bool bad = indptr != std::vector<int32_t>{0, 1, 1};
    EXPECT_EQ(reference::move_kv(m.args(&kv, 1)), bad ? unsigned{kDeviceErrorQueryOffsets} : 0u);
    // Group 0 = row 0 (20 -> 10) is valid except when its own range starts at -1.
    const bool group0_moves = indptr[0] == 0;
    EXPECT_EQ(cache.bytes, group0_moves ? expected_after(before, {{20, 10}}) : before.bytes);
  }
  // A group longer than kMaxMoveRowsPerGroup.
  Moves m;
  for (int i = 0; i <= kMaxMoveRowsPerGroup; ++i) {
    m.src.push_back(i);
    m.dst.push_back(i);
  }
  m.indptr = {0, kMaxMoveRowsPerGroup + 1};
  KVCache kv = cache.view();
  EXPECT_EQ(reference::move_kv(m.args(&kv, 1)), unsigned{kDeviceErrorQueryOffsets});
}

TEST(MoveKVRef, Int64Slots) {
  Cache cache(KVFormat::kFP8E4M3, 2, 0, 13);
  const Cache before = cache;
  std::vector<int64_t> src{40, int64_t{1} << 33}, dst{39, 1};
  std::vector<int32_t> indptr{0, 2};
  KVCache kv = cache.view();
  MoveKVArgs a;
  a.src_slots = make_tensor(src.data(), DType::kInt64, {2});
  a.dst_slots = make_tensor(dst.data(), DType::kInt64, {2});
  a.row_indptr = make_tensor(indptr.data(), DType::kInt32, {2});
  a.caches = &kv;
  a.num_caches = 1;
  EXPECT_EQ(reference::move_kv(a), unsigned{kDeviceErrorSlotOutOfRange});
  EXPECT_EQ(cache.bytes, expected_after(before, {{40, 39}}));
}

void expect_invalid(const MoveKVArgs& a, const std::string& needle) {
  try {
    reference::move_kv(a);
    FAIL() << "accepted invalid arguments (expected a message containing '" << needle << "')";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::kInvalidArgument) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(MoveKVRef, Validation) {
  Cache a(KVFormat::kBF16, 2, 0, 1), b(KVFormat::kBF16, 2, 0, 2), c(KVFormat::kFP16, 2, 0, 3), d(KVFormat::kBF16, 3, 0, 4);
  Moves m;
  m.group({{1, 0}});
  KVCache two[2] = {a.view(), b.view()};
  EXPECT_EQ(reference::move_kv(m.args(two, 2)), 0u);

  expect_invalid(m.args(two, 0), "num_caches: expected in [1, 128]");
  expect_invalid(m.args(nullptr, 1), "caches: expected a pointer to num_caches = 1 KVCache views, got nullptr");
  KVCache mixed[2] = {a.view(), c.view()};
  expect_invalid(m.args(mixed, 2), "caches[1].format: expected bf16 (the format of caches[0]), got fp16");
  KVCache sizes[2] = {a.view(), d.view()};
  expect_invalid(m.args(sizes, 2), "caches[1]: expected 2 pages");
  KVCache same[2] = {a.view(), a.view()};
  expect_invalid(m.args(same, 2), "caches[1]: expected memory disjoint from caches[0]");
  // Page-interleaved layers (layer stride = one page, page stride = two pages) share no byte.
  Cache both(KVFormat::kBF16, 4, 0, 5);
  KVCache interleaved[2] = {both.view(), both.view()};
  for (KVCache& kv : interleaved) {
    kv.data.shape[0] = 2;
    kv.data.strides[0] *= 2;
  }
  interleaved[1].data.data = both.bytes.data() + 64 * kv_bytes_per_token(KVFormat::kBF16);
  EXPECT_EQ(reference::move_kv(m.args(interleaved, 2)), 0u);
  interleaved[1].data.data = both.bytes.data() + 63 * kv_bytes_per_token(KVFormat::kBF16);
  expect_invalid(m.args(interleaved, 2), "memory disjoint");

  KVCache one = a.view();
  MoveKVArgs bad = m.args(&one, 1);
  bad.dst_slots.dtype = DType::kInt64;
  expect_invalid(bad, "dst_slots: expected dtype int32 (the dtype of src_slots), got int64");
  bad = m.args(&one, 1);
  bad.row_indptr.dtype = DType::kInt64;
  expect_invalid(bad, "row_indptr: expected dtype int32");
  bad = m.args(&one, 1);
  bad.dst_slots.shape[0] = 2;
  expect_invalid(bad, "dst_slots: expected shape [m] = [1]");
  bad = m.args(&one, 1);
  bad.row_indptr.shape[0] = 0;
  expect_invalid(bad, "row_indptr: expected shape [g + 1]");
  bad = m.args(&one, 1);
  bad.src_slots = TensorView{};
  expect_invalid(bad, "src_slots: expected a tensor of shape [m]");
}

TEST(MoveKVRef, EmptyArraysReadNothing) {
  Cache cache(KVFormat::kBF16, 1, 0, 3);
  const Cache before = cache;
  Moves m;  // m = 0: row_indptr = {0} (g = 0)
  KVCache kv = cache.view();
  EXPECT_EQ(reference::move_kv(m.args(&kv, 1)), 0u);
  EXPECT_EQ(cache.bytes, before.bytes);
}

}  // namespace
}  // namespace openmla
