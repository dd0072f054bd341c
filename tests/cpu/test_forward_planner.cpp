// ForwardPlanner host logic: buffer layout, buckets, each mode's seqlens / write slots / block
// table / padding rows, the query-position rule (query i at seqlen - s_q + i) checked against the
// pool for random states, tree-accept moves staged for move_kv, and every rejected input.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "openmla/error.h"
#include "openmla/runtime/forward_planner.h"
#include "openmla/runtime/page_pool.h"

namespace openmla::runtime {
namespace {

// Staging memory poisoned with a recognizable value, so unwritten entries show up.
constexpr int32_t kPoison = 0x5a5a5a5a;
struct Staging {
  explicit Staging(const ForwardPlanner& p) : words(p.layout().total_bytes / 4, kPoison) {}
  void* data() { return words.data(); }
  std::vector<int32_t> words;
};

template <typename Fn>
void expect_error(Fn&& fn, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "expected an openmla::Error containing \"" << needle << "\"";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << "message: " << e.what();
  }
}

TEST(ForwardLayout, OffsetsAlignedAndDisjoint) {
  ForwardCapacity c{128, 512, 16, 4};
  ForwardLayout l = forward_layout(c);
  EXPECT_EQ(l.seqlens_offset, 0u);
  EXPECT_EQ(l.slots_offset % 256, 0u);
  EXPECT_GE(l.slots_offset, 128u * 4);
  EXPECT_EQ(l.step_bytes % 256, 0u);
  EXPECT_GE(l.step_bytes, l.slots_offset + 128u * 16 * 4);
  EXPECT_EQ(l.block_table_offset, 4 * l.step_bytes);
  EXPECT_GE(l.move_indptr_offset, l.block_table_offset + 128u * 512 * 4);
  EXPECT_GE(l.move_src_offset, l.move_indptr_offset + 129u * 4);
  EXPECT_GE(l.move_dst_offset, l.move_src_offset + 128u * 16 * 4);
  EXPECT_GE(l.total_bytes, l.move_dst_offset + 128u * 16 * 4);
  for (size_t offset : {l.move_indptr_offset, l.move_src_offset, l.move_dst_offset, l.total_bytes})
    EXPECT_EQ(offset % 256, 0u);
}

TEST(Buckets, PowersOfTwoThenMax) {
  EXPECT_EQ(batch_buckets(1), (std::vector<int>{1}));
  EXPECT_EQ(batch_buckets(8), (std::vector<int>{1, 2, 4, 8}));
  EXPECT_EQ(batch_buckets(6), (std::vector<int>{1, 2, 4, 6}));
  EXPECT_EQ(batch_buckets(128).size(), 8u);
  EXPECT_EQ(bucket_for_batch(0, 8), 1);
  EXPECT_EQ(bucket_for_batch(1, 8), 1);
  EXPECT_EQ(bucket_for_batch(3, 8), 4);
  EXPECT_EQ(bucket_for_batch(8, 8), 8);
  EXPECT_EQ(bucket_for_batch(5, 6), 6);
  EXPECT_THROW(bucket_for_batch(9, 8), Error);
  EXPECT_THROW(bucket_for_batch(-1, 8), Error);
  EXPECT_THROW(batch_buckets(0), Error);
}

TEST(ForwardPlanner, CapacityValidation) {
  expect_error([] { ForwardPlanner p(ForwardCapacity{0, 4, 1, 1}); }, "max_batch");
  expect_error([] { ForwardPlanner p(ForwardCapacity{4, 0, 1, 1}); }, "max_pages_per_request");
  expect_error([] { ForwardPlanner p(ForwardCapacity{4, 4, 129, 1}); }, "max_q_len: expected in [1, 128]");
  ForwardPlanner largest(ForwardCapacity{4, 4, 128, 1});  // a 128-token tree verify
  EXPECT_EQ(largest.max_moves(), 4 * 128);
  expect_error([] { ForwardPlanner p(ForwardCapacity{4, 4, 1, 0}); }, "max_steps");
}

class PlannerTest : public ::testing::Test {
 protected:
  PagePool pool{64};
  ForwardPlanner planner{ForwardCapacity{8, 6, 8, 4}};
  Staging staging{planner};

  const int32_t* seqlens(int step = 0) { return planner.seqlens(staging.data(), step); }
  const int32_t* slots(int step = 0) { return planner.write_slots(staging.data(), step); }
  const int32_t* table_row(int row) {
    return planner.block_table(staging.data()) + row * planner.capacity().max_pages_per_request;
  }
  void expect_row_pages(int row, RequestId id, int64_t pages) {
    for (int64_t i = 0; i < pages; ++i) EXPECT_EQ(table_row(row)[i], pool.page_ids(id)[i]) << "row " << row << " col " << i;
  }
};

TEST_F(PlannerTest, DecodeRowsAndPadding) {
  RequestId a = pool.create(64);
  RequestId b = pool.create(1);
  pool.append(a);  // 65 tokens: the new token at position 64
  RequestId reqs[] = {a, b};
  ForwardMeta m = planner.plan_decode(pool, reqs, 2, 4, staging.data());
  EXPECT_EQ(m.mode, ForwardMode::kDecode);
  EXPECT_EQ(m.batch_size, 2);
  EXPECT_EQ(m.padded_batch, 4);
  EXPECT_EQ(m.q_len, 1);
  EXPECT_EQ(m.num_steps, 1);
  EXPECT_EQ(m.table_width, 2);
  EXPECT_EQ(seqlens()[0], 65);
  EXPECT_EQ(seqlens()[1], 1);
  EXPECT_EQ(slots()[0], pool.slot(a, 64));
  EXPECT_EQ(slots()[1], pool.slot(b, 0));
  expect_row_pages(0, a, 2);
  expect_row_pages(1, b, 1);
  for (int r = 2; r < 4; ++r) {
    EXPECT_EQ(seqlens()[r], 0) << "padding row " << r;
    EXPECT_EQ(slots()[r], -1) << "padding row " << r;
  }
  EXPECT_EQ(seqlens()[4], kPoison);  // beyond the bucket: untouched
  // The header upload covers step 0's seqlens and its 4 slots.
  EXPECT_EQ(planner.upload_header_bytes(m), planner.layout().slots_offset + 4 * sizeof(int32_t));
}

TEST_F(PlannerTest, DecodeWithoutPaddingAndEmptyBatch) {
  RequestId a = pool.create(3);
  ForwardMeta m = planner.plan_decode(pool, &a, 1, 0, staging.data());
  EXPECT_EQ(m.padded_batch, 1);
  ForwardMeta e = planner.plan_decode(pool, nullptr, 0, 0, staging.data());
  EXPECT_EQ(e.batch_size, 0);
  EXPECT_EQ(e.padded_batch, 1);
  EXPECT_EQ(e.table_width, 0);
  EXPECT_EQ(seqlens()[0], 0);
  EXPECT_EQ(slots()[0], -1);
}

TEST_F(PlannerTest, TargetVerifyUsesTheReservedDraftPositions) {
  RequestId a = pool.create(62);
  RequestId b = pool.create(128);
  pool.reserve(a, 4);
  pool.reserve(b, 6);  // more than verified: only the first 4 are queries
  RequestId reqs[] = {a, b};
  ForwardMeta m = planner.plan_target_verify(pool, reqs, 2, 4, 4, staging.data());
  EXPECT_EQ(m.q_len, 4);
  EXPECT_EQ(seqlens()[0], 66);
  EXPECT_EQ(seqlens()[1], 132);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(slots()[0 * 4 + i], pool.slot(a, 62 + i));
    EXPECT_EQ(slots()[1 * 4 + i], pool.slot(b, 128 + i));
  }
  EXPECT_EQ(m.table_width, 3);  // b reads 132 tokens = 3 pages
  expect_row_pages(0, a, 2);
  expect_row_pages(1, b, 3);
  for (int i = 8; i < 16; ++i) EXPECT_EQ(slots()[i], -1);
  EXPECT_EQ(seqlens()[2], 0);
  EXPECT_EQ(seqlens()[3], 0);
}

TEST_F(PlannerTest, DraftDecodePreparesEveryStep) {
  RequestId a = pool.create(63);
  RequestId b = pool.create(10);
  pool.reserve(a, 3);
  pool.reserve(b, 4);
  RequestId reqs[] = {a, b};
  ForwardMeta m = planner.plan_draft_decode(pool, reqs, 2, 3, 2, staging.data());
  EXPECT_EQ(m.num_steps, 3);
  EXPECT_EQ(m.q_len, 1);
  for (int step = 0; step < 3; ++step) {
    EXPECT_EQ(seqlens(step)[0], 63 + step + 1);
    EXPECT_EQ(seqlens(step)[1], 10 + step + 1);
    EXPECT_EQ(slots(step)[0], pool.slot(a, 63 + step));
    EXPECT_EQ(slots(step)[1], pool.slot(b, 10 + step));
  }
  EXPECT_EQ(m.table_width, 2);
  expect_row_pages(0, a, 2);
  EXPECT_EQ(planner.upload_header_bytes(m), 2 * planner.layout().step_bytes + planner.layout().slots_offset + 2 * 4);
}

TEST_F(PlannerTest, DraftExtendPutsRealTokensLastInTheWindow) {
  RequestId a = pool.create(100);
  RequestId b = pool.create(64);
  RequestId c = pool.create(4);
  RequestId reqs[] = {a, b, c};
  const int new_tokens[] = {3, 1, 4};
  ForwardMeta m = planner.plan_draft_extend(pool, reqs, new_tokens, 3, 4, 4, staging.data());
  EXPECT_EQ(m.q_len, 4);
  EXPECT_EQ(seqlens()[0], 100);
  EXPECT_EQ(seqlens()[1], 64);
  EXPECT_EQ(seqlens()[2], 4);
  // a: rows 0 padding, rows 1..3 = positions 97, 98, 99.
  EXPECT_EQ(slots()[0], -1);
  for (int i = 1; i < 4; ++i) EXPECT_EQ(slots()[i], pool.slot(a, 96 + i));
  // b: rows 0..2 padding, row 3 = position 63.
  for (int i = 0; i < 3; ++i) EXPECT_EQ(slots()[4 + i], -1);
  EXPECT_EQ(slots()[7], pool.slot(b, 63));
  // c: all four rows are its positions 0..3 (seqlen == s_q, the smallest allowed).
  for (int i = 0; i < 4; ++i) EXPECT_EQ(slots()[8 + i], pool.slot(c, i));
  for (int i = 12; i < 16; ++i) EXPECT_EQ(slots()[i], -1);
  EXPECT_EQ(seqlens()[3], 0);
}

TEST_F(PlannerTest, RejectedInputs) {
  RequestId a = pool.create(5);
  RequestId b = pool.create(0);
  RequestId released = pool.create(1);
  pool.release(released);
  RequestId reqs[] = {a, a};
  expect_error([&] { planner.plan_decode(pool, reqs, 2, 0, staging.data()); }, "appears more than once");
  expect_error([&] { planner.plan_decode(pool, &released, 1, 0, staging.data()); }, "decode: ");
  expect_error([&] { planner.plan_decode(pool, &b, 1, 0, staging.data()); }, "has no tokens; append()");
  expect_error([&] { planner.plan_decode(pool, &a, 9, 0, staging.data()); }, "batch_size: expected in [0, 8]");
  expect_error([&] { planner.plan_decode(pool, &a, 1, 9, staging.data()); }, "padded_batch: expected 0 or in [1, 8]");
  RequestId two[] = {a, b};
  expect_error([&] { planner.plan_decode(pool, two, 2, 1, staging.data()); }, "padded_batch");
  expect_error([&] { planner.plan_decode(pool, nullptr, 1, 0, staging.data()); }, "requests: expected 1 handles");
  // Verify / draft decode need reservations; counts within capacity.
  expect_error([&] { planner.plan_target_verify(pool, &a, 1, 2, 0, staging.data()); },
               "has 0 reserved draft tokens, fewer than num_draft = 2");
  expect_error([&] { planner.plan_target_verify(pool, &a, 1, 9, 0, staging.data()); }, "num_draft: expected in [1, 8]");
  expect_error([&] { planner.plan_draft_decode(pool, &a, 1, 2, 0, staging.data()); }, "fewer than num_steps = 2");
  expect_error([&] { planner.plan_draft_decode(pool, &a, 1, 5, 0, staging.data()); }, "num_steps: expected in [1, 4]");
  // Draft extend: counts within the window, window within the request.
  int n6[] = {6};
  int n2[] = {2};
  expect_error([&] { planner.plan_draft_extend(pool, &a, n6, 1, 4, 0, staging.data()); },
               "new_tokens[0]: expected in [0, 4]");
  expect_error([&] { planner.plan_draft_extend(pool, &a, n2, 1, 6, 0, staging.data()); },
               "has 5 tokens, fewer than the window q_len = 6");
  expect_error([&] { planner.plan_draft_extend(pool, &a, nullptr, 1, 2, 0, staging.data()); }, "new_tokens");
  expect_error([&] { planner.plan_draft_extend(pool, &a, n2, 1, 0, 0, staging.data()); }, "q_len");
  // More pages than the block table holds (6 columns = 384 tokens).
  RequestId big = pool.create(385);
  expect_error([&] { planner.plan_decode(pool, &big, 1, 0, staging.data()); },
               "needs 7 block-table entries, more than ForwardCapacity.max_pages_per_request = 6");
}

TEST_F(PlannerTest, TreeAcceptMovesRideWithTheNextStep) {
  // Two requests verified a tree each; the accepted paths' moves come from commit_path and are
  // staged beside the next decode step's metadata.
  RequestId a = pool.create(60);
  RequestId b = pool.create(10);
  RequestId c = pool.create(5);
  pool.reserve(a, 8);
  pool.reserve(b, 8);
  pool.reserve(c, 8);
  std::vector<SlotMove> moves(24);
  std::vector<int32_t> indptr{0};
  const int32_t path_a[] = {0, 2, 5, 7}, path_b[] = {0, 1}, path_c[] = {3};
  const std::vector<int32_t> tree_a = pool.slots(a, 60, 8), tree_c = pool.slots(c, 5, 8);
  indptr.push_back(indptr.back() + static_cast<int32_t>(pool.commit_path(a, path_a, 4, moves.data() + indptr.back())));
  indptr.push_back(indptr.back() + static_cast<int32_t>(pool.commit_path(b, path_b, 2, moves.data() + indptr.back())));
  indptr.push_back(indptr.back() + static_cast<int32_t>(pool.commit_path(c, path_c, 1, moves.data() + indptr.back())));
  EXPECT_EQ(indptr, (std::vector<int32_t>{0, 3, 3, 4}));
  pool.append(a);
  pool.append(b);
  pool.append(c);
  RequestId reqs[] = {a, b, c};
  ForwardMeta m = planner.plan_decode(pool, reqs, 3, 4, staging.data());
  EXPECT_FALSE(m.has_moves);
  planner.plan_moves(StepMoves{moves.data(), indptr.data()}, m, staging.data());
  EXPECT_TRUE(m.has_moves);
  EXPECT_EQ(m.num_moves, 4);
  const int32_t* row_indptr = planner.move_row_indptr(staging.data());
  EXPECT_EQ(std::vector<int32_t>(row_indptr, row_indptr + 5), (std::vector<int32_t>{0, 3, 3, 4, 4}));
  EXPECT_EQ(row_indptr[5], kPoison);  // beyond the bucket: untouched
  const int32_t* src = planner.move_src_slots(staging.data());
  const int32_t* dst = planner.move_dst_slots(staging.data());
  const std::vector<int32_t> want_src{tree_a[2], tree_a[5], tree_a[7], tree_c[3]};
  const std::vector<int32_t> want_dst{tree_a[1], tree_a[2], tree_a[3], tree_c[0]};
  EXPECT_EQ(std::vector<int32_t>(src, src + 4), want_src);
  EXPECT_EQ(std::vector<int32_t>(dst, dst + 4), want_dst);
  EXPECT_EQ(src[4], kPoison);

  // Empty moves stage nothing; bad counts are rejected and leave meta as it was.
  ForwardMeta plain = planner.plan_decode(pool, reqs, 3, 4, staging.data());
  planner.plan_moves(StepMoves{}, plain, staging.data());
  EXPECT_FALSE(plain.has_moves);
  std::vector<int32_t> bad{0, 3, 2, 4};
  expect_error([&] { planner.plan_moves(StepMoves{moves.data(), bad.data()}, plain, staging.data()); },
               "decode: moves of row 1 (indptr[1] = 3, indptr[2] = 2): expected 0 to 8 (ForwardCapacity.max_q_len) "
               "moves, got -1");
  bad = {0, 9, 9, 9};
  expect_error([&] { planner.plan_moves(StepMoves{moves.data(), bad.data()}, plain, staging.data()); },
               "moves of row 0 (indptr[0] = 0, indptr[1] = 9): expected 0 to 8");
  bad = {1, 3, 3, 4};
  expect_error([&] { planner.plan_moves(StepMoves{moves.data(), bad.data()}, plain, staging.data()); },
               "decode: moves.indptr[0]: expected 0, got 1");
  expect_error([&] { planner.plan_moves(StepMoves{nullptr, indptr.data()}, plain, staging.data()); },
               "decode: moves.moves: expected 4 moves, got nullptr");
  EXPECT_FALSE(plain.has_moves);
  EXPECT_EQ(plain.num_moves, 0);
}

// The rule every mode must satisfy: the write slot of query row i of a real request is the slot of
// KV position seqlen - s_q + i (or -1 for draft-extend padding rows, which must still sit at a
// valid position), and the block table holds the pages of positions [0, seqlen).
TEST(ForwardPlannerProperty, QueryRowsSitAtTheirKVPositions) {
  std::mt19937_64 rng(42);
  auto below = [&](int64_t n) { return static_cast<int64_t>(rng() % static_cast<uint64_t>(n)); };
  PagePool pool(4096);
  ForwardPlanner planner(ForwardCapacity{16, 40, 16, 4});
  std::vector<int32_t> staging(planner.layout().total_bytes / 4);
  for (int trial = 0; trial < 400; ++trial) {
    const int batch = static_cast<int>(below(16)) + 1;
    const int mode = static_cast<int>(below(4));
    const int q = static_cast<int>(below(16)) + 1;
    const int steps = static_cast<int>(below(4)) + 1;
    std::vector<RequestId> reqs;
    std::vector<int> new_tokens;
    for (int r = 0; r < batch; ++r) {
      RequestId id = pool.create(below(2000) + 16);
      if (mode == 1) pool.reserve(id, q + below(3));
      if (mode == 2) pool.reserve(id, steps + below(3));
      reqs.push_back(id);
      new_tokens.push_back(static_cast<int>(below(q + 1)));
    }
    const int padded = bucket_for_batch(batch, 16);
    ForwardMeta m;
    switch (mode) {
      case 0: m = planner.plan_decode(pool, reqs.data(), batch, padded, staging.data()); break;
      case 1: m = planner.plan_target_verify(pool, reqs.data(), batch, q, padded, staging.data()); break;
      case 2: m = planner.plan_draft_decode(pool, reqs.data(), batch, steps, padded, staging.data()); break;
      default:
        m = planner.plan_draft_extend(pool, reqs.data(), new_tokens.data(), batch, q, padded, staging.data());
    }
    for (int step = 0; step < m.num_steps; ++step) {
      const int32_t* seq = planner.seqlens(staging.data(), step);
      const int32_t* slots = planner.write_slots(staging.data(), step);
      for (int r = 0; r < m.padded_batch; ++r) {
        if (r >= batch) {
          ASSERT_EQ(seq[r], 0);
          for (int i = 0; i < m.q_len; ++i) ASSERT_EQ(slots[r * m.q_len + i], -1);
          continue;
        }
        ASSERT_GE(seq[r], m.q_len);
        const int64_t pages = (seq[r] + 63) / 64;
        const int32_t* row = planner.block_table(staging.data()) + r * 40;
        for (int64_t p = 0; p < pages; ++p) ASSERT_EQ(row[p], pool.page_ids(reqs[r])[p]);
        ASSERT_LE(pages, m.table_width);
        const int real_from = mode == 3 ? m.q_len - new_tokens[r] : 0;
        for (int i = 0; i < m.q_len; ++i) {
          const int64_t position = seq[r] - m.q_len + i;
          if (i < real_from)
            ASSERT_EQ(slots[r * m.q_len + i], -1);
          else
            ASSERT_EQ(slots[r * m.q_len + i], pool.slot(reqs[r], position))
                << forward_mode_name(m.mode) << " row " << r << " query " << i;
        }
      }
    }
    for (RequestId id : reqs) pool.release(id);
    ASSERT_EQ(pool.free_pages(), 4096);
  }
}

}  // namespace
}  // namespace openmla::runtime
