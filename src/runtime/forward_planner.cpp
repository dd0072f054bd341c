#include "openmla/runtime/forward_planner.h"

#include <algorithm>
#include <cstring>

#include "core/check.h"

namespace openmla::runtime {
namespace {

constexpr size_t kAlign = 256;
constexpr size_t align_up(size_t v) noexcept { return (v + kAlign - 1) / kAlign * kAlign; }

int64_t pages_for_tokens(int64_t tokens) noexcept { return (tokens + kPageSize - 1) / kPageSize; }

int32_t slot_of(const std::vector<int32_t>& pages, int64_t position) noexcept {
  return pages[static_cast<size_t>(position / kPageSize)] * kPageSize + static_cast<int32_t>(position % kPageSize);
}

}  // namespace

const char* forward_mode_name(ForwardMode mode) noexcept {
  switch (mode) {
    case ForwardMode::kDecode: return "decode";
    case ForwardMode::kTargetVerify: return "target_verify";
    case ForwardMode::kDraftDecode: return "draft_decode";
    case ForwardMode::kDraftExtend: return "draft_extend";
  }
  return "unknown";
}

ForwardLayout forward_layout(const ForwardCapacity& c) {
  ForwardLayout l;
  l.seqlens_offset = 0;
  l.slots_offset = align_up(sizeof(int32_t) * static_cast<size_t>(c.max_batch));
  l.step_bytes = align_up(l.slots_offset + sizeof(int32_t) * static_cast<size_t>(c.max_batch) * c.max_q_len);
  l.block_table_offset = l.step_bytes * static_cast<size_t>(c.max_steps);
  l.move_indptr_offset = l.block_table_offset +
                         align_up(sizeof(int32_t) * static_cast<size_t>(c.max_batch) * c.max_pages_per_request);
  const size_t move_bytes = align_up(sizeof(int32_t) * static_cast<size_t>(c.max_batch) * c.max_q_len);
  l.move_src_offset = l.move_indptr_offset + align_up(sizeof(int32_t) * (static_cast<size_t>(c.max_batch) + 1));
  l.move_dst_offset = l.move_src_offset + move_bytes;
  l.total_bytes = l.move_dst_offset + move_bytes;
  return l;
}

int bucket_for_batch(int batch_size, int max_batch) {
  if (max_batch < 1) detail::fail_arg("bucket_for_batch: max_batch", ">= 1", max_batch);
  if (batch_size < 0 || batch_size > max_batch)
    detail::fail_arg("bucket_for_batch: batch_size", detail::concat("in [0, ", max_batch, "]"), batch_size);
  int bucket = 1;
  while (bucket < batch_size) bucket *= 2;
  return std::min(bucket, max_batch);
}

std::vector<int> batch_buckets(int max_batch) {
  if (max_batch < 1) detail::fail_arg("batch_buckets: max_batch", ">= 1", max_batch);
  std::vector<int> buckets;
  for (int b = 1; b < max_batch; b *= 2) buckets.push_back(b);
  buckets.push_back(max_batch);
  return buckets;
}

ForwardPlanner::ForwardPlanner(const ForwardCapacity& c) : capacity_(c) {
  if (c.max_batch < 1) detail::fail_arg("ForwardCapacity.max_batch", ">= 1", c.max_batch);
  if (c.max_pages_per_request < 1 || c.max_pages_per_request > kMaxPoolPages)
    detail::fail_arg("ForwardCapacity.max_pages_per_request", detail::concat("in [1, ", kMaxPoolPages, "]"),
                     c.max_pages_per_request);
  if (c.max_q_len < 1 || c.max_q_len > kMaxQueryLen)
    detail::fail_arg("ForwardCapacity.max_q_len", detail::concat("in [1, ", kMaxQueryLen, "]"), c.max_q_len);
  if (c.max_steps < 1) detail::fail_arg("ForwardCapacity.max_steps", ">= 1", c.max_steps);
  layout_ = forward_layout(c);
  sorted_scratch_.reserve(static_cast<size_t>(c.max_batch));
}

int32_t* ForwardPlanner::seqlens(void* staging, int step) const noexcept {
  return reinterpret_cast<int32_t*>(static_cast<char*>(staging) + step * layout_.step_bytes + layout_.seqlens_offset);
}
int32_t* ForwardPlanner::write_slots(void* staging, int step) const noexcept {
  return reinterpret_cast<int32_t*>(static_cast<char*>(staging) + step * layout_.step_bytes + layout_.slots_offset);
}
int32_t* ForwardPlanner::block_table(void* staging) const noexcept {
  return reinterpret_cast<int32_t*>(static_cast<char*>(staging) + layout_.block_table_offset);
}
const int32_t* ForwardPlanner::seqlens(const void* staging, int step) const noexcept {
  return seqlens(const_cast<void*>(staging), step);
}
const int32_t* ForwardPlanner::write_slots(const void* staging, int step) const noexcept {
  return write_slots(const_cast<void*>(staging), step);
}
const int32_t* ForwardPlanner::block_table(const void* staging) const noexcept {
  return block_table(const_cast<void*>(staging));
}

int32_t* ForwardPlanner::move_row_indptr(void* staging) const noexcept {
  return reinterpret_cast<int32_t*>(static_cast<char*>(staging) + layout_.move_indptr_offset);
}
int32_t* ForwardPlanner::move_src_slots(void* staging) const noexcept {
  return reinterpret_cast<int32_t*>(static_cast<char*>(staging) + layout_.move_src_offset);
}
int32_t* ForwardPlanner::move_dst_slots(void* staging) const noexcept {
  return reinterpret_cast<int32_t*>(static_cast<char*>(staging) + layout_.move_dst_offset);
}
const int32_t* ForwardPlanner::move_row_indptr(const void* staging) const noexcept {
  return move_row_indptr(const_cast<void*>(staging));
}
const int32_t* ForwardPlanner::move_src_slots(const void* staging) const noexcept {
  return move_src_slots(const_cast<void*>(staging));
}
const int32_t* ForwardPlanner::move_dst_slots(const void* staging) const noexcept {
  return move_dst_slots(const_cast<void*>(staging));
}

void ForwardPlanner::plan_moves(const StepMoves& moves, ForwardMeta& meta, void* staging) const {
  if (moves.empty()) return;
  const char* name = forward_mode_name(meta.mode);
  if (meta.batch_size < 0 || meta.padded_batch < std::max(meta.batch_size, 1) || meta.padded_batch > capacity_.max_batch)
    detail::fail(Status::kInvalidArgument, "plan_moves: meta: expected a planned step (batch_size <= padded_batch <= ",
                 capacity_.max_batch, "), got batch_size ", meta.batch_size, ", padded_batch ", meta.padded_batch);
  const int32_t* indptr = moves.indptr;
  if (indptr[0] != 0)
    detail::fail(Status::kInvalidArgument, name, ": moves.indptr[0]: expected 0, got ", indptr[0]);
  for (int r = 0; r < meta.batch_size; ++r) {
    const int64_t count = static_cast<int64_t>(indptr[r + 1]) - indptr[r];
    if (count < 0 || count > capacity_.max_q_len)
      detail::fail(Status::kInvalidArgument, name, ": moves of row ", r, " (indptr[", r, "] = ", indptr[r],
                   ", indptr[", r + 1, "] = ", indptr[r + 1], "): expected 0 to ", capacity_.max_q_len,
                   " (ForwardCapacity.max_q_len) moves, got ", count);
  }
  const int total = indptr[meta.batch_size];  // <= batch_size * max_q_len <= max_moves
  if (total > 0 && moves.moves == nullptr)
    detail::fail(Status::kInvalidArgument, name, ": moves.moves: expected ", total, " moves, got nullptr");
  int32_t* row_indptr = move_row_indptr(staging);
  int32_t* src = move_src_slots(staging);
  int32_t* dst = move_dst_slots(staging);
  for (int r = 0; r <= meta.batch_size; ++r) row_indptr[r] = indptr[r];
  for (int r = meta.batch_size + 1; r <= meta.padded_batch; ++r) row_indptr[r] = total;  // padding: empty
  for (int i = 0; i < total; ++i) {
    src[i] = moves.moves[i].src_slot;
    dst[i] = moves.moves[i].dst_slot;
  }
  meta.has_moves = true;
  meta.num_moves = total;
}

size_t ForwardPlanner::upload_header_bytes(const ForwardMeta& meta) const noexcept {
  // Every step before the last whole, then the last step's seqlens and its slots in use.
  return static_cast<size_t>(meta.num_steps - 1) * layout_.step_bytes + layout_.slots_offset +
         sizeof(int32_t) * static_cast<size_t>(meta.padded_batch) * meta.q_len;
}

ForwardMeta ForwardPlanner::begin(ForwardMode mode, int batch_size, int padded_batch, int q_len, int num_steps,
                                  const RequestId* requests) const {
  const char* name = forward_mode_name(mode);
  if (batch_size < 0 || batch_size > capacity_.max_batch)
    detail::fail(Status::kInvalidArgument, name, ": batch_size: expected in [0, ", capacity_.max_batch,
                 "] (ForwardCapacity.max_batch), got ", batch_size);
  if (padded_batch == 0) padded_batch = std::max(batch_size, 1);
  if (padded_batch < std::max(batch_size, 1) || padded_batch > capacity_.max_batch)
    detail::fail(Status::kInvalidArgument, name, ": padded_batch: expected 0 or in [", std::max(batch_size, 1), ", ",
                 capacity_.max_batch, "], got ", padded_batch);
  if (batch_size > 0 && requests == nullptr)
    detail::fail(Status::kInvalidArgument, name, ": requests: expected ", batch_size, " handles, got nullptr");

  // A request twice in one batch would have two rows writing the same slots.
  sorted_scratch_.assign(requests, requests + batch_size);
  std::sort(sorted_scratch_.begin(), sorted_scratch_.end());
  auto dup = std::adjacent_find(sorted_scratch_.begin(), sorted_scratch_.end());
  if (dup != sorted_scratch_.end())
    detail::fail(Status::kInvalidArgument, name, ": requests: ", PagePool::describe(*dup),
                 " appears more than once in the batch");

  ForwardMeta meta;
  meta.mode = mode;
  meta.batch_size = batch_size;
  meta.padded_batch = padded_batch;
  meta.q_len = q_len;
  meta.num_steps = num_steps;
  meta.table_width = 0;
  return meta;
}

// Rows [batch_size, padded_batch): seqlen 0 and skipped slots, in every step.
static void write_padding_rows(const ForwardPlanner& planner, const ForwardMeta& meta, void* staging) {
  for (int step = 0; step < meta.num_steps; ++step) {
    int32_t* seqlens = planner.seqlens(staging, step);
    int32_t* slots = planner.write_slots(staging, step);
    for (int r = meta.batch_size; r < meta.padded_batch; ++r) seqlens[r] = 0;
    std::fill(slots + static_cast<size_t>(meta.batch_size) * meta.q_len,
              slots + static_cast<size_t>(meta.padded_batch) * meta.q_len, -1);
  }
}

// Checks that `pages_read` block-table entries fit the capacity, copies them into the row, and
// widens the table.
static void write_table_row(const ForwardPlanner& planner, ForwardMeta& meta, int row, RequestId id,
                            const std::vector<int32_t>& pages, int64_t pages_read, void* staging) {
  const int max_pages = planner.capacity().max_pages_per_request;
  if (pages_read > max_pages)
    detail::fail(Status::kInvalidArgument, forward_mode_name(meta.mode), ": ", PagePool::describe(id), " (row ", row,
                 ") needs ", pages_read, " block-table entries, more than ForwardCapacity.max_pages_per_request = ",
                 max_pages);
  int32_t* dst = planner.block_table(staging) + static_cast<size_t>(row) * max_pages;
  std::memcpy(dst, pages.data(), sizeof(int32_t) * static_cast<size_t>(pages_read));
  meta.table_width = std::max(meta.table_width, static_cast<int>(pages_read));
}

ForwardMeta ForwardPlanner::plan_decode(const PagePool& pool, const RequestId* requests, int batch_size,
                                        int padded_batch, void* staging) const {
  ForwardMeta meta = begin(ForwardMode::kDecode, batch_size, padded_batch, 1, 1, requests);
  int32_t* seqlens_out = seqlens(staging, 0);
  int32_t* slots_out = write_slots(staging, 0);
  for (int r = 0; r < batch_size; ++r) {
    const RequestState st = pool.state(requests[r], "decode");
    const int64_t total = st.total();
    if (total < 1)
      detail::fail(Status::kInvalidArgument, "decode: ", PagePool::describe(requests[r]), " (row ", r,
                   ") has no tokens; append() the new token before planning");
    write_table_row(*this, meta, r, requests[r], *st.pages, pages_for_tokens(total), staging);
    seqlens_out[r] = static_cast<int32_t>(total);
    slots_out[r] = slot_of(*st.pages, total - 1);
  }
  write_padding_rows(*this, meta, staging);
  return meta;
}

ForwardMeta ForwardPlanner::plan_target_verify(const PagePool& pool, const RequestId* requests, int batch_size,
                                               int num_draft, int padded_batch, void* staging) const {
  if (num_draft < 1 || num_draft > capacity_.max_q_len)
    detail::fail_arg("target_verify: num_draft", detail::concat("in [1, ", capacity_.max_q_len, "] (max_q_len)"),
                     num_draft);
  ForwardMeta meta = begin(ForwardMode::kTargetVerify, batch_size, padded_batch, num_draft, 1, requests);
  int32_t* seqlens_out = seqlens(staging, 0);
  int32_t* slots_out = write_slots(staging, 0);
  for (int r = 0; r < batch_size; ++r) {
    const RequestState st = pool.state(requests[r], "target_verify");
    if (st.reserved < num_draft)
      detail::fail(Status::kInvalidArgument, "target_verify: ", PagePool::describe(requests[r]), " (row ", r,
                   ") has ", st.reserved, " reserved draft tokens, fewer than num_draft = ", num_draft,
                   "; reserve() them first");
    const int64_t seqlen = st.committed + num_draft;
    write_table_row(*this, meta, r, requests[r], *st.pages, pages_for_tokens(seqlen), staging);
    seqlens_out[r] = static_cast<int32_t>(seqlen);
    for (int i = 0; i < num_draft; ++i) slots_out[r * num_draft + i] = slot_of(*st.pages, st.committed + i);
  }
  write_padding_rows(*this, meta, staging);
  return meta;
}

ForwardMeta ForwardPlanner::plan_draft_decode(const PagePool& pool, const RequestId* requests, int batch_size,
                                              int num_steps, int padded_batch, void* staging) const {
  if (num_steps < 1 || num_steps > capacity_.max_steps)
    detail::fail_arg("draft_decode: num_steps", detail::concat("in [1, ", capacity_.max_steps, "] (max_steps)"),
                     num_steps);
  ForwardMeta meta = begin(ForwardMode::kDraftDecode, batch_size, padded_batch, 1, num_steps, requests);
  for (int r = 0; r < batch_size; ++r) {
    const RequestState st = pool.state(requests[r], "draft_decode");
    if (st.reserved < num_steps)
      detail::fail(Status::kInvalidArgument, "draft_decode: ", PagePool::describe(requests[r]), " (row ", r,
                   ") has ", st.reserved, " reserved draft tokens, fewer than num_steps = ", num_steps,
                   "; reserve() them first");
    write_table_row(*this, meta, r, requests[r], *st.pages, pages_for_tokens(st.committed + num_steps), staging);
    for (int step = 0; step < num_steps; ++step) {
      seqlens(staging, step)[r] = static_cast<int32_t>(st.committed + step + 1);
      write_slots(staging, step)[r] = slot_of(*st.pages, st.committed + step);
    }
  }
  write_padding_rows(*this, meta, staging);
  return meta;
}

ForwardMeta ForwardPlanner::plan_draft_extend(const PagePool& pool, const RequestId* requests,
                                              const int* new_tokens, int batch_size, int q_len, int padded_batch,
                                              void* staging) const {
  if (q_len < 1 || q_len > capacity_.max_q_len)
    detail::fail_arg("draft_extend: q_len", detail::concat("in [1, ", capacity_.max_q_len, "] (max_q_len)"), q_len);
  if (batch_size > 0 && new_tokens == nullptr)
    detail::fail(Status::kInvalidArgument, "draft_extend: new_tokens: expected ", batch_size, " counts, got nullptr");
  ForwardMeta meta = begin(ForwardMode::kDraftExtend, batch_size, padded_batch, q_len, 1, requests);
  int32_t* seqlens_out = seqlens(staging, 0);
  int32_t* slots_out = write_slots(staging, 0);
  for (int r = 0; r < batch_size; ++r) {
    const RequestState st = pool.state(requests[r], "draft_extend");
    const int n = new_tokens[r];
    if (n < 0 || n > q_len)
      detail::fail(Status::kInvalidArgument, "draft_extend: new_tokens[", r, "]: expected in [0, ", q_len,
                   "] (q_len), got ", n);
    const int64_t total = st.total();
    if (total < q_len)
      detail::fail(Status::kInvalidArgument, "draft_extend: ", PagePool::describe(requests[r]), " (row ", r,
                   ") has ", total, " tokens, fewer than the window q_len = ", q_len,
                   ": its padding rows would sit before position 0 (seqlen >= s_q is required)");
    write_table_row(*this, meta, r, requests[r], *st.pages, pages_for_tokens(total), staging);
    seqlens_out[r] = static_cast<int32_t>(total);
    // Row i sits at position total - q_len + i; the last n rows are the new tokens.
    int32_t* row_slots = slots_out + static_cast<size_t>(r) * q_len;
    for (int i = 0; i < q_len - n; ++i) row_slots[i] = -1;
    for (int i = q_len - n; i < q_len; ++i) row_slots[i] = slot_of(*st.pages, total - q_len + i);
  }
  write_padding_rows(*this, meta, staging);
  return meta;
}

}  // namespace openmla::runtime
