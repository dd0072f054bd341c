// PagePool: each operation, each misuse (error thrown, pool unchanged), the invariant checker
// against deliberately corrupted pools, sizing, and a seeded property test of 100,000 speculative-
// decoding steps over a simulated KV cache with the invariant check after every step.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "openmla/error.h"
#include "openmla/runtime/page_pool.h"

namespace openmla::runtime {

// Reaches into the pool to break one invariant at a time.
struct PagePoolTestAccess {
  static std::vector<int32_t>& refcounts(PagePool& p) { return p.refcounts_; }
  static std::vector<int32_t>& free_list(PagePool& p) { return p.free_list_; }
  static std::vector<int32_t>& pages(PagePool& p, RequestId id) { return p.lookup(id, "test").pages; }
  static int64_t& committed(PagePool& p, RequestId id) { return p.lookup(id, "test").committed; }
  static int64_t& shared_counter(PagePool& p) { return p.shared_pages_; }
};

namespace {

using Access = PagePoolTestAccess;

// Everything observable about a pool, to prove that a failed call changed nothing.
struct Snapshot {
  PoolStats stats;
  std::vector<RequestId> ids;
  std::vector<int64_t> counts;    // committed, reserved per request
  std::vector<int32_t> pages;     // all rows concatenated
  std::vector<int32_t> refcounts;

  bool operator==(const Snapshot& o) const {
    return stats.total_pages == o.stats.total_pages && stats.free_pages == o.stats.free_pages &&
           stats.used_pages == o.stats.used_pages && stats.shared_pages == o.stats.shared_pages &&
           stats.live_requests == o.stats.live_requests && stats.committed_tokens == o.stats.committed_tokens &&
           stats.reserved_tokens == o.stats.reserved_tokens && ids == o.ids && counts == o.counts &&
           pages == o.pages && refcounts == o.refcounts;
  }
};

Snapshot snapshot(const PagePool& pool, bool with_refcounts = true) {
  Snapshot s;
  s.stats = pool.stats();
  s.ids = pool.live_requests();
  for (RequestId id : s.ids) {
    const RequestState st = pool.state(id);
    s.counts.push_back(st.committed);
    s.counts.push_back(st.reserved);
    s.pages.insert(s.pages.end(), st.pages->begin(), st.pages->end());
  }
  if (with_refcounts)
    for (int32_t p = 0; p < pool.num_pages(); ++p) s.refcounts.push_back(pool.refcount(p));
  return s;
}

// Runs `op`, which must throw openmla::Error whose message contains `needle`, and checks that the
// pool is unchanged and consistent afterwards.
void expect_rejected(PagePool& pool, const std::function<void()>& op, const std::string& needle) {
  const Snapshot before = snapshot(pool);
  try {
    op();
    ADD_FAILURE() << "expected an openmla::Error containing \"" << needle << "\"";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << "message: " << e.what();
  }
  EXPECT_TRUE(before == snapshot(pool)) << "a rejected call changed the pool";
  EXPECT_EQ(pool.check_invariants(), "");
}

// ---- single operations -----------------------------------------------------------------------

TEST(PagePool, FreshPoolHandsOutPagesInOrder) {
  PagePool pool(8);
  EXPECT_EQ(pool.num_pages(), 8);
  EXPECT_EQ(pool.free_pages(), 8);
  EXPECT_EQ(pool.used_pages(), 0);
  RequestId a = pool.create(1);
  RequestId b = pool.create(64);
  RequestId c = pool.create(65);
  EXPECT_EQ(pool.page_ids(a), (std::vector<int32_t>{0}));
  EXPECT_EQ(pool.page_ids(b), (std::vector<int32_t>{1}));
  EXPECT_EQ(pool.page_ids(c), (std::vector<int32_t>{2, 3}));
  EXPECT_EQ(pool.free_pages(), 4);
  EXPECT_EQ(pool.slot(c, 64), 3 * 64);
  EXPECT_EQ(pool.slot(c, 63), 2 * 64 + 63);
  EXPECT_EQ(pool.check_invariants(), "");
}

TEST(PagePool, CreateEmptyRequestHoldsNoPage) {
  PagePool pool(2);
  RequestId a = pool.create(0);
  EXPECT_TRUE(pool.contains(a));
  EXPECT_TRUE(pool.page_ids(a).empty());
  EXPECT_EQ(pool.total_tokens(a), 0);
  EXPECT_EQ(pool.append(a), 0);  // first token takes page 0, offset 0
  EXPECT_EQ(pool.page_ids(a).size(), 1u);
  EXPECT_EQ(pool.check_invariants(), "");
}

TEST(PagePool, ExtendAndAppendCrossPageBoundaries) {
  PagePool pool(4);
  RequestId a = pool.create(62);
  EXPECT_EQ(pool.append(a), 62);
  EXPECT_EQ(pool.append(a), 63);
  EXPECT_EQ(pool.page_ids(a).size(), 1u);
  EXPECT_EQ(pool.append(a), 64);  // second page is page 1
  EXPECT_EQ(pool.page_ids(a).size(), 2u);
  pool.extend(a, 63);  // 65 + 63 = 128 tokens: still two pages
  EXPECT_EQ(pool.committed_tokens(a), 128);
  EXPECT_EQ(pool.page_ids(a).size(), 2u);
  pool.extend(a, 0);
  EXPECT_EQ(pool.page_ids(a).size(), 2u);
  pool.extend(a, 1);
  EXPECT_EQ(pool.page_ids(a).size(), 3u);
  EXPECT_EQ(pool.slots(a, 126, 3), (std::vector<int32_t>{126, 127, 128}));
  EXPECT_EQ(pool.check_invariants(), "");
}

TEST(PagePool, ReserveAccumulatesAndCommitKeepsTheAcceptedPrefix) {
  PagePool pool(8);
  RequestId a = pool.create(60);
  pool.reserve(a, 3);  // positions 60..62: no new page
  EXPECT_EQ(pool.free_pages(), 7);
  pool.reserve(a, 3);  // 63..65: one more page
  pool.reserve(a, 64); // 66..129: a third page
  EXPECT_EQ(pool.reserved_tokens(a), 70);
  EXPECT_EQ(pool.total_tokens(a), 130);
  EXPECT_EQ(pool.page_ids(a).size(), 3u);
  EXPECT_EQ(pool.free_pages(), 5);
  const std::vector<int32_t> draft_slots = pool.slots(a, 60, 70);
  pool.commit(a, 5);  // keep positions 60..64: pages for 65 tokens = 2
  EXPECT_EQ(pool.committed_tokens(a), 65);
  EXPECT_EQ(pool.reserved_tokens(a), 0);
  EXPECT_EQ(pool.page_ids(a).size(), 2u);
  EXPECT_EQ(pool.free_pages(), 6);
  // The accepted positions keep their slots.
  EXPECT_EQ(pool.slots(a, 60, 5), std::vector<int32_t>(draft_slots.begin(), draft_slots.begin() + 5));
  EXPECT_EQ(pool.check_invariants(), "");
}

TEST(PagePool, CommitZeroFreesWholePagesAndTheTailOfThePartialPage) {
  PagePool pool(4);
  RequestId a = pool.create(10);
  const int32_t first_page = pool.page_ids(a)[0];
  pool.reserve(a, 100);  // 110 tokens: 2 pages
  EXPECT_EQ(pool.free_pages(), 2);
  pool.commit(a, 0);
  EXPECT_EQ(pool.total_tokens(a), 10);
  EXPECT_EQ(pool.page_ids(a), (std::vector<int32_t>{first_page}));
  EXPECT_EQ(pool.free_pages(), 3);
  // The freed tail of the partial page is the request's again: the next draft reuses slot 10.
  pool.reserve(a, 1);
  EXPECT_EQ(pool.slot(a, 10), first_page * 64 + 10);
  pool.commit(a, 1);
  EXPECT_EQ(pool.committed_tokens(a), 11);
  EXPECT_EQ(pool.check_invariants(), "");
}

TEST(PagePool, CommitEverythingReserved) {
  PagePool pool(4);
  RequestId a = pool.create(64);
  pool.reserve(a, 4);
  pool.commit(a, 4);
  EXPECT_EQ(pool.committed_tokens(a), 68);
  EXPECT_EQ(pool.page_ids(a).size(), 2u);
  pool.commit(a, 0);  // nothing reserved: a no-op
  EXPECT_EQ(pool.committed_tokens(a), 68);
  EXPECT_EQ(pool.check_invariants(), "");
}

TEST(PagePool, ForkAtPageBoundarySharesEveryPageWithoutCopy) {
  PagePool pool(8);
  RequestId parent = pool.create(128);
  ForkResult f = pool.fork(parent);
  EXPECT_FALSE(f.copy.needed());
  EXPECT_EQ(pool.page_ids(f.child), pool.page_ids(parent));
  for (int32_t p : pool.page_ids(parent)) EXPECT_EQ(pool.refcount(p), 2);
  EXPECT_EQ(pool.stats().shared_pages, 2);
  EXPECT_EQ(pool.used_pages(), 2);
  // Each side grows into its own pages.
  const int32_t child_slot = pool.append(f.child);
  const int32_t parent_slot = pool.append(parent);
  EXPECT_NE(child_slot / 64, parent_slot / 64);
  EXPECT_EQ(pool.check_invariants(), "");
  // Releasing the parent keeps the shared pages alive for the child.
  pool.release(parent);
  for (int32_t p : pool.page_ids(f.child)) EXPECT_EQ(pool.refcount(p), 1);
  EXPECT_EQ(pool.stats().shared_pages, 0);
  pool.release(f.child);
  EXPECT_EQ(pool.free_pages(), 8);
  EXPECT_EQ(pool.check_invariants(), "");
}

TEST(PagePool, ForkCopiesThePartlyFilledLastPage) {
  PagePool pool(8);
  RequestId parent = pool.create(100);  // pages 0 (full), 1 (36 tokens)
  ForkResult f = pool.fork(parent);
  ASSERT_TRUE(f.copy.needed());
  EXPECT_EQ(f.copy.src_page, pool.page_ids(parent)[1]);
  EXPECT_EQ(f.copy.dst_page, pool.page_ids(f.child)[1]);
  EXPECT_EQ(f.copy.num_tokens, 36);
  EXPECT_EQ(pool.page_ids(f.child)[0], pool.page_ids(parent)[0]);
  EXPECT_EQ(pool.refcount(pool.page_ids(parent)[0]), 2);
  EXPECT_EQ(pool.refcount(pool.page_ids(parent)[1]), 1);
  EXPECT_EQ(pool.refcount(f.copy.dst_page), 1);
  EXPECT_EQ(pool.committed_tokens(f.child), 100);
  EXPECT_EQ(pool.check_invariants(), "");
}

TEST(PagePool, ForkAPrefixAndForkWhileTheParentHasDrafts) {
  PagePool pool(8);
  RequestId parent = pool.create(200);
  pool.reserve(parent, 10);
  ForkResult f = pool.fork(parent, 70);  // positions 0..69: page 0 shared, page 1 copied (6 tokens)
  EXPECT_EQ(pool.committed_tokens(f.child), 70);
  EXPECT_EQ(pool.reserved_tokens(f.child), 0);
  EXPECT_EQ(f.copy.num_tokens, 6);
  EXPECT_EQ(f.copy.src_page, pool.page_ids(parent)[1]);
  EXPECT_EQ(pool.reserved_tokens(parent), 10);  // parent unchanged
  ForkResult empty = pool.fork(parent, 0);
  EXPECT_TRUE(pool.page_ids(empty.child).empty());
  EXPECT_FALSE(empty.copy.needed());
  pool.commit(parent, 3);
  EXPECT_EQ(pool.check_invariants(), "");
}

TEST(PagePool, ForkedBranchesAndKeepingTheWinner) {
  PagePool pool(16);
  RequestId root = pool.create(130);
  std::vector<RequestId> branches;
  for (int i = 0; i < 3; ++i) {
    ForkResult f = pool.fork(root);
    EXPECT_EQ(f.copy.num_tokens, 2);
    pool.reserve(f.child, 4);
    branches.push_back(f.child);
  }
  EXPECT_EQ(pool.refcount(pool.page_ids(root)[0]), 4);
  pool.commit(branches[1], 2);
  pool.release(branches[0]);
  pool.release(branches[2]);
  pool.release(root);
  EXPECT_EQ(pool.committed_tokens(branches[1]), 132);
  EXPECT_EQ(pool.used_pages(), 3);
  EXPECT_EQ(pool.check_invariants(), "");
  pool.release(branches[1]);
  EXPECT_EQ(pool.free_pages(), 16);
}

TEST(PagePool, TreeCommitPathMovesTheAcceptedKvToTheFrontAndFreesTheRest) {
  PagePool pool(8);
  RequestId r = pool.create(60);  // page 0
  pool.reserve(r, 10);            // tree positions 0..9 at positions 60..69: page 1 holds 64..69
  const std::vector<int32_t> slots = pool.slots(r, 60, 10);
  const std::vector<int32_t> path{0, 2, 5};
  std::vector<SlotMove> preview(3);
  EXPECT_EQ(pool.path_moves(r, path.data(), 3, preview.data()), 2);
  EXPECT_EQ(pool.reserved_tokens(r), 10);  // path_moves changes nothing
  const std::vector<SlotMove> moves = pool.commit_path(r, path);
  const std::vector<SlotMove> expected{{slots[2], slots[1]}, {slots[5], slots[2]}};
  EXPECT_EQ(moves, expected);
  EXPECT_EQ(preview[0], expected[0]);
  EXPECT_EQ(preview[1], expected[1]);
  EXPECT_EQ(pool.committed_tokens(r), 63);
  EXPECT_EQ(pool.reserved_tokens(r), 0);
  EXPECT_EQ(pool.page_ids(r).size(), 1u);  // page 1 went back: its KV (slot of position 65) is a source
  EXPECT_EQ(pool.free_pages(), 7);
  EXPECT_EQ(pool.check_invariants(), "");
}

TEST(PagePool, TreeCommitPathShapes) {
  PagePool pool(8);
  RequestId r = pool.create(100);
  // A chain path is commit(): no moves.
  pool.reserve(r, 5);
  EXPECT_TRUE(pool.commit_path(r, std::vector<int32_t>{0, 1, 2}).empty());
  EXPECT_EQ(pool.committed_tokens(r), 103);
  // A forest (the root is not a tree token): path[0] != 0 moves every accepted token.
  pool.reserve(r, 6);
  std::vector<int32_t> before = pool.slots(r, 103, 6);
  SlotMove out[3];
  const int32_t forest[] = {1, 3, 4};
  EXPECT_EQ(pool.commit_path(r, forest, 3, out), 3);
  EXPECT_EQ(out[0], (SlotMove{before[1], before[0]}));
  EXPECT_EQ(out[1], (SlotMove{before[3], before[1]}));
  EXPECT_EQ(out[2], (SlotMove{before[4], before[2]}));
  EXPECT_EQ(pool.committed_tokens(r), 106);
  // A path whose prefix is in place: moves only from the first gap on.
  pool.reserve(r, 40);  // crosses into page 2
  before = pool.slots(r, 106, 40);
  EXPECT_EQ(pool.commit_path(r, std::vector<int32_t>{0, 1, 30, 39}),
            (std::vector<SlotMove>{{before[30], before[2]}, {before[39], before[3]}}));
  EXPECT_EQ(pool.committed_tokens(r), 110);
  EXPECT_EQ(pool.page_ids(r).size(), 2u);
  // Nothing accepted: the whole tree is dropped (path may be null).
  pool.reserve(r, 30);
  EXPECT_EQ(pool.commit_path(r, nullptr, 0), 0);
  EXPECT_EQ(pool.total_tokens(r), 110);
  EXPECT_EQ(pool.check_invariants(), "");
  pool.release(r);
  EXPECT_EQ(pool.free_pages(), 8);
}

TEST(PagePool, ReleaseReturnsEveryPageAndHandlesAreNotReusedAsAliases) {
  PagePool pool(4);
  RequestId a = pool.create(200);
  pool.release(a);
  EXPECT_FALSE(pool.contains(a));
  EXPECT_EQ(pool.free_pages(), 4);
  RequestId b = pool.create(1);  // reuses a's table entry with a new generation
  EXPECT_NE(a, b);
  EXPECT_TRUE(pool.contains(b));
  EXPECT_FALSE(pool.contains(a));
  EXPECT_EQ(pool.live_requests(), (std::vector<RequestId>{b}));
  // Freed pages are reused last-freed first (deterministic).
  EXPECT_EQ(pool.page_ids(b)[0], 0);
}

TEST(PagePool, StatsAndGrowthQueries) {
  PagePool pool(8);
  RequestId a = pool.create(100);
  pool.reserve(a, 5);
  RequestId b = pool.fork(a).child;
  const PoolStats s = pool.stats();
  EXPECT_EQ(s.total_pages, 8);
  EXPECT_EQ(s.used_pages, 3);
  EXPECT_EQ(s.free_pages, 5);
  EXPECT_EQ(s.shared_pages, 1);
  EXPECT_EQ(s.live_requests, 2);
  EXPECT_EQ(s.committed_tokens, 200);
  EXPECT_EQ(s.reserved_tokens, 5);
  EXPECT_EQ(pool.pages_needed_to_grow(a, 0), 0);
  EXPECT_EQ(pool.pages_needed_to_grow(a, 23), 0);  // 128 tokens still fit
  EXPECT_EQ(pool.pages_needed_to_grow(a, 24), 1);
  EXPECT_EQ(pool.pages_needed_to_grow(b, 28), 0);
  EXPECT_EQ(pool.pages_needed_to_create(0), 0);
  EXPECT_EQ(pool.pages_needed_to_create(129), 3);
}

// ---- misuse: error, message, pool unchanged --------------------------------------------------

TEST(PagePoolErrors, ConstructionLimits) {
  EXPECT_THROW(PagePool(0), Error);
  EXPECT_THROW(PagePool(-3), Error);
  EXPECT_THROW(PagePool(kMaxPoolPages + 1), Error);
  try {
    PagePool bad(0);
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("num_pages"), std::string::npos) << e.what();
  }
}

TEST(PagePoolErrors, DoubleReleaseAndStaleHandles) {
  PagePool pool(4);
  RequestId a = pool.create(10);
  RequestId keep = pool.create(70);
  pool.release(a);
  expect_rejected(pool, [&] { pool.release(a); }, "already released");
  RequestId b = pool.create(5);  // same table entry, next generation
  expect_rejected(pool, [&] { pool.release(a); }, "stale");
  expect_rejected(pool, [&] { pool.extend(a, 1); }, "stale");
  expect_rejected(pool, [&] { pool.commit(a, 0); }, "stale");
  expect_rejected(pool, [&] { pool.fork(a); }, "stale");
  expect_rejected(pool, [&] { pool.total_tokens(a); }, "stale");
  (void)b;
  (void)keep;
}

TEST(PagePoolErrors, UnknownHandles) {
  PagePool pool(4);
  pool.create(3);
  expect_rejected(pool, [&] { pool.release(kInvalidRequest); }, "never valid");
  expect_rejected(pool, [&] { pool.release(0); }, "unknown");          // generation 0 never issued
  expect_rejected(pool, [&] { pool.reserve((RequestId{1} << 32) | 99, 1); }, "unknown");  // index out of range
  expect_rejected(pool, [&] { pool.slot(12345, 0); }, "unknown");
}

TEST(PagePoolErrors, CommitOutsideTheReservation) {
  PagePool pool(4);
  RequestId a = pool.create(60);
  pool.reserve(a, 4);
  expect_rejected(pool, [&] { pool.commit(a, 5); }, "accepted: expected in [0, 4]");
  expect_rejected(pool, [&] { pool.commit(a, -1); }, "got -1");
  pool.commit(a, 4);
  expect_rejected(pool, [&] { pool.commit(a, 1); }, "expected in [0, 0]");
}

TEST(PagePoolErrors, TreePathsOutOfOrderOrOutsideTheReservation) {
  PagePool pool(8);
  RequestId r = pool.create(10);
  pool.reserve(r, 6);
  const int32_t decreasing[] = {0, 3, 2};
  const int32_t repeated[] = {0, 2, 2};
  const int32_t beyond[] = {0, 6};
  const int32_t negative[] = {-1, 2};
  SlotMove out[8];
  expect_rejected(pool, [&] { pool.commit_path(r, decreasing, 3, out); },
                  "commit_path: path[2]: expected > path[1] = 3 (a root-to-node path lists tree positions in "
                  "increasing order: every parent precedes its children), got 2");
  expect_rejected(pool, [&] { pool.commit_path(r, repeated, 3, out); }, "path[2]: expected > path[1] = 2");
  expect_rejected(pool, [&] { pool.commit_path(r, beyond, 2, out); },
                  "commit_path: path[1]: expected a tree position in [0, 6) (reserved draft tokens of request 0 "
                  "(generation 1)), got 6");
  expect_rejected(pool, [&] { pool.commit_path(r, negative, 2, out); }, "path[0]: expected a tree position in [0, 6)");
  expect_rejected(pool, [&] { pool.commit_path(r, decreasing, 7, out); },
                  "commit_path: accepted: expected in [0, 6] (reserved draft tokens of request 0 (generation 1)), "
                  "got 7");
  expect_rejected(pool, [&] { pool.commit_path(r, decreasing, -1, out); }, "accepted: expected in [0, 6]");
  expect_rejected(pool, [&] { pool.commit_path(r, nullptr, 2, out); },
                  "commit_path: path: expected 2 tree positions, got nullptr");
  expect_rejected(pool, [&] { pool.path_moves(r, decreasing, 3, out); }, "path_moves: path[2]: expected > path[1]");
  expect_rejected(pool, [&] { pool.commit_path(kInvalidRequest, decreasing, 1, out); }, "commit_path: unknown");
  expect_rejected(pool, [&] { pool.commit_path(r, std::vector<int32_t>{4, 1}); }, "path[1]: expected > path[0] = 4");
  EXPECT_EQ(pool.commit_path(r, decreasing, 2, out), 1);  // {0, 3}: the valid prefix of the same array
}

TEST(PagePoolErrors, NegativeCountsAndExtendWithDraftsOutstanding) {
  PagePool pool(4);
  RequestId a = pool.create(5);
  expect_rejected(pool, [&] { pool.create(-1); }, "num_tokens: expected >= 0");
  expect_rejected(pool, [&] { pool.extend(a, -2); }, "num_tokens: expected >= 0");
  expect_rejected(pool, [&] { pool.reserve(a, -1); }, "num_tokens: expected >= 0");
  pool.reserve(a, 2);
  expect_rejected(pool, [&] { pool.extend(a, 1); }, "commit() them before extending");
  expect_rejected(pool, [&] { pool.append(a); }, "commit() them before extending");
  expect_rejected(pool, [&] { pool.fork(a, 6); }, "num_tokens: expected in [0, 5]");
  expect_rejected(pool, [&] { pool.fork(a, -2); }, "got -2");
}

TEST(PagePoolErrors, PositionsOutsideTheRequest) {
  PagePool pool(4);
  RequestId a = pool.create(5);
  expect_rejected(pool, [&] { pool.slot(a, 5); }, "position: expected in [0, 5)");
  expect_rejected(pool, [&] { pool.slot(a, -1); }, "position");
  expect_rejected(pool, [&] { pool.slots(a, 3, 3); }, "expected within [0, 5)");
  expect_rejected(pool, [&] { pool.slots(a, 0, -1); }, "slots");
  expect_rejected(pool, [&] { pool.refcount(4); }, "refcount: page");
  expect_rejected(pool, [&] { pool.pages_needed_to_grow(a, -1); }, "extra_tokens");
}

TEST(PagePoolErrors, ExhaustionThrowsPoolExhaustedAndChangesNothing) {
  PagePool pool(4);
  RequestId a = pool.create(130);  // 3 pages
  RequestId b = pool.create(10);   // 1 page: pool full
  EXPECT_EQ(pool.free_pages(), 0);
  expect_rejected(pool, [&] { pool.create(1); }, "needs 1 free pages, the pool has 0 of 4");
  expect_rejected(pool, [&] { pool.extend(a, 100); }, "needs 1 free pages");
  expect_rejected(pool, [&] { pool.reserve(b, 60); }, "needs 1 free pages");
  expect_rejected(pool, [&] { pool.fork(a); }, "needs 1 free pages");  // 130 % 64 = 2 tokens to copy
  try {
    pool.reserve(a, 200);
    FAIL() << "expected PoolExhausted";
  } catch (const PoolExhausted& e) {
    EXPECT_EQ(e.pages_needed(), 3);  // 330 tokens = 6 pages, 3 held
    EXPECT_EQ(e.pages_free(), 0);
    EXPECT_EQ(e.status(), Status::kInvalidArgument);
  }
  // What still fits is allowed: growth inside the pages already held, forks at page boundaries.
  pool.extend(a, 62);
  pool.reserve(b, 54);
  ForkResult f = pool.fork(a, 128);
  EXPECT_FALSE(f.copy.needed());
  EXPECT_EQ(pool.check_invariants(), "");
}

// ---- the invariant checker finds each kind of corruption -------------------------------------

class InvariantCheck : public ::testing::Test {
 protected:
  void SetUp() override {
    a = pool.create(130);  // pages 0, 1, 2
    b = pool.fork(a, 64).child;  // shares page 0
    ASSERT_EQ(pool.check_invariants(), "");
  }
  void expect_violation(const std::string& needle) {
    const std::string problem = pool.check_invariants();
    EXPECT_NE(problem.find(needle), std::string::npos) << "check_invariants() said: \"" << problem << "\"";
    try {
      pool.assert_invariants();
      ADD_FAILURE() << "assert_invariants() did not throw";
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), Status::kInternal);
    }
  }
  PagePool pool{8};
  RequestId a = kInvalidRequest, b = kInvalidRequest;
};

TEST_F(InvariantCheck, LeakedPage) {
  Access::free_list(pool).pop_back();  // page 3 neither free nor owned
  expect_violation("page 3 is neither free nor held");
}

TEST_F(InvariantCheck, PageBothFreeAndOwned) {
  Access::free_list(pool).push_back(1);
  Access::refcounts(pool)[1] = 0;
  expect_violation("page 1 is free but held");
}

TEST_F(InvariantCheck, DuplicateOnFreeList) {
  Access::free_list(pool).push_back(Access::free_list(pool).front());
  expect_violation("on the free list twice");
}

TEST_F(InvariantCheck, RefcountDisagreesWithOwners) {
  Access::refcounts(pool)[1] = 2;  // a's full, committed page 1: only the count is wrong
  expect_violation("page 1 has refcount 2 but 1 requests hold it");
}

TEST_F(InvariantCheck, PageTwiceInOneRow) {
  std::vector<int32_t>& pages = Access::pages(pool, a);
  Access::refcounts(pool)[pages[2]] = 0;
  Access::free_list(pool).push_back(pages[2]);
  pages[2] = pages[1];
  Access::refcounts(pool)[pages[1]] = 2;
  expect_violation("appears twice in the block table");
}

TEST_F(InvariantCheck, WrongPageCountForTokens) {
  Access::committed(pool, a) = 300;
  expect_violation("holds 3 pages for 300 tokens");
}

TEST_F(InvariantCheck, SharedPageThatCanStillBeWritten) {
  // Make the child share the parent's partial page 2 (what fork() must never do).
  std::vector<int32_t>& pages = Access::pages(pool, b);
  const int32_t partial = Access::pages(pool, a)[2];
  pages.push_back(partial);
  Access::committed(pool, b) = 130;
  Access::refcounts(pool)[partial] = 2;
  Access::shared_counter(pool) += 1;
  expect_violation("is not full and committed");
}

TEST_F(InvariantCheck, SharedCounterDrift) {
  Access::shared_counter(pool) = 5;
  expect_violation("shared page counter 5");
}

TEST_F(InvariantCheck, PageIdOutOfRange) {
  Access::pages(pool, a)[1] = 99;
  expect_violation("outside [0, 8)");
}

// ---- sizing ----------------------------------------------------------------------------------

TEST(PagePoolSizing, PageStride) {
  EXPECT_EQ(page_stride_bytes(KVFormat::kBF16), 64 * 1152);
  EXPECT_EQ(page_stride_bytes(KVFormat::kFP8E4M3), 64 * 576);
  EXPECT_EQ(page_stride_bytes(KVFormat::kFP8DsMla), 64 * 656);
  EXPECT_EQ(page_stride_bytes(KVFormat::kFP8DsMla, 1), 65 * 656);
  EXPECT_THROW(page_stride_bytes(KVFormat::kBF16, -1), Error);
}

TEST(PagePoolSizing, PagesForBudget) {
  // 61 layers of bf16: 61 * 73,728 bytes per page.
  const int64_t per_page = int64_t{61} * 64 * 1152;
  EXPECT_EQ(pages_for_budget(per_page * 1000, KVFormat::kBF16, 61), 1000);
  EXPECT_EQ(pages_for_budget(per_page * 1000 - 1, KVFormat::kBF16, 61), 999);
  EXPECT_EQ(pages_for_budget(0, KVFormat::kBF16, 61), 0);
  // ds_mla with FlashMLA's one-token page padding.
  const int64_t padded = page_stride_bytes(KVFormat::kFP8DsMla, 1);
  EXPECT_EQ(pages_for_budget(padded * 2 * 500, KVFormat::kFP8DsMla, 2, padded), 500);
  EXPECT_EQ(pages_for_budget(int64_t{64} * 656 * 2 * 500, KVFormat::kFP8DsMla, 2), 500);
  // Huge budgets clamp to what int32 slots can address.
  EXPECT_EQ(pages_for_budget(int64_t{1} << 62, KVFormat::kFP8E4M3, 1), kMaxPoolPages);
  EXPECT_THROW(pages_for_budget(-1, KVFormat::kBF16, 1), Error);
  EXPECT_THROW(pages_for_budget(1 << 20, KVFormat::kBF16, 0), Error);
  EXPECT_THROW(pages_for_budget(1 << 20, KVFormat::kBF16, 1, 64 * 1152 - 16), Error);  // stride too small
  EXPECT_THROW(pages_for_budget(1 << 20, KVFormat::kBF16, 1, 64 * 1152 + 8), Error);   // not 16-aligned
}

// ---- property test ---------------------------------------------------------------------------
//
// A scheduler-like driver: random arrivals (prefill lengths around and on multiples of 64),
// decode steps, speculative rounds (1..4 steps x 1..16 draft tokens reserved, random acceptance),
// tree rounds (EAGLE trees of 1..128 tokens in one reservation: random parent arrays, a random
// root-to-node path committed with commit_path and its moves applied gather-then-scatter), branch
// rounds (fork per branch, keep one), prefix forks, finishes, deliberate misuse (bad tree paths
// included), and a small pool so that growth runs into exhaustion (then a random request is
// preempted). A simulated KV cache holds a unique value per written token; after each step the
// touched request's committed tokens must read back through its slots (so shared pages,
// copy-on-fork, tree moves and freed tails are checked end to end), and check_invariants() must pass.

class Rng {
 public:
  explicit Rng(uint64_t seed) : engine_(seed) {}
  int64_t below(int64_t n) { return static_cast<int64_t>(engine_() % static_cast<uint64_t>(n)); }
  int64_t range(int64_t lo, int64_t hi) { return lo + below(hi - lo + 1); }  // inclusive
  bool chance(int percent) { return below(100) < percent; }

 private:
  std::mt19937_64 engine_;
};

struct SimulationResult {
  int64_t steps = 0;
  int64_t spec_rounds = 0;
  int64_t tree_rounds = 0;       // EAGLE trees (commit_path)
  int64_t tree_moves = 0;        // slot moves those commits returned
  int64_t tree_page_frees = 0;   // tree commits that returned pages
  int64_t branch_rounds = 0;     // fork per branch, keep one
  int64_t prefix_forks = 0;
  int64_t copies = 0;
  int64_t exhaustions = 0;
  int64_t misuses = 0;
  int64_t arrivals = 0;
  int64_t partial_accepts = 0;   // commits that dropped part of a reservation
  int64_t page_tail_frees = 0;   // commits that returned pages
  int64_t max_used_pages = 0;
  uint64_t trace_hash = 0;       // every page id handed out and every acceptance, in order
};

class Simulation {
 public:
  Simulation(int64_t num_pages, uint64_t seed) : pool_(num_pages), rng_(seed), cache_(num_pages * kPageSize, 0) {}

  SimulationResult run(int64_t steps) {
    for (int64_t step = 0; step < steps; ++step) {
      one_step();
      ++result_.steps;
      const std::string problem = pool_.check_invariants();
      if (!problem.empty()) {
        ADD_FAILURE() << "step " << step << ": " << problem;
        return result_;
      }
      if (step % 997 == 0)
        for (const Live& r : live_) verify(r);
      if (::testing::Test::HasFailure()) return result_;
      result_.max_used_pages = std::max(result_.max_used_pages, pool_.used_pages());
    }
    for (const Live& r : live_) verify(r);
    // Finish everything: nothing may remain.
    while (!live_.empty()) finish(0);
    EXPECT_EQ(pool_.check_invariants(), "");
    EXPECT_EQ(pool_.free_pages(), pool_.num_pages()) << "leaked pages";
    EXPECT_EQ(pool_.used_pages(), 0);
    const PoolStats s = pool_.stats();
    EXPECT_EQ(s.live_requests, 0);
    EXPECT_EQ(s.committed_tokens, 0);
    EXPECT_EQ(s.reserved_tokens, 0);
    EXPECT_EQ(s.shared_pages, 0);
    return result_;
  }

 private:
  struct Live {
    RequestId id;
    std::vector<uint64_t> tokens;  // expected KV value of each committed position
  };

  void hash(uint64_t v) { result_.trace_hash = (result_.trace_hash ^ v) * 0x100000001b3ull; }

  // Writes fresh values at positions [begin, begin + count) and returns them.
  std::vector<uint64_t> write(RequestId id, int64_t begin, int64_t count) {
    slot_buf_.resize(static_cast<size_t>(count));
    pool_.slots(id, begin, count, slot_buf_.data());
    std::vector<uint64_t> values(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i) {
      values[i] = ++next_value_;
      cache_[static_cast<size_t>(slot_buf_[i])] = values[i];
      hash(static_cast<uint64_t>(slot_buf_[i]));
    }
    return values;
  }

  void verify(const Live& r) {
    ASSERT_EQ(pool_.committed_tokens(r.id), static_cast<int64_t>(r.tokens.size()));
    ASSERT_EQ(pool_.reserved_tokens(r.id), 0);
    const int64_t n = static_cast<int64_t>(r.tokens.size());
    slot_buf_.resize(static_cast<size_t>(n));
    pool_.slots(r.id, 0, n, slot_buf_.data());
    for (int64_t p = 0; p < n; ++p)
      if (cache_[static_cast<size_t>(slot_buf_[p])] != r.tokens[p]) {
        ADD_FAILURE() << PagePool::describe(r.id) << " position " << p << " (slot " << slot_buf_[p]
                      << ") reads " << cache_[slot_buf_[p]] << ", expected " << r.tokens[p]
                      << ": a slot was handed out twice or a copy was lost";
        return;
      }
  }

  // Runs a pool call that may run out of pages; on PoolExhausted checks that nothing changed.
  bool attempt(const std::function<void()>& op) {
    const Snapshot before = snapshot(pool_, /*with_refcounts=*/false);
    try {
      op();
      return true;
    } catch (const PoolExhausted&) {
      ++result_.exhaustions;
      EXPECT_TRUE(before == snapshot(pool_, false)) << "PoolExhausted left the pool changed";
      return false;
    }
  }

  // Preemption after exhaustion, or a normal finish.
  void finish(size_t index) {
    pool_.release(live_[index].id);
    dead_.push_back(live_[index].id);
    if (dead_.size() > 64) dead_.erase(dead_.begin());
    live_[index] = std::move(live_.back());
    live_.pop_back();
  }
  void preempt() {
    if (!live_.empty()) finish(static_cast<size_t>(rng_.below(static_cast<int64_t>(live_.size()))));
  }

  int64_t prefill_length() {
    switch (rng_.below(6)) {
      case 0: return 64 * rng_.range(0, 6);            // exact pages (incl. 0)
      case 1: return 64 * rng_.range(1, 6) - 1;        // one short of a page boundary
      case 2: return 64 * rng_.range(0, 6) + 1;        // one past
      default: return rng_.range(1, 450);
    }
  }

  void arrive() {
    const int64_t n = prefill_length();
    RequestId id = kInvalidRequest;
    if (!attempt([&] { id = pool_.create(n); })) return preempt();
    ++result_.arrivals;
    for (int32_t p : pool_.page_ids(id)) hash(static_cast<uint64_t>(p));
    live_.push_back(Live{id, write(id, 0, n)});
    verify(live_.back());
  }

  void decode(Live& r) {
    if (!attempt([&] { pool_.append(r.id); })) return preempt();
    r.tokens.push_back(write(r.id, static_cast<int64_t>(r.tokens.size()), 1)[0]);
  }

  // Commit `accepted` of a reservation starting at `start` whose values are `drafts`.
  void commit(Live& r, const std::vector<uint64_t>& drafts, int64_t accepted) {
    const int64_t pages_before = static_cast<int64_t>(pool_.page_ids(r.id).size());
    pool_.commit(r.id, accepted);
    hash(static_cast<uint64_t>(accepted));
    if (accepted < static_cast<int64_t>(drafts.size())) ++result_.partial_accepts;
    if (static_cast<int64_t>(pool_.page_ids(r.id).size()) < pages_before) ++result_.page_tail_frees;
    r.tokens.insert(r.tokens.end(), drafts.begin(), drafts.begin() + accepted);
  }

  int64_t acceptance(int64_t reserved) {
    switch (rng_.below(4)) {
      case 0: return 0;
      case 1: return reserved;
      default: return rng_.range(0, reserved);
    }
  }

  // Draft steps each reserve draft_tokens (reservations accumulate), then verify accepts a prefix.
  void speculative_round(Live& r) {
    const int64_t steps = rng_.range(1, 4);
    const int64_t draft_tokens = rng_.range(1, 16);
    const int64_t start = static_cast<int64_t>(r.tokens.size());
    std::vector<uint64_t> drafts;
    for (int64_t s = 0; s < steps; ++s) {
      if (!attempt([&] { pool_.reserve(r.id, draft_tokens); })) {
        // Give the reservation back, then preempt someone else to make room.
        pool_.commit(r.id, 0);
        preempt();
        return;
      }
      std::vector<uint64_t> v = write(r.id, start + s * draft_tokens, draft_tokens);
      drafts.insert(drafts.end(), v.begin(), v.end());
    }
    ++result_.spec_rounds;
    commit(r, drafts, acceptance(static_cast<int64_t>(drafts.size())));
    verify(r);
  }

  // Copy-on-fork of the simulated cache, as the engine would do in every layer.
  void apply(const PageCopy& copy) {
    if (!copy.needed()) return;
    ++result_.copies;
    for (int32_t t = 0; t < copy.num_tokens; ++t)
      cache_[static_cast<size_t>(copy.dst_page) * kPageSize + t] =
          cache_[static_cast<size_t>(copy.src_page) * kPageSize + t];
  }

  // An EAGLE tree in one reservation: n tokens (parents precede children; several roots when the
  // tree's root is not a draft token), one root-to-node path accepted. The moves are applied to the
  // simulated cache as move_kv does (every source read before any destination is written).
  void tree_round(Live& r) {
    const int64_t n = rng_.range(1, 128);
    const int64_t start = static_cast<int64_t>(r.tokens.size());
    if (!attempt([&] { pool_.reserve(r.id, n); })) {
      pool_.commit(r.id, 0);
      return preempt();
    }
    const std::vector<uint64_t> drafts = write(r.id, start, n);
    std::vector<int64_t> parent(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) parent[i] = i == 0 || rng_.chance(5) ? -1 : rng_.below(i);
    std::vector<int32_t> path;
    if (!rng_.chance(10)) {  // else nothing accepted
      for (int64_t node = rng_.below(n); node >= 0; node = parent[node]) path.push_back(static_cast<int32_t>(node));
      std::reverse(path.begin(), path.end());
    }
    const int64_t accepted = static_cast<int64_t>(path.size());
    const int64_t pages_before = static_cast<int64_t>(pool_.page_ids(r.id).size());
    const std::vector<int32_t> tree_slots = pool_.slots(r.id, start, n);
    const std::vector<SlotMove> moves = pool_.commit_path(r.id, path);
    ++result_.tree_rounds;
    result_.tree_moves += static_cast<int64_t>(moves.size());
    hash(static_cast<uint64_t>(accepted) * 131u + moves.size());
    if (static_cast<int64_t>(pool_.page_ids(r.id).size()) < pages_before) ++result_.tree_page_frees;
    // The moves are exactly tree position path[k] -> position k for path[k] != k, in order.
    size_t m = 0;
    for (int64_t k = 0; k < accepted; ++k) {
      if (path[k] == k) continue;
      ASSERT_LT(m, moves.size());
      EXPECT_EQ(moves[m], (SlotMove{tree_slots[path[k]], tree_slots[k]})) << "move " << m;
      ++m;
    }
    EXPECT_EQ(m, moves.size());
    std::vector<uint64_t> gathered;
    for (const SlotMove& mv : moves) gathered.push_back(cache_[static_cast<size_t>(mv.src_slot)]);
    for (size_t i = 0; i < moves.size(); ++i) cache_[static_cast<size_t>(moves[i].dst_slot)] = gathered[i];
    for (int32_t i : path) r.tokens.push_back(drafts[static_cast<size_t>(i)]);
    verify(r);
  }

  // A reserved tree committed with a bad path: must throw and change nothing; then dropped.
  void tree_misuse(Live& r) {
    const int64_t n = rng_.range(3, 40);
    if (!attempt([&] { pool_.reserve(r.id, n); })) {
      pool_.commit(r.id, 0);
      return preempt();
    }
    ++result_.misuses;
    std::vector<int32_t> path{0, static_cast<int32_t>(rng_.range(1, n - 1))};
    switch (rng_.below(4)) {
      case 0: path.push_back(path[1]); break;                                  // repeated
      case 1: path.push_back(static_cast<int32_t>(rng_.range(0, path[1] - 1))); break;  // decreasing
      case 2: path.push_back(static_cast<int32_t>(n + rng_.below(3))); break;  // beyond the tree
      default: path[0] = -1 - static_cast<int32_t>(rng_.below(3)); break;      // negative
    }
    const Snapshot before = snapshot(pool_, false);
    EXPECT_THROW(pool_.commit_path(r.id, path), Error);
    EXPECT_TRUE(before == snapshot(pool_, false)) << "a rejected commit_path changed the pool";
    pool_.commit(r.id, 0);
  }

  // Branches forked from one request, each with its own drafts; one branch survives and replaces
  // the parent.
  void branch_round(size_t index) {
    const int64_t branches = rng_.range(2, 4);
    const int64_t depth = rng_.range(1, 16);
    std::vector<Live> children;
    std::vector<std::vector<uint64_t>> drafts;
    bool ok = true;
    for (int64_t b = 0; b < branches && ok; ++b) {
      ForkResult f;
      if (!attempt([&] { f = pool_.fork(live_[index].id); })) { ok = false; break; }
      apply(f.copy);
      children.push_back(Live{f.child, live_[index].tokens});
      const int64_t start = static_cast<int64_t>(live_[index].tokens.size());
      if (!attempt([&] { pool_.reserve(f.child, depth); })) { ok = false; break; }
      drafts.push_back(write(f.child, start, depth));
    }
    if (!ok) {
      for (Live& c : children) pool_.release(c.id);
      return preempt();
    }
    ++result_.branch_rounds;
    const size_t winner = static_cast<size_t>(rng_.below(branches));
    for (size_t b = 0; b < children.size(); ++b)
      if (b != winner) pool_.release(children[b].id);
    commit(children[winner], drafts[winner], acceptance(depth));
    pool_.release(live_[index].id);
    live_[index] = std::move(children[winner]);
    verify(live_[index]);
  }

  // A new request sharing a prefix of an existing one (prefix cache hit), then its own suffix.
  void prefix_fork(size_t index) {
    const int64_t len = static_cast<int64_t>(live_[index].tokens.size());
    const int64_t k = rng_.chance(30) ? -1 : rng_.range(0, len);
    ForkResult f;
    if (!attempt([&] { f = pool_.fork(live_[index].id, k); })) return preempt();
    ++result_.prefix_forks;
    apply(f.copy);
    const int64_t shared = k < 0 ? len : k;
    Live child{f.child, std::vector<uint64_t>(live_[index].tokens.begin(), live_[index].tokens.begin() + shared)};
    const int64_t suffix = rng_.range(0, 80);
    if (attempt([&] { pool_.extend(child.id, suffix); })) {
      std::vector<uint64_t> v = write(child.id, shared, suffix);
      child.tokens.insert(child.tokens.end(), v.begin(), v.end());
    }
    live_.push_back(std::move(child));
    verify(live_.back());
    verify(live_[index]);  // the parent still reads its own values
  }

  // Deliberate misuse: must throw Error and leave the pool as it was.
  void misuse() {
    ++result_.misuses;
    const Snapshot before = snapshot(pool_, false);
    bool threw = false;
    try {
      const int64_t kind = rng_.below(6);
      if (kind == 0 && !dead_.empty()) {
        pool_.release(dead_[static_cast<size_t>(rng_.below(static_cast<int64_t>(dead_.size())))]);
      } else if (kind == 1 && !live_.empty()) {
        pool_.commit(live_[0].id, rng_.range(1, 16));  // nothing reserved
      } else if (kind == 2 && !live_.empty()) {
        Live& r = live_[static_cast<size_t>(rng_.below(static_cast<int64_t>(live_.size())))];
        pool_.fork(r.id, static_cast<int64_t>(r.tokens.size()) + rng_.range(1, 5));
      } else if (kind == 3) {
        pool_.extend(kInvalidRequest - rng_.below(5), 1);
      } else if (kind == 4 && !live_.empty()) {
        pool_.slot(live_[0].id, static_cast<int64_t>(live_[0].tokens.size()));
      } else {
        pool_.create(-1 - rng_.below(3));
      }
    } catch (const PoolExhausted&) {
      ADD_FAILURE() << "misuse reported as exhaustion";
    } catch (const Error&) {
      threw = true;
    }
    EXPECT_TRUE(threw) << "misuse was accepted";
    EXPECT_TRUE(before == snapshot(pool_, false)) << "misuse changed the pool";
  }

  void one_step() {
    const int64_t action = rng_.below(100);
    if (live_.empty() || action < 10) return arrive();
    const size_t index = static_cast<size_t>(rng_.below(static_cast<int64_t>(live_.size())));
    if (live_[index].tokens.size() > 3000 || action < 16) return finish(index);
    if (action < 26) return decode(live_[index]);
    if (action < 31) return branch_round(index);
    if (action < 36) return prefix_fork(index);
    if (action < 39) return misuse();
    if (action < 40) return tree_misuse(live_[index]);
    if (action < 58) return tree_round(live_[index]);
    speculative_round(live_[index]);
  }

  PagePool pool_;
  Rng rng_;
  std::vector<uint64_t> cache_;  // one value per slot
  std::vector<Live> live_;
  std::vector<RequestId> dead_;
  std::vector<int32_t> slot_buf_;
  uint64_t next_value_ = 0;
  SimulationResult result_;
};

TEST(PagePoolProperty, HundredThousandSpeculativeStepsWithoutLeaks) {
  Simulation sim(/*num_pages=*/320, /*seed=*/20250519);
  const SimulationResult r = sim.run(100000);
  ASSERT_FALSE(::testing::Test::HasFailure());
  EXPECT_EQ(r.steps, 100000);
  // The run must have exercised every path, and often (else the test proves little).
  EXPECT_GT(r.spec_rounds, 20000);
  EXPECT_GT(r.tree_rounds, 10000);
  EXPECT_GT(r.tree_moves, 20000);
  EXPECT_GT(r.tree_page_frees, 2000);
  EXPECT_GT(r.branch_rounds, 2000);
  EXPECT_GT(r.prefix_forks, 1500);
  EXPECT_GT(r.copies, 3000);
  EXPECT_GT(r.exhaustions, 500);
  EXPECT_GT(r.misuses, 1500);
  EXPECT_GT(r.partial_accepts, 10000);
  EXPECT_GT(r.page_tail_frees, 5000);
  EXPECT_GT(r.max_used_pages, 300);  // pressure reached the top of the pool
  std::printf("steps %lld: spec %lld tree %lld (moves %lld, page-frees %lld) branch %lld prefix-forks %lld "
              "copies %lld exhaustions %lld misuse %lld partial-accepts %lld page-frees %lld max-used %lld/320\n",
              (long long)r.steps, (long long)r.spec_rounds, (long long)r.tree_rounds, (long long)r.tree_moves,
              (long long)r.tree_page_frees, (long long)r.branch_rounds, (long long)r.prefix_forks,
              (long long)r.copies, (long long)r.exhaustions, (long long)r.misuses, (long long)r.partial_accepts,
              (long long)r.page_tail_frees, (long long)r.max_used_pages);
}

TEST(PagePoolProperty, SameSeedSameTrace) {
  const SimulationResult a = Simulation(96, 7).run(5000);
  const SimulationResult b = Simulation(96, 7).run(5000);
  const SimulationResult c = Simulation(96, 8).run(5000);
  EXPECT_EQ(a.trace_hash, b.trace_hash);
  EXPECT_NE(a.trace_hash, c.trace_hash);
  EXPECT_GT(a.exhaustions, 0);
}

}  // namespace
}  // namespace openmla::runtime
