// Tree-mask row builders (openmla/tree_mask.h): rows from parent indices against an ancestor walk, the
// causal chain, SGLang's verify masks, and the errors for bad trees and sizes.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "openmla/error.h"
#include "openmla/kv_format.h"
#include "openmla/tree_mask.h"

namespace openmla {
namespace {

// Row i by walking token i's ancestors (the definition, independent of the one-pass builder).
std::vector<int64_t> rows_by_walk(const std::vector<int32_t>& parents) {
  std::vector<int64_t> rows(parents.size());
  for (size_t i = 0; i < parents.size(); ++i) {
    uint64_t word = 0;
    for (int32_t t = static_cast<int32_t>(i); t >= 0; t = parents[t]) word |= uint64_t{1} << t;
    rows[i] = static_cast<int64_t>(word);
  }
  return rows;
}

std::vector<int64_t> build(const std::vector<int32_t>& parents) {
  std::vector<int64_t> rows(parents.size(), -7);
  tree_mask_from_parents(parents.data(), static_cast<int>(parents.size()), rows.data());
  return rows;
}

// The Error's status and message of a call expected to throw.
template <typename F>
std::string error_of(F&& f, Status expected = Status::kInvalidArgument) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), expected) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no openmla::Error thrown";
  return "";
}

TEST(TreeMask, ChainFromParentsIsTheCausalChain) {
  for (int n : {1, 2, 5, 17, 63, kMaxTreeQueryLen}) {
    std::vector<int32_t> parents(n);
    for (int i = 0; i < n; ++i) parents[i] = i - 1;
    const std::vector<int64_t> rows = build(parents);
    EXPECT_EQ(rows, causal_chain_mask(n)) << "n=" << n;
    EXPECT_EQ(rows, rows_by_walk(parents)) << "n=" << n;
    for (int i = 0; i < n; ++i)
      EXPECT_EQ(static_cast<uint64_t>(rows[i]), i == 63 ? ~uint64_t{0} : (uint64_t{1} << (i + 1)) - 1) << i;
  }
  EXPECT_EQ(causal_chain_mask(3), (std::vector<int64_t>{0b1, 0b11, 0b111}));
  EXPECT_EQ(causal_chain_mask(64).back(), int64_t{-1});  // all 64 bits
}

TEST(TreeMask, StarEveryTokenARootSeesOnlyItself) {
  for (int n : {1, 4, 64}) {
    const std::vector<int64_t> rows = build(std::vector<int32_t>(n, -1));
    for (int i = 0; i < n; ++i) EXPECT_EQ(static_cast<uint64_t>(rows[i]), uint64_t{1} << i) << i;
  }
}

TEST(TreeMask, FullBinaryTrees) {
  // Heap order: token i's parent is (i - 1) / 2; depth d has 2^d tokens. 63 tokens = depth 0..5.
  for (int n : {3, 7, 15, 31, 63}) {
    std::vector<int32_t> parents(n);
    for (int i = 0; i < n; ++i) parents[i] = i == 0 ? -1 : (i - 1) / 2;
    const std::vector<int64_t> rows = build(parents);
    EXPECT_EQ(rows, rows_by_walk(parents)) << "n=" << n;
  }
  // Spelled out for 7 tokens: 0 -> {1, 2}, 1 -> {3, 4}, 2 -> {5, 6}.
  EXPECT_EQ(build({-1, 0, 0, 1, 1, 2, 2}),
            (std::vector<int64_t>{0b1, 0b11, 0b101, 0b1011, 0b10011, 0b100101, 0b1000101}));
}

TEST(TreeMask, EagleTopk4Depth4With16Tokens) {
  // Token 0 is the verified (bonus) token; depth 1 holds its top-4 children; deeper levels expand the best
  // nodes, 16 tokens in all, in EAGLE's order (parents first).
  const std::vector<int32_t> parents = {-1, 0, 0, 0, 0,  // depth 1: 1..4
                                        1,  1, 2, 3,     // depth 2: 5..8
                                        5,  5, 6, 7,     // depth 3: 9..12
                                        9,  9, 10};      // depth 4: 13..15
  ASSERT_EQ(parents.size(), 16u);
  const std::vector<int64_t> rows = build(parents);
  EXPECT_EQ(rows, rows_by_walk(parents));
  EXPECT_EQ(rows[0], 0b1);
  EXPECT_EQ(rows[4], (1 << 4) | 1);
  EXPECT_EQ(rows[13], (1 << 13) | (1 << 9) | (1 << 5) | (1 << 1) | 1);
  EXPECT_EQ(rows[15], (1 << 15) | (1 << 10) | (1 << 5) | (1 << 1) | 1);
  // Two roots (a forest hanging off the prefix) is a tree mask too.
  const std::vector<int32_t> forest = {-1, -1, 0, 1, 2, 3};
  EXPECT_EQ(build(forest), rows_by_walk(forest));
}

TEST(TreeMask, ParentsErrorsNameTheArgument) {
  int64_t rows[kMaxTreeQueryLen + 1] = {};
  std::vector<int32_t> p = {-1, 0, 2};  // token 2 names itself
  std::string m = error_of([&] { tree_mask_from_parents(p.data(), 3, rows); });
  EXPECT_EQ(m, "parents[2]: expected -1 (a root) or an earlier token's index in [0, 1], got 2");
  p = {-1, 2, 0};  // a child before its parent
  m = error_of([&] { tree_mask_from_parents(p.data(), 3, rows); });
  EXPECT_EQ(m, "parents[1]: expected -1 (a root) or an earlier token's index in [0, 0], got 2");
  p = {0};
  m = error_of([&] { tree_mask_from_parents(p.data(), 1, rows); });
  EXPECT_EQ(m, "parents[0]: expected -1 (token 0 can only be a root), got 0");
  p = {-1, -2};
  m = error_of([&] { tree_mask_from_parents(p.data(), 2, rows); });
  EXPECT_NE(m.find("parents[1]"), std::string::npos) << m;
  EXPECT_NE(m.find("got -2"), std::string::npos) << m;

  std::vector<int32_t> big(kMaxTreeQueryLen + 1, -1);
  m = error_of([&] { tree_mask_from_parents(big.data(), kMaxTreeQueryLen + 1, rows); });
  EXPECT_EQ(m, "n: expected a value in [1, 64], got 65");
  m = error_of([&] { tree_mask_from_parents(big.data(), 0, rows); });
  EXPECT_EQ(m, "n: expected a value in [1, 64], got 0");
  m = error_of([&] { tree_mask_from_parents(nullptr, 2, rows); });
  EXPECT_EQ(m, "parents: expected a non-null pointer, got nullptr");
  m = error_of([&] { causal_chain_mask(65); });
  EXPECT_EQ(m, "n: expected a value in [1, 64], got 65");

  // A rejected tree leaves the rows as they were.
  int64_t kept[3] = {11, 22, 33};
  p = {-1, 0, 5};
  error_of([&] { tree_mask_from_parents(p.data(), 3, kept); });
  EXPECT_EQ(kept[0], 11);
  EXPECT_EQ(kept[1], 22);
}

// SGLang's FULL_MASK verify mask for 2 requests of 4 draft tokens, prefixes of 3 and 1 positions: per request
// a row-major block of 4 rows x (prefix + 4) columns, the blocks back to back (4 * 7 + 4 * 5 = 48 bytes).
// Request 0's tree: 0 -> {1, 2}, 1 -> {3}; request 1's: the chain 0 -> 1 -> 2 -> 3.
const std::vector<uint8_t> kSglangMask = {
    // request 0: prefix | drafts 0..3
    1, 1, 1, /**/ 1, 0, 0, 0,  //
    1, 1, 1, /**/ 1, 1, 0, 0,  //
    1, 1, 1, /**/ 1, 0, 1, 0,  //
    1, 1, 1, /**/ 1, 1, 0, 1,  //
    // request 1
    1, /**/ 1, 0, 0, 0,  //
    1, /**/ 1, 1, 0, 0,  //
    1, /**/ 1, 1, 1, 0,  //
    1, /**/ 1, 1, 1, 1,  //
};
const std::vector<int64_t> kSglangRows = {0b1, 0b11, 0b101, 0b1011, 0b1, 0b11, 0b111, 0b1111};

TEST(TreeMask, FromSglangCustomMask) {
  ASSERT_EQ(kSglangMask.size(), 48u);
  const int64_t prefix_lens[2] = {3, 1};
  std::vector<int64_t> rows(8, -7);
  tree_mask_from_sglang_custom_mask(kSglangMask.data(), prefix_lens, 2, 4, rows.data());
  EXPECT_EQ(rows, kSglangRows);
  EXPECT_EQ(std::vector<int64_t>(rows.begin(), rows.begin() + 4), build({-1, 0, 0, 1}));
  EXPECT_EQ(std::vector<int64_t>(rows.begin() + 4, rows.end()), causal_chain_mask(4));

  // Nonzero bytes other than 1 are true (a bool tensor viewed as bytes holds 0/1; anything nonzero counts).
  std::vector<uint8_t> mask = kSglangMask;
  mask[3] = 0xFF;
  tree_mask_from_sglang_custom_mask(mask.data(), prefix_lens, 2, 4, rows.data());
  EXPECT_EQ(rows, kSglangRows);

  // An empty prefix: the block is the draft columns alone.
  const int64_t no_prefix[1] = {0};
  const std::vector<uint8_t> two = {1, 0, 1, 1};
  std::vector<int64_t> two_rows(2);
  tree_mask_from_sglang_custom_mask(two.data(), no_prefix, 1, 2, two_rows.data());
  EXPECT_EQ(two_rows, (std::vector<int64_t>{0b1, 0b11}));

  // No requests: nothing read or written.
  tree_mask_from_sglang_custom_mask(nullptr, nullptr, 0, 4, nullptr);
}

TEST(TreeMask, FromSglangCustomMaskRejectsAHiddenPrefix) {
  const int64_t prefix_lens[2] = {3, 1};
  std::vector<int64_t> rows(8);
  std::vector<uint8_t> mask = kSglangMask;
  mask[28 + 2 * 5] = 0;  // request 1, row 2, prefix column 0
  const std::string m =
      error_of([&] { tree_mask_from_sglang_custom_mask(mask.data(), prefix_lens, 2, 4, rows.data()); });
  EXPECT_EQ(m,
            "custom_mask: expected every prefix column true (each draft token sees the whole prefix) in request 1, "
            "row 2 (columns [0, 1)), got false at column 0");
  // Unchecked (SGLang's fill_prefix_mask=False leaves those columns unwritten): the draft columns still convert.
  tree_mask_from_sglang_custom_mask(mask.data(), prefix_lens, 2, 4, rows.data(), /*check_prefix=*/false);
  EXPECT_EQ(rows, kSglangRows);

  const int64_t negative[2] = {3, -1};
  EXPECT_EQ(error_of([&] { tree_mask_from_sglang_custom_mask(mask.data(), negative, 2, 4, rows.data()); }),
            "prefix_lens[1]: expected >= 0, got -1");
  EXPECT_EQ(error_of([&] { tree_mask_from_sglang_custom_mask(mask.data(), prefix_lens, 2, 65, rows.data()); }),
            "num_draft: expected a value in [1, 64], got 65");
  EXPECT_EQ(error_of([&] { tree_mask_from_sglang_custom_mask(mask.data(), prefix_lens, -1, 4, rows.data()); }),
            "batch: expected >= 0, got -1");
  EXPECT_EQ(error_of([&] { tree_mask_from_sglang_custom_mask(nullptr, prefix_lens, 2, 4, rows.data()); }),
            "custom_mask: expected a non-null pointer, got nullptr");
}

TEST(TreeMask, FromSglangQlenMask) {
  // The same two trees without prefix columns: [2, 4, 4].
  std::vector<uint8_t> mask;
  for (size_t r = 0, offset = 0; r < 2; ++r) {
    const size_t prefix = r == 0 ? 3 : 1;
    for (size_t i = 0; i < 4; ++i, offset += prefix + 4)
      mask.insert(mask.end(), kSglangMask.begin() + offset + prefix, kSglangMask.begin() + offset + prefix + 4);
  }
  ASSERT_EQ(mask.size(), 32u);
  std::vector<int64_t> rows(8);
  tree_mask_from_sglang_qlen_mask(mask.data(), 2, 4, rows.data());
  EXPECT_EQ(rows, kSglangRows);
  EXPECT_EQ(error_of([&] { tree_mask_from_sglang_qlen_mask(mask.data(), 2, 0, rows.data()); }),
            "num_draft: expected a value in [1, 64], got 0");
}

TEST(TreeMask, SixtyFourDraftsUseTheSignBit) {
  // Draft token 63 is bit 63, the int64 sign bit.
  std::vector<int32_t> parents(64, -1);
  parents[63] = 0;
  const std::vector<int64_t> rows = build(parents);
  EXPECT_EQ(static_cast<uint64_t>(rows[63]), (uint64_t{1} << 63) | 1u);
  std::vector<uint8_t> block(64 * 64, 0);
  for (int i = 0; i < 64; ++i) block[i * 64 + i] = 1;
  block[63 * 64] = 1;
  std::vector<int64_t> from_sglang(64);
  tree_mask_from_sglang_qlen_mask(block.data(), 1, 64, from_sglang.data());
  EXPECT_EQ(from_sglang, rows);
}

}  // namespace
}  // namespace openmla
