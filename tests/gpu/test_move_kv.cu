// GPU move_kv against the CPU oracle (openmla::reference::move_kv): whole caches, byte for byte,
// for every KV format, with the moves of random EAGLE trees' accepted paths (PagePool::commit_path
// over random parent arrays), chained and swapped moves inside a group, several caches per launch,
// bad slots and bad row ranges (flagged, the rest of the cache untouched), int64 slots, and one
// CUDA graph replayed with new moves and counts.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "gpu/gpu_util.h"
#include "openmla/error.h"
#include "openmla/move_kv.h"
#include "openmla/reference.h"
#include "openmla/runtime/forward_buffers.h"
#include "openmla/runtime/page_pool.h"

namespace openmla::testing {
namespace {

constexpr KVFormat kAllFormats[] = {KVFormat::kBF16, KVFormat::kFP16, KVFormat::kFP8E4M3, KVFormat::kFP8DsMla};

DType cache_dtype(KVFormat f) {
  return f == KVFormat::kBF16 ? DType::kBFloat16 : f == KVFormat::kFP16 ? DType::kFloat16 : DType::kUInt8;
}

// The layout of num_caches caches of random bytes, in one host vector (cache c at c * cache_bytes).
struct Caches {
  KVFormat format = KVFormat::kBF16;
  int num_pages = 0;
  int num_caches = 1;
  int page_pad_tokens = 0;
  bool four_dims = true;
  int64_t page_stride_bytes = 0;
  int64_t cache_bytes = 0;
  std::vector<uint8_t> bytes;

  Caches(KVFormat f, int pages, int caches, int pad, bool dims4, uint64_t seed)
      : format(f), num_pages(pages), num_caches(caches), page_pad_tokens(pad), four_dims(dims4) {
    page_stride_bytes = static_cast<int64_t>(kPageSize + pad) * kv_bytes_per_token(f);
    cache_bytes = page_stride_bytes * pages;
    bytes.resize(static_cast<size_t>(cache_bytes * caches));
    std::mt19937_64 rng(seed);
    for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
  }
  std::vector<KVCache> views(uint8_t* base, DeviceType device, int device_id) const {
    const DType dtype = cache_dtype(format);
    const int64_t w = kv_bytes_per_token(format) / dtype_size(dtype);
    const int64_t page_stride = page_stride_bytes / dtype_size(dtype);
    std::vector<KVCache> out;
    for (int c = 0; c < num_caches; ++c) {
      KVCache kv;
      kv.format = format;
      kv.scale = 0.5f;
      void* data = base + c * cache_bytes;
      kv.data = four_dims ? make_tensor_strided(data, dtype, {num_pages, kPageSize, 1, w}, {page_stride, w, w, 1},
                                                device, device_id)
                          : make_tensor_strided(data, dtype, {num_pages, kPageSize, w}, {page_stride, w, 1}, device,
                                                device_id);
      out.push_back(kv);
    }
    return out;
  }
};

// Moves in move_kv's arrays (int64 copies for the int64 case).
struct MoveArrays {
  std::vector<int64_t> src, dst;
  std::vector<int32_t> indptr{0};
  void end_group() { indptr.push_back(static_cast<int32_t>(src.size())); }
  void add(int64_t s, int64_t d) {
    src.push_back(s);
    dst.push_back(d);
  }
  std::vector<uint8_t> slot_bytes(const std::vector<int64_t>& v, bool int64, size_t capacity) const {
    const size_t elem = int64 ? 8 : 4;
    std::vector<uint8_t> out(std::max(capacity, v.size()) * elem, 0);
    for (size_t i = 0; i < v.size(); ++i) {
      const int32_t narrow = static_cast<int32_t>(v[i]);
      std::memcpy(out.data() + elem * i, int64 ? static_cast<const void*>(&v[i]) : &narrow, elem);
    }
    return out;
  }
};

// The moves of `groups` random tree accepts in a pool of num_pages pages: each request gets a
// random prefix, reserves a tree of 1..max_tree tokens (random parents, sometimes several roots),
// accepts a random root-to-node path and commits it. Requests own disjoint pages, so groups never
// share a slot.
MoveArrays tree_accept_moves(int num_pages, int groups, int max_tree, std::mt19937_64& rng) {
  runtime::PagePool pool(num_pages);
  MoveArrays m;
  auto below = [&](int64_t n) { return static_cast<int64_t>(rng() % static_cast<uint64_t>(n)); };
  for (int g = 0; g < groups; ++g) {
    const int64_t prefix = below(200);
    const int64_t n = 1 + below(max_tree);
    if (pool.pages_needed_to_create(prefix + n) > pool.free_pages()) {
      m.end_group();  // no room: an empty group
      continue;
    }
    const runtime::RequestId r = pool.create(prefix);
    pool.reserve(r, n);
    std::vector<int64_t> parent(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) parent[i] = i == 0 || below(20) == 0 ? -1 : below(i);
    std::vector<int32_t> path;
    // Deep paths too (a chain down the tree), so groups reach 100+ rows.
    const int64_t leaf = below(3) == 0 ? n - 1 : below(n);
    if (below(3) == 0) {
      for (int64_t i = 1; i < n; ++i) parent[i] = i - 1 - below(std::min<int64_t>(i, 2));
    }
    for (int64_t node = leaf; node >= 0; node = parent[node]) path.push_back(static_cast<int32_t>(node));
    std::reverse(path.begin(), path.end());
    for (const runtime::SlotMove& mv : pool.commit_path(r, path)) m.add(mv.src_slot, mv.dst_slot);
    m.end_group();
  }
  return m;
}

struct Result {
  std::vector<uint8_t> bytes;
  unsigned error_word = 0;
};

std::string first_difference(const Caches& c, const std::vector<uint8_t>& want, const std::vector<uint8_t>& got) {
  size_t differing = 0, first = 0;
  for (size_t i = 0; i < want.size(); ++i)
    if (want[i] != got[i] && differing++ == 0) first = i;
  if (differing == 0) return "";
  const int64_t in_cache = static_cast<int64_t>(first) % c.cache_bytes;
  std::ostringstream os;
  os << "cache " << static_cast<int64_t>(first) / c.cache_bytes << " page " << in_cache / c.page_stride_bytes
     << " token " << in_cache % c.page_stride_bytes / kv_bytes_per_token(c.format) << ": " << differing
     << " bytes differ";
  return os.str();
}

MoveKVArgs make_args(const MoveArrays& m, bool int64, void* src, void* dst, void* indptr, int64_t capacity,
                     const std::vector<KVCache>& caches, DeviceType device, int device_id) {
  MoveKVArgs a;
  const DType t = int64 ? DType::kInt64 : DType::kInt32;
  a.src_slots = make_tensor(src, t, {capacity}, device, device_id);
  a.dst_slots = make_tensor(dst, t, {capacity}, device, device_id);
  a.row_indptr = make_tensor(indptr, DType::kInt32, {static_cast<int64_t>(m.indptr.size())}, device, device_id);
  a.caches = caches.data();
  a.num_caches = static_cast<int>(caches.size());
  return a;
}

Result run_reference(const Caches& c, const MoveArrays& m, bool int64, int64_t capacity) {
  Result r;
  r.bytes = c.bytes;
  std::vector<uint8_t> src = m.slot_bytes(m.src, int64, static_cast<size_t>(capacity));
  std::vector<uint8_t> dst = m.slot_bytes(m.dst, int64, static_cast<size_t>(capacity));
  std::vector<int32_t> indptr = m.indptr;
  const std::vector<KVCache> views = c.views(r.bytes.data(), DeviceType::kCPU, 0);
  r.error_word = reference::move_kv(
      make_args(m, int64, src.data(), dst.data(), indptr.data(), capacity, views, DeviceType::kCPU, 0));
  return r;
}

Result run_gpu(const Caches& c, const MoveArrays& m, bool int64, int64_t capacity) {
  int device = 0;
  OPENMLA_TEST_CUDA(cudaGetDevice(&device));
  DeviceBuffer cache = upload(c.bytes);
  DeviceBuffer src = upload(m.slot_bytes(m.src, int64, static_cast<size_t>(capacity)));
  DeviceBuffer dst = upload(m.slot_bytes(m.dst, int64, static_cast<size_t>(capacity)));
  DeviceBuffer indptr = upload(m.indptr);
  DeviceBuffer error = upload(std::vector<unsigned>{0});
  const std::vector<KVCache> views = c.views(cache.as<uint8_t>(), DeviceType::kCUDA, device);
  Stream stream;
  move_kv(make_args(m, int64, src.get(), dst.get(), indptr.get(), capacity, views, DeviceType::kCUDA, device),
          stream.get(), error.as<unsigned>());
  stream.sync();
  return {download<uint8_t>(cache), download<unsigned>(error)[0]};
}

void expect_matches_reference(const Caches& c, const MoveArrays& m, bool int64 = false, int64_t capacity = -1,
                              unsigned want_error = 0) {
  if (capacity < 0) capacity = std::max<int64_t>(1, static_cast<int64_t>(m.src.size()));
  const Result want = run_reference(c, m, int64, capacity);
  const Result got = run_gpu(c, m, int64, capacity);
  EXPECT_EQ(first_difference(c, want.bytes, got.bytes), "");
  EXPECT_EQ(got.error_word, want.error_word) << "got " << describe_device_errors(got.error_word) << ", expected "
                                             << describe_device_errors(want.error_word);
  EXPECT_EQ(want.error_word, want_error) << describe_device_errors(want.error_word);
  if (m.src.empty()) return;
  EXPECT_NE(want.bytes, c.bytes) << "the case moved nothing: it proves little";
}

// ---- random tree accepts in every format ----------------------------------------------------------

TEST(MoveKV, RandomTreeAcceptsEveryFormat) {
  for (KVFormat f : kAllFormats) {
    for (int trial = 0; trial < 6; ++trial) {
      SCOPED_TRACE(std::string(kv_format_name(f)) + " trial " + std::to_string(trial));
      std::mt19937_64 rng(1000 + 10 * static_cast<int>(f) + trial);
      const int pad = trial % 2;
      const Caches c(f, 96, 1 + trial % 3, pad, trial % 3 != 2, rng());
      const MoveArrays m = tree_accept_moves(96, 1 + trial * 5, trial < 2 ? 16 : 128, rng);
      expect_matches_reference(c, m);
    }
  }
}

TEST(MoveKV, ChainsSwapsAndNoOpsInsideAGroup) {
  // 5 -> 2 while 2 -> 1 while 1 -> 0; a swap; src == dst; a full 128-row rotation.
  for (KVFormat f : kAllFormats) {
    SCOPED_TRACE(kv_format_name(f));
    const Caches c(f, 4, 2, 0, true, 7);
    MoveArrays m;
    m.add(1, 0), m.add(2, 1), m.add(5, 2);
    m.end_group();
    m.add(70, 71), m.add(71, 70), m.add(72, 72);
    m.end_group();
    for (int i = 0; i < kMaxMoveRowsPerGroup; ++i) m.add(128 + i, 128 + (i + 1) % kMaxMoveRowsPerGroup);
    m.end_group();
    expect_matches_reference(c, m);
  }
}

TEST(MoveKV, BadSlotsAreFlaggedAndNeverDereferenced) {
  for (bool int64 : {false, true}) {
    const Caches c(KVFormat::kFP8DsMla, 3, 2, 1, true, 11);  // slots 0 .. 191
    MoveArrays m;
    m.add(10, 9), m.add(192, 8), m.add(11, -1), m.add(-5, 7), m.add(12, 10);
    m.end_group();
    m.add(int64 ? (int64_t{1} << 40) : int64_t{0x7FFFFFFF}, 100), m.add(101, 100);
    m.end_group();
    expect_matches_reference(c, m, int64, -1, kDeviceErrorSlotOutOfRange);
  }
}

TEST(MoveKV, BadRowRangesMoveNothingForThatGroup) {
  const Caches c(KVFormat::kBF16, 4, 1, 0, true, 13);
  // Group 0 fine; group 1 decreasing; group 2 past m (capacity 6); group 3 too long.
  MoveArrays m;
  m.add(20, 10), m.add(30, 21), m.add(40, 31), m.add(50, 41), m.add(60, 51), m.add(70, 61);
  m.indptr = {0, 2, 1, 7, 7};
  expect_matches_reference(c, m, false, 6, kDeviceErrorQueryOffsets);
  MoveArrays longer;
  for (int i = 0; i <= kMaxMoveRowsPerGroup; ++i) longer.add(i + 1, i);
  longer.end_group();
  const Result got = run_gpu(c, longer, false, kMaxMoveRowsPerGroup + 1);
  EXPECT_EQ(got.error_word, unsigned{kDeviceErrorQueryOffsets});
  EXPECT_EQ(got.bytes, c.bytes);
}

TEST(MoveKV, EmptyArraysLaunchNothing) {
  const Caches c(KVFormat::kFP16, 2, 1, 0, false, 17);
  MoveArrays m;  // g = 0
  expect_matches_reference(c, m);
  m.end_group();  // one empty group
  m.end_group();
  expect_matches_reference(c, m);
}

// ---- CUDA graph: captured once, replayed with new moves and counts ---------------------------------

TEST(MoveKV, GraphReplaysWithNewCounts) {
  int device = 0;
  OPENMLA_TEST_CUDA(cudaGetDevice(&device));
  for (KVFormat f : {KVFormat::kBF16, KVFormat::kFP8DsMla}) {
    SCOPED_TRACE(kv_format_name(f));
    constexpr int kGroups = 8;
    constexpr int64_t kCapacity = int64_t{kGroups} * kMaxMoveRowsPerGroup;
    Caches host(f, 64, 3, 0, true, 21);
    DeviceBuffer cache = upload(host.bytes);
    DeviceBuffer src(kCapacity * 4), dst(kCapacity * 4), indptr((kGroups + 1) * 4);
    DeviceBuffer error = upload(std::vector<unsigned>{0});
    OPENMLA_TEST_CUDA(cudaMemset(indptr.get(), 0, indptr.bytes()));
    const std::vector<KVCache> views = host.views(cache.as<uint8_t>(), DeviceType::kCUDA, device);
    MoveArrays shape;  // only the group count matters for the view
    shape.indptr.assign(kGroups + 1, 0);
    Stream stream;
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    OPENMLA_TEST_CUDA(cudaStreamBeginCapture(stream.get(), cudaStreamCaptureModeGlobal));
    move_kv(make_args(shape, false, src.get(), dst.get(), indptr.get(), kCapacity, views, DeviceType::kCUDA, device),
            stream.get(), error.as<unsigned>());
    OPENMLA_TEST_CUDA(cudaStreamEndCapture(stream.get(), &graph));
    OPENMLA_TEST_CUDA(cudaGraphInstantiate(&exec, graph, 0));

    std::mt19937_64 rng(static_cast<uint64_t>(f) + 5);
    for (int replay = 0; replay < 6; ++replay) {
      SCOPED_TRACE("replay " + std::to_string(replay));
      // New moves, and fewer real groups on some replays (the rest empty, as padding rows).
      const int real = replay == 3 ? 0 : 1 + static_cast<int>(rng() % kGroups);
      MoveArrays m = tree_accept_moves(64, real, 128, rng);
      while (static_cast<int>(m.indptr.size()) < kGroups + 1) m.end_group();
      const std::vector<uint8_t> src_bytes = m.slot_bytes(m.src, false, kCapacity);
      const std::vector<uint8_t> dst_bytes = m.slot_bytes(m.dst, false, kCapacity);
      OPENMLA_TEST_CUDA(cudaMemcpyAsync(src.get(), src_bytes.data(), src_bytes.size(), cudaMemcpyHostToDevice,
                                        stream.get()));
      OPENMLA_TEST_CUDA(cudaMemcpyAsync(dst.get(), dst_bytes.data(), dst_bytes.size(), cudaMemcpyHostToDevice,
                                        stream.get()));
      OPENMLA_TEST_CUDA(cudaMemcpyAsync(indptr.get(), m.indptr.data(), indptr.bytes(), cudaMemcpyHostToDevice,
                                        stream.get()));
      OPENMLA_TEST_CUDA(cudaGraphLaunch(exec, stream.get()));
      stream.sync();
      const Result want = run_reference(host, m, false, kCapacity);
      const std::vector<uint8_t> got = download<uint8_t>(cache);
      EXPECT_EQ(first_difference(host, want.bytes, got), "");
      EXPECT_EQ(want.error_word, 0u);
      host.bytes = want.bytes;  // the next replay moves from this state
    }
    EXPECT_EQ(download<unsigned>(error)[0], 0u);
    OPENMLA_TEST_CUDA(cudaGraphExecDestroy(exec));
    OPENMLA_TEST_CUDA(cudaGraphDestroy(graph));
  }
}

// ---- ForwardBuffers: moves staged with a step, emptied after it ------------------------------------

TEST(MoveKV, ForwardBuffersUploadMovesAndEmptyThemOnTheNextStep) {
  runtime::ForwardBuffers buffers(runtime::ForwardCapacity{4, 8, 16, 1});
  runtime::PagePool pool(32);
  runtime::RequestId reqs[] = {pool.create(60), pool.create(3)};
  pool.reserve(reqs[0], 16);
  pool.reserve(reqs[1], 16);
  const std::vector<int32_t> tree0 = pool.slots(reqs[0], 60, 16);
  runtime::SlotMove moves[32];
  int32_t indptr[3] = {0, 0, 0};
  const int32_t path0[] = {0, 3, 9}, path1[] = {0, 1};
  indptr[1] = static_cast<int32_t>(pool.commit_path(reqs[0], path0, 3, moves));
  indptr[2] = indptr[1] + static_cast<int32_t>(pool.commit_path(reqs[1], path1, 2, moves + indptr[1]));
  ASSERT_EQ(indptr[2], 2);
  pool.append(reqs[0]);
  pool.append(reqs[1]);
  Stream stream;
  const runtime::ForwardMeta m =
      buffers.prepare_decode(pool, reqs, 2, 4, stream.get(), runtime::StepMoves{moves, indptr});
  EXPECT_TRUE(m.has_moves);
  EXPECT_EQ(m.num_moves, 2);
  stream.sync();
  auto read = [&](const TensorView& t) {
    std::vector<int32_t> host(static_cast<size_t>(t.shape[0]));
    OPENMLA_TEST_CUDA(cudaMemcpy(host.data(), t.data, host.size() * 4, cudaMemcpyDeviceToHost));
    return host;
  };
  EXPECT_EQ(read(buffers.move_row_indptr(4)), (std::vector<int32_t>{0, 2, 2, 2, 2}));
  const std::vector<int32_t> src = read(buffers.move_src_slots()), dst = read(buffers.move_dst_slots());
  EXPECT_EQ(src[0], tree0[3]);
  EXPECT_EQ(dst[0], tree0[1]);
  EXPECT_EQ(src[1], tree0[9]);
  EXPECT_EQ(dst[1], tree0[2]);
  // The next step has no moves: every group on the device is emptied.
  buffers.prepare_decode(pool, reqs, 2, 2, stream.get());
  stream.sync();
  EXPECT_EQ(read(buffers.move_row_indptr(4)), (std::vector<int32_t>(5, 0)));
}

// ---- validation reaches the GPU entry point --------------------------------------------------------

TEST(MoveKV, RejectsHostTensorsAndSharedCaches) {
  int device = 0;
  OPENMLA_TEST_CUDA(cudaGetDevice(&device));
  Caches host(KVFormat::kBF16, 2, 1, 0, true, 3);
  MoveArrays m;
  m.add(1, 0);
  m.end_group();
  std::vector<uint8_t> src = m.slot_bytes(m.src, false, 1), dst = m.slot_bytes(m.dst, false, 1);
  const std::vector<KVCache> host_views = host.views(host.bytes.data(), DeviceType::kCPU, 0);
  try {
    move_kv(make_args(m, false, src.data(), dst.data(), m.indptr.data(), 1, host_views, DeviceType::kCPU, 0),
            nullptr);
    FAIL() << "move_kv accepted CPU tensors";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::kInvalidArgument) << e.what();
  }
  DeviceBuffer cache = upload(host.bytes), dsrc = upload(src), ddst = upload(dst), dindptr = upload(m.indptr);
  std::vector<KVCache> views = host.views(cache.as<uint8_t>(), DeviceType::kCUDA, device);
  views.push_back(views[0]);
  try {
    move_kv(make_args(m, false, dsrc.get(), ddst.get(), dindptr.get(), 1, views, DeviceType::kCUDA, device), nullptr);
    FAIL() << "move_kv accepted the same cache twice";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("caches[1]: expected memory disjoint from caches[0]"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace openmla::testing
