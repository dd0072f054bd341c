// Host builders of tree-mask rows (openmla/tree_mask.h).
#include "openmla/tree_mask.h"

#include <cstddef>
#include <string>

#include "core/check.h"
#include "openmla/kv_format.h"

namespace openmla {
namespace {

using detail::concat;
using detail::fail_arg;

void check_count(const char* name, int n) {
  if (n < 1 || n > kMaxTreeQueryLen) fail_arg(name, concat("a value in [1, ", kMaxTreeQueryLen, "]"), n);
}

void check_pointer(const char* name, const void* p) {
  if (p == nullptr) fail_arg(name, "a non-null pointer", "nullptr");
}

void check_batch(int batch) {
  if (batch < 0) fail_arg("batch", ">= 0", batch);
}

// One request's draft block: num_draft rows of `stride` bytes whose draft columns start at `first`.
// Row i becomes the word with bit j set where column first + j is nonzero.
void pack_rows(const uint8_t* block, size_t stride, size_t first, int num_draft, int64_t* rows) {
  for (int i = 0; i < num_draft; ++i) {
    const uint8_t* row = block + static_cast<size_t>(i) * stride + first;
    uint64_t word = 0;
    for (int j = 0; j < num_draft; ++j)
      if (row[j] != 0) word |= uint64_t{1} << j;
    rows[i] = static_cast<int64_t>(word);
  }
}

}  // namespace

void tree_mask_from_parents(const int32_t* parents, int n, int64_t* rows) {
  check_count("n", n);
  check_pointer("parents", parents);
  check_pointer("rows", rows);
  // Validate everything before writing, so that a bad tree leaves rows untouched.
  for (int i = 0; i < n; ++i)
    if (parents[i] < -1 || parents[i] >= i)
      fail_arg(concat("parents[", i, "]").c_str(),
               i == 0 ? std::string("-1 (token 0 can only be a root)")
                      : concat("-1 (a root) or an earlier token's index in [0, ", i - 1, "]"),
               parents[i]);
  for (int i = 0; i < n; ++i) {
    uint64_t word = uint64_t{1} << i;
    if (parents[i] >= 0) word |= static_cast<uint64_t>(rows[parents[i]]);
    rows[i] = static_cast<int64_t>(word);
  }
}

std::vector<int64_t> causal_chain_mask(int n) {
  check_count("n", n);
  std::vector<int64_t> rows(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) rows[i] = static_cast<int64_t>(i == 63 ? ~uint64_t{0} : (uint64_t{2} << i) - 1);
  return rows;
}

void tree_mask_from_sglang_custom_mask(const uint8_t* custom_mask, const int64_t* prefix_lens, int batch,
                                       int num_draft, int64_t* rows_out, bool check_prefix) {
  check_batch(batch);
  check_count("num_draft", num_draft);
  if (batch == 0) return;
  check_pointer("custom_mask", custom_mask);
  check_pointer("prefix_lens", prefix_lens);
  check_pointer("rows_out", rows_out);
  for (int r = 0; r < batch; ++r)
    if (prefix_lens[r] < 0) fail_arg(concat("prefix_lens[", r, "]").c_str(), ">= 0", prefix_lens[r]);
  size_t offset = 0;  // request r's block: num_draft * sum(prefix_lens[:r]) + r * num_draft^2
  for (int r = 0; r < batch; ++r) {
    const size_t prefix = static_cast<size_t>(prefix_lens[r]);
    const size_t stride = prefix + static_cast<size_t>(num_draft);
    const uint8_t* block = custom_mask + offset;
    if (check_prefix) {
      for (int i = 0; i < num_draft; ++i) {
        const uint8_t* row = block + static_cast<size_t>(i) * stride;
        for (size_t c = 0; c < prefix; ++c)
          if (row[c] == 0)
            fail_arg("custom_mask",
                     concat("every prefix column true (each draft token sees the whole prefix) in request ", r,
                            ", row ", i, " (columns [0, ", prefix, "))"),
                     concat("false at column ", c));
      }
    }
    pack_rows(block, stride, prefix, num_draft, rows_out + static_cast<size_t>(r) * num_draft);
    offset += static_cast<size_t>(num_draft) * stride;
  }
}

void tree_mask_from_sglang_qlen_mask(const uint8_t* mask, int batch, int num_draft, int64_t* rows_out) {
  check_batch(batch);
  check_count("num_draft", num_draft);
  if (batch == 0) return;
  check_pointer("mask", mask);
  check_pointer("rows_out", rows_out);
  const size_t block = static_cast<size_t>(num_draft) * num_draft;
  for (int r = 0; r < batch; ++r)
    pack_rows(mask + r * block, static_cast<size_t>(num_draft), 0, num_draft,
              rows_out + static_cast<size_t>(r) * num_draft);
}

}  // namespace openmla
