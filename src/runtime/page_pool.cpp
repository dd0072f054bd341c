#include "openmla/runtime/page_pool.h"

#include <algorithm>
#include <utility>

#include "core/check.h"

namespace openmla::runtime {
namespace {

constexpr int64_t pages_for_tokens(int64_t tokens) noexcept {
  return (tokens + kPageSize - 1) / kPageSize;
}

uint32_t handle_index(RequestId id) noexcept { return static_cast<uint32_t>(id & 0xffffffffu); }
uint32_t handle_generation(RequestId id) noexcept { return static_cast<uint32_t>(id >> 32); }
RequestId make_handle(uint32_t index, uint32_t generation) noexcept {
  return (static_cast<RequestId>(generation) << 32) | index;
}

// Generations stay in [1, 2^31 - 1] so handles are positive and never 0.
uint32_t next_generation(uint32_t g) noexcept { return g >= 0x7fffffffu ? 1u : g + 1u; }

void require_non_negative(const char* operation, const char* name, int64_t value) {
  if (value < 0) detail::fail(Status::kInvalidArgument, operation, ": ", name, ": expected >= 0, got ", value);
}

}  // namespace

std::string PagePool::describe(RequestId id) {
  if (id < 0) return detail::concat("request handle ", id, " (never valid)");
  return detail::concat("request ", handle_index(id), " (generation ", handle_generation(id), ")");
}

PagePool::PagePool(int64_t num_pages) {
  if (num_pages < 1 || num_pages > kMaxPoolPages)
    detail::fail_arg("PagePool: num_pages", detail::concat("in [1, ", kMaxPoolPages, "]"), num_pages);
  refcounts_.assign(static_cast<size_t>(num_pages), 0);
  // Stack with page 0 on top: a fresh pool hands out 0, 1, 2, ...
  free_list_.resize(static_cast<size_t>(num_pages));
  for (int64_t i = 0; i < num_pages; ++i) free_list_[static_cast<size_t>(i)] = static_cast<int32_t>(num_pages - 1 - i);
}

// ---- lookup ------------------------------------------------------------------------------------

const PagePool::Request& PagePool::lookup(RequestId id, const char* operation) const {
  const uint32_t index = handle_index(id);
  if (id < 0 || handle_generation(id) == 0 || index >= requests_.size())
    detail::fail(Status::kInvalidArgument, operation, ": unknown ", describe(id));
  const Request& req = requests_[index];
  if (req.generation != handle_generation(id))
    detail::fail(Status::kInvalidArgument, operation, ": ", describe(id),
                 " is stale (released; its table entry now holds generation ", req.generation, ")");
  if (!req.live)
    detail::fail(Status::kInvalidArgument, operation, ": ", describe(id), " was already released");
  return req;
}

PagePool::Request& PagePool::lookup(RequestId id, const char* operation) {
  return const_cast<Request&>(static_cast<const PagePool*>(this)->lookup(id, operation));
}

bool PagePool::contains(RequestId id) const noexcept {
  const uint32_t index = handle_index(id);
  return id >= 0 && index < requests_.size() && requests_[index].live &&
         requests_[index].generation == handle_generation(id);
}

void PagePool::require_pages(int64_t needed, const char* operation, RequestId id) const {
  if (needed <= free_pages()) return;
  throw PoolExhausted(detail::concat(operation, ": ", id == kInvalidRequest ? std::string("new request") : describe(id),
                                     " needs ", needed, " free pages, the pool has ", free_pages(), " of ",
                                     num_pages()),
                      needed, free_pages());
}

// ---- page movement (callers have checked capacity and reserved vector space) ------------------

void PagePool::take_pages(Request& req, int64_t count) {
  for (int64_t i = 0; i < count; ++i) {
    const int32_t page = free_list_.back();
    free_list_.pop_back();
    refcounts_[static_cast<size_t>(page)] = 1;
    req.pages.push_back(page);
  }
}

void PagePool::drop_pages(Request& req, int64_t keep) {
  while (static_cast<int64_t>(req.pages.size()) > keep) {
    const int32_t page = req.pages.back();
    req.pages.pop_back();
    int32_t& rc = refcounts_[static_cast<size_t>(page)];
    --rc;
    if (rc == 1) --shared_pages_;
    if (rc == 0) free_list_.push_back(page);  // capacity == num_pages: never reallocates
  }
}

RequestId PagePool::new_request_entry() {
  uint32_t index;
  if (!free_entries_.empty()) {
    index = free_entries_.back();
    free_entries_.pop_back();
    requests_[index].generation = next_generation(requests_[index].generation);
  } else {
    index = static_cast<uint32_t>(requests_.size());
    requests_.emplace_back();
    requests_[index].generation = 1;
  }
  Request& req = requests_[index];
  req.live = true;
  req.committed = 0;
  req.reserved = 0;
  req.pages.clear();
  ++live_requests_;
  return make_handle(index, req.generation);
}

// ---- lifecycle ---------------------------------------------------------------------------------

RequestId PagePool::create(int64_t num_tokens) {
  require_non_negative("create", "num_tokens", num_tokens);
  const int64_t needed = pages_for_tokens(num_tokens);
  require_pages(needed, "create", kInvalidRequest);
  // Everything that can throw (allocation) happens before pages move; new_request_entry()'s
  // emplace_back has the strong guarantee itself.
  std::vector<int32_t> pages;
  pages.reserve(static_cast<size_t>(needed));
  const RequestId id = new_request_entry();
  Request& req = requests_[handle_index(id)];
  req.pages.swap(pages);
  take_pages(req, needed);
  req.committed = num_tokens;
  committed_total_ += num_tokens;
  return id;
}

void PagePool::extend(RequestId id, int64_t num_tokens) {
  Request& req = lookup(id, "extend");
  require_non_negative("extend", "num_tokens", num_tokens);
  if (req.reserved != 0)
    detail::fail(Status::kInvalidArgument, "extend: ", describe(id), " has ", req.reserved,
                 " reserved draft tokens; commit() them before extending");
  const int64_t needed = pages_for_tokens(req.committed + num_tokens) - static_cast<int64_t>(req.pages.size());
  require_pages(needed, "extend", id);
  req.pages.reserve(req.pages.size() + static_cast<size_t>(needed));
  take_pages(req, needed);
  req.committed += num_tokens;
  committed_total_ += num_tokens;
}

int32_t PagePool::append(RequestId id) {
  extend(id, 1);
  const Request& req = requests_[handle_index(id)];
  const int64_t pos = req.committed - 1;
  return req.pages[static_cast<size_t>(pos / kPageSize)] * kPageSize + static_cast<int32_t>(pos % kPageSize);
}

void PagePool::reserve(RequestId id, int64_t num_tokens) {
  Request& req = lookup(id, "reserve");
  require_non_negative("reserve", "num_tokens", num_tokens);
  const int64_t total = req.committed + req.reserved + num_tokens;
  const int64_t needed = pages_for_tokens(total) - static_cast<int64_t>(req.pages.size());
  require_pages(needed, "reserve", id);
  req.pages.reserve(req.pages.size() + static_cast<size_t>(needed));
  take_pages(req, needed);
  req.reserved += num_tokens;
  reserved_total_ += num_tokens;
}

void PagePool::commit(RequestId id, int64_t accepted) {
  Request& req = lookup(id, "commit");
  if (accepted < 0 || accepted > req.reserved)
    detail::fail(Status::kInvalidArgument, "commit: accepted: expected in [0, ", req.reserved,
                 "] (reserved draft tokens of ", describe(id), "), got ", accepted);
  reserved_total_ -= req.reserved;
  committed_total_ += accepted;
  req.committed += accepted;
  req.reserved = 0;
  drop_pages(req, pages_for_tokens(req.committed));
}

int64_t PagePool::check_path(const Request& req, RequestId id, const int32_t* path, int64_t accepted, SlotMove* out,
                             const char* operation) const {
  if (accepted < 0 || accepted > req.reserved)
    detail::fail(Status::kInvalidArgument, operation, ": accepted: expected in [0, ", req.reserved,
                 "] (reserved draft tokens of ", describe(id), "), got ", accepted);
  if (accepted > 0 && path == nullptr)
    detail::fail(Status::kInvalidArgument, operation, ": path: expected ", accepted, " tree positions, got nullptr");
  for (int64_t k = 0; k < accepted; ++k) {
    if (path[k] < 0 || path[k] >= req.reserved)
      detail::fail(Status::kInvalidArgument, operation, ": path[", k, "]: expected a tree position in [0, ",
                   req.reserved, ") (reserved draft tokens of ", describe(id), "), got ", path[k]);
    if (k > 0 && path[k] <= path[k - 1])
      detail::fail(Status::kInvalidArgument, operation, ": path[", k, "]: expected > path[", k - 1, "] = ",
                   path[k - 1], " (a root-to-node path lists tree positions in increasing order: every parent "
                   "precedes its children), got ", path[k]);
  }
  int64_t count = 0;
  for (int64_t k = 0; k < accepted; ++k) {
    if (path[k] == k) continue;
    if (out != nullptr) {
      const int64_t src = req.committed + path[k], dst = req.committed + k;
      out[count] = SlotMove{req.pages[static_cast<size_t>(src / kPageSize)] * kPageSize +
                                static_cast<int32_t>(src % kPageSize),
                            req.pages[static_cast<size_t>(dst / kPageSize)] * kPageSize +
                                static_cast<int32_t>(dst % kPageSize)};
    }
    ++count;
  }
  return count;
}

int64_t PagePool::path_moves(RequestId id, const int32_t* path, int64_t accepted, SlotMove* moves_out) const {
  return check_path(lookup(id, "path_moves"), id, path, accepted, moves_out, "path_moves");
}

int64_t PagePool::commit_path(RequestId id, const int32_t* path, int64_t accepted, SlotMove* moves_out) {
  Request& req = lookup(id, "commit_path");
  const int64_t count = check_path(req, id, path, accepted, moves_out, "commit_path");
  // Checked and written; the commit itself cannot fail.
  reserved_total_ -= req.reserved;
  committed_total_ += accepted;
  req.committed += accepted;
  req.reserved = 0;
  drop_pages(req, pages_for_tokens(req.committed));
  return count;
}

std::vector<SlotMove> PagePool::commit_path(RequestId id, const std::vector<int32_t>& path) {
  const int64_t accepted = static_cast<int64_t>(path.size());
  std::vector<SlotMove> moves(static_cast<size_t>(
      check_path(lookup(id, "commit_path"), id, path.data(), accepted, nullptr, "commit_path")));
  commit_path(id, path.data(), accepted, moves.data());
  return moves;
}

ForkResult PagePool::fork(RequestId parent, int64_t num_tokens) {
  const Request& src = lookup(parent, "fork");
  if (num_tokens == -1) num_tokens = src.committed;
  if (num_tokens < 0 || num_tokens > src.committed)
    detail::fail(Status::kInvalidArgument, "fork: num_tokens: expected in [0, ", src.committed,
                 "] (committed tokens of ", describe(parent), ") or -1, got ", num_tokens);
  const int64_t full_pages = num_tokens / kPageSize;
  const int32_t partial_tokens = static_cast<int32_t>(num_tokens % kPageSize);
  require_pages(partial_tokens > 0 ? 1 : 0, "fork", parent);

  // Copy what is needed from `src` now: new_request_entry() may reallocate the request table.
  std::vector<int32_t> pages;
  pages.reserve(static_cast<size_t>(pages_for_tokens(num_tokens)));
  pages.assign(src.pages.begin(), src.pages.begin() + full_pages);
  const int32_t partial_src = partial_tokens > 0 ? src.pages[static_cast<size_t>(full_pages)] : -1;

  ForkResult result;
  result.child = new_request_entry();
  Request& child = requests_[handle_index(result.child)];
  child.pages.swap(pages);
  for (int32_t page : child.pages) {
    int32_t& rc = refcounts_[static_cast<size_t>(page)];
    if (rc == 1) ++shared_pages_;
    ++rc;
  }
  if (partial_tokens > 0) {
    take_pages(child, 1);
    result.copy = PageCopy{partial_src, child.pages.back(), partial_tokens};
  }
  child.committed = num_tokens;
  committed_total_ += num_tokens;
  return result;
}

void PagePool::release(RequestId id) {
  Request& req = lookup(id, "release");
  free_entries_.reserve(requests_.size());  // before mutating: push_back below cannot throw
  drop_pages(req, 0);
  committed_total_ -= req.committed;
  reserved_total_ -= req.reserved;
  req.committed = 0;
  req.reserved = 0;
  req.live = false;
  std::vector<int32_t>().swap(req.pages);
  --live_requests_;
  free_entries_.push_back(handle_index(id));
}

// ---- queries -----------------------------------------------------------------------------------

int64_t PagePool::committed_tokens(RequestId id) const { return lookup(id, "committed_tokens").committed; }
int64_t PagePool::reserved_tokens(RequestId id) const { return lookup(id, "reserved_tokens").reserved; }
int64_t PagePool::total_tokens(RequestId id) const {
  const Request& req = lookup(id, "total_tokens");
  return req.committed + req.reserved;
}
const std::vector<int32_t>& PagePool::page_ids(RequestId id) const { return lookup(id, "page_ids").pages; }

RequestState PagePool::state(RequestId id, const char* caller) const {
  const Request& req = lookup(id, caller);
  return RequestState{req.committed, req.reserved, &req.pages};
}

int32_t PagePool::slot(RequestId id, int64_t position) const {
  const Request& req = lookup(id, "slot");
  const int64_t total = req.committed + req.reserved;
  if (position < 0 || position >= total)
    detail::fail(Status::kInvalidArgument, "slot: position: expected in [0, ", total, ") for ",
                 describe(id), ", got ", position);
  return req.pages[static_cast<size_t>(position / kPageSize)] * kPageSize +
         static_cast<int32_t>(position % kPageSize);
}

void PagePool::slots(RequestId id, int64_t begin, int64_t count, int32_t* out) const {
  const Request& req = lookup(id, "slots");
  const int64_t total = req.committed + req.reserved;
  if (begin < 0 || count < 0 || begin + count > total)
    detail::fail(Status::kInvalidArgument, "slots: [begin, begin + count): expected within [0, ", total,
                 ") for ", describe(id), ", got [", begin, ", ", begin + count, ")");
  for (int64_t i = 0; i < count; ++i) {
    const int64_t pos = begin + i;
    out[i] = req.pages[static_cast<size_t>(pos / kPageSize)] * kPageSize + static_cast<int32_t>(pos % kPageSize);
  }
}

std::vector<int32_t> PagePool::slots(RequestId id, int64_t begin, int64_t count) const {
  lookup(id, "slots");
  std::vector<int32_t> out(static_cast<size_t>(std::max<int64_t>(count, 0)));
  slots(id, begin, count, out.data());
  return out;
}

int32_t PagePool::refcount(int32_t page) const {
  if (page < 0 || page >= num_pages())
    detail::fail_arg("refcount: page", detail::concat("in [0, ", num_pages(), ")"), page);
  return refcounts_[static_cast<size_t>(page)];
}

std::vector<RequestId> PagePool::live_requests() const {
  std::vector<RequestId> ids;
  ids.reserve(static_cast<size_t>(live_requests_));
  for (size_t i = 0; i < requests_.size(); ++i)
    if (requests_[i].live) ids.push_back(make_handle(static_cast<uint32_t>(i), requests_[i].generation));
  return ids;
}

int64_t PagePool::pages_needed_to_grow(RequestId id, int64_t extra_tokens) const {
  const Request& req = lookup(id, "pages_needed_to_grow");
  require_non_negative("pages_needed_to_grow", "extra_tokens", extra_tokens);
  const int64_t needed =
      pages_for_tokens(req.committed + req.reserved + extra_tokens) - static_cast<int64_t>(req.pages.size());
  return std::max<int64_t>(needed, 0);
}

int64_t PagePool::pages_needed_to_create(int64_t num_tokens) const noexcept {
  return num_tokens <= 0 ? 0 : pages_for_tokens(num_tokens);
}

PoolStats PagePool::stats() const noexcept {
  PoolStats s;
  s.total_pages = num_pages();
  s.free_pages = free_pages();
  s.used_pages = used_pages();
  s.shared_pages = shared_pages_;
  s.live_requests = live_requests_;
  s.committed_tokens = committed_total_;
  s.reserved_tokens = reserved_total_;
  return s;
}

// ---- invariants --------------------------------------------------------------------------------

std::string PagePool::check_invariants() const {
  const int64_t n = num_pages();
  // scratch_[p]: -1 = on the free list, else the number of live block-table rows holding p.
  // scratch_[n + p]: 1 + index of the last request whose row held p (duplicate-in-row detection).
  scratch_.assign(static_cast<size_t>(2 * n), 0);
  int32_t* holders = scratch_.data();
  int32_t* last_row = scratch_.data() + n;

  for (size_t i = 0; i < free_list_.size(); ++i) {
    const int32_t p = free_list_[i];
    if (p < 0 || p >= n) return detail::concat("free list entry ", i, " holds page ", p, ", outside [0, ", n, ")");
    if (holders[p] == -1) return detail::concat("page ", p, " is on the free list twice");
    if (refcounts_[static_cast<size_t>(p)] != 0)
      return detail::concat("page ", p, " is on the free list with refcount ", refcounts_[static_cast<size_t>(p)]);
    holders[p] = -1;
  }

  int64_t live = 0, committed = 0, reserved = 0;
  for (size_t r = 0; r < requests_.size(); ++r) {
    const Request& req = requests_[r];
    if (!req.live) {
      if (!req.pages.empty())
        return detail::concat("released request entry ", r, " still holds ", req.pages.size(), " pages");
      continue;
    }
    // Formatted only when reporting (building it per request would dominate the check's cost).
    auto name = [&] { return describe(make_handle(static_cast<uint32_t>(r), req.generation)); };
    ++live;
    committed += req.committed;
    reserved += req.reserved;
    if (req.committed < 0 || req.reserved < 0)
      return detail::concat(name(), " has negative token counts (committed ", req.committed, ", reserved ",
                            req.reserved, ")");
    const int64_t total = req.committed + req.reserved;
    if (static_cast<int64_t>(req.pages.size()) != pages_for_tokens(total))
      return detail::concat(name(), " holds ", req.pages.size(), " pages for ", total, " tokens (expected ",
                            pages_for_tokens(total), ")");
    for (size_t i = 0; i < req.pages.size(); ++i) {
      const int32_t p = req.pages[i];
      if (p < 0 || p >= n) return detail::concat(name(), " block-table entry ", i, " = ", p, ", outside [0, ", n, ")");
      if (holders[p] == -1) return detail::concat("page ", p, " is free but held by ", name(), " (entry ", i, ")");
      if (last_row[p] == static_cast<int32_t>(r) + 1)
        return detail::concat("page ", p, " appears twice in the block table of ", name());
      last_row[p] = static_cast<int32_t>(r) + 1;
      ++holders[p];
      // A page several requests hold must be full and committed in each of them, so that no
      // writable slot (a position >= committed) is ever handed to two requests.
      if (refcounts_[static_cast<size_t>(p)] > 1 && static_cast<int64_t>(i + 1) * kPageSize > req.committed)
        return detail::concat("page ", p, " is shared (refcount ", refcounts_[static_cast<size_t>(p)],
                              ") but is not full and committed in ", name(), " (entry ", i, ", committed ",
                              req.committed, " tokens): its slots could be written twice");
    }
  }

  int64_t used = 0, shared = 0;
  for (int64_t p = 0; p < n; ++p) {
    const int32_t rc = refcounts_[static_cast<size_t>(p)];
    if (holders[p] == -1) continue;  // free, refcount 0 checked above
    if (holders[p] == 0)
      return detail::concat("page ", p, " is neither free nor held by any request (leaked, refcount ", rc, ")");
    if (rc != holders[p])
      return detail::concat("page ", p, " has refcount ", rc, " but ", holders[p], " requests hold it");
    ++used;
    if (rc > 1) ++shared;
  }
  if (used + free_pages() != n)
    return detail::concat("free (", free_pages(), ") + used (", used, ") pages != total (", n, ")");
  if (shared != shared_pages_)
    return detail::concat("shared page counter ", shared_pages_, " != ", shared, " pages with refcount > 1");
  if (live != live_requests_)
    return detail::concat("live request counter ", live_requests_, " != ", live, " live table entries");
  if (committed != committed_total_ || reserved != reserved_total_)
    return detail::concat("token counters (committed ", committed_total_, ", reserved ", reserved_total_,
                          ") != sums over requests (", committed, ", ", reserved, ")");
  if (static_cast<int64_t>(free_entries_.size()) + live != static_cast<int64_t>(requests_.size()))
    return detail::concat("request table: ", free_entries_.size(), " free + ", live, " live entries != ",
                          requests_.size());
  for (uint32_t e : free_entries_)
    if (e >= requests_.size() || requests_[e].live)
      return detail::concat("request table entry ", e, " is on the free-entry list but live or out of range");
  return std::string();
}

void PagePool::assert_invariants() const {
  std::string problem = check_invariants();
  if (!problem.empty()) detail::fail(Status::kInternal, "PagePool invariant violated: ", problem);
}

// ---- sizing ------------------------------------------------------------------------------------

int64_t page_stride_bytes(KVFormat format, int pad_tokens_per_page) {
  if (pad_tokens_per_page < 0) detail::fail_arg("page_stride_bytes: pad_tokens_per_page", ">= 0", pad_tokens_per_page);
  return static_cast<int64_t>(kPageSize + pad_tokens_per_page) * kv_bytes_per_token(format);
}

int64_t pages_for_budget(int64_t budget_bytes, KVFormat format, int num_layers, int64_t page_stride) {
  if (budget_bytes < 0) detail::fail_arg("pages_for_budget: budget_bytes", ">= 0", budget_bytes);
  if (num_layers < 1) detail::fail_arg("pages_for_budget: num_layers", ">= 1", num_layers);
  const int64_t min_stride = page_stride_bytes(format);
  if (page_stride == 0) page_stride = min_stride;
  if (page_stride < min_stride || page_stride % 16 != 0)
    detail::fail_arg("pages_for_budget: page_stride",
                     detail::concat("0 or a multiple of 16 >= ", min_stride, " (64 tokens of ",
                                    kv_format_name(format), ")"),
                     page_stride);
  const int64_t pages = budget_bytes / page_stride / num_layers;
  return std::min(pages, kMaxPoolPages);
}

}  // namespace openmla::runtime
