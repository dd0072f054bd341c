// Paged KV-cache accounting for a serving engine: which page holds which request's tokens.
//
// One page = kPageSize (64) consecutive token positions of one request. One page id indexes the
// same page in every layer's cache (target and draft layers alike), so the pool is layer-agnostic.
// The KV of position p of a request lives at
//     slot = page_ids(request)[p / 64] * 64 + p % 64      (write_kv's slot, an int32)
//
// A request's positions [0, total_tokens) are split in two:
//   committed  [0, committed_tokens)          tokens whose KV is final (prefill, accepted drafts);
//   reserved   [committed, committed+reserved) draft slots: written by draft/verify passes and
//                                              either committed (accepted) or dropped by commit().
// The request holds exactly ceil(total_tokens / 64) pages, always.
//
// Speculative step (chain drafts, topk = 1):
//     pool.reserve(r, num_draft);               // draft slots = positions committed .. +num_draft
//     ... draft passes / verify write KV at slots(r, committed, num_draft) ...
//     pool.commit(r, accepted);                 // keep the first `accepted`, drop the rest:
//                                               // total = committed; pages past ceil(total/64) freed
// Speculative step (tree drafts, EAGLE topk > 1): the whole tree lives in ONE request. Its n tree
// tokens (any node order in which every parent precedes its children, e.g. breadth-first) are
// written at the n consecutive reserved positions committed .. committed + n - 1, tree position i
// at position committed + i:
//     pool.reserve(r, n);                       // the tree's positions (one reservation)
//     ... draft passes / tree verify write KV at slots(r, committed, n) ...
//     moves = pool.commit_path(r, path, accepted);
//         // path = the accepted root-to-node path as tree positions, strictly increasing. The first
//         // `accepted` positions become committed (total = committed), the rest are dropped and
//         // pages past ceil(total / 64) freed, as commit(). The KV of tree position path[k] must now
//         // sit at position committed_before + k: `moves` lists (src slot, dst slot) for every k with
//         // path[k] != k, which the caller performs with move_kv (openmla/move_kv.h) in every
//         // layer's cache before anything reads those positions (ForwardPlanner::plan_moves stages
//         // them for a CUDA graph). A source may lie in a page this commit freed: enqueue the moves
//         // before any work that could write pages handed out later (stream order suffices).
// A chain is the tree whose accepted path is 0 .. accepted - 1: commit(r, accepted), no moves.
//
// fork() serves prefix sharing (parallel sampling, a shared system prompt), not tree drafts.
// Sharing rule (why forks and prefix sharing cannot corrupt each other): a page owned by more than
// one request is always full and committed in every owner, so nobody ever writes it again. fork()
// therefore never shares a partly filled last page: it gives the child a fresh page and returns
// the copy (src page, dst page, token count) the caller must perform in every layer's cache before
// the child's next write or read of that page (see PageCopy). Forking at a multiple of 64 tokens
// needs no copy. Moves of commit_path() never touch a shared page: they lie at positions >=
// committed, in pages owned by the request alone.
//
// Errors: every misuse (unknown or released request, commit beyond the reservation, negative
// counts, extending with drafts outstanding, a path out of order or beyond the reservation) throws openmla::Error(kInvalidArgument); running out
// of pages throws PoolExhausted (an Error). Every operation checks before it mutates, so a throw
// leaves the pool exactly as it was (strong exception guarantee).
//
// Threading: a PagePool is a plain single-threaded object (no locks). Use it from the scheduler
// thread only, or guard it externally. Every operation is deterministic: the same call sequence
// gives the same page ids (free pages are reused LIFO; a fresh pool hands out 0, 1, 2, ...).
// Costs: O(1) per call plus O(pages touched); check_invariants() is O(pages + live request pages).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "openmla/error.h"
#include "openmla/kv_format.h"

namespace openmla::runtime {

// A request handle issued by the pool: (generation << 32) | table index. Generations make a stale
// handle (a released request whose table entry was reused) an error instead of an alias.
using RequestId = int64_t;
inline constexpr RequestId kInvalidRequest = -1;

// Largest pool: every slot page * 64 + offset must fit in int32 (write_kv slots, block tables).
inline constexpr int64_t kMaxPoolPages = (int64_t{1} << 31) / kPageSize;

// Thrown when an operation needs more free pages than the pool has. Nothing was changed.
class PoolExhausted : public Error {
 public:
  PoolExhausted(const std::string& message, int64_t pages_needed, int64_t pages_free)
      : Error(Status::kInvalidArgument, message), pages_needed_(pages_needed), pages_free_(pages_free) {}
  int64_t pages_needed() const noexcept { return pages_needed_; }
  int64_t pages_free() const noexcept { return pages_free_; }

 private:
  int64_t pages_needed_;
  int64_t pages_free_;
};

// A copy the caller must perform after fork(): in every layer's cache, copy tokens
// [0, num_tokens) of page src_page onto page dst_page (num_tokens * bytes_per_token contiguous
// bytes at the start of each page, e.g. one cudaMemcpyAsync per layer). num_tokens == 0: nothing
// to copy. Ordering: on the stream that later writes or reads the child, before that work.
struct PageCopy {
  int32_t src_page = -1;
  int32_t dst_page = -1;
  int32_t num_tokens = 0;
  bool needed() const noexcept { return num_tokens > 0; }
};

// A KV row move after a tree verify (PagePool::commit_path): in every layer's cache, the token row
// at src_slot goes to dst_slot. The moves of one commit_path form one move_kv group: all sources are
// read before any destination is written (a destination may be another move's source).
struct SlotMove {
  int32_t src_slot = -1;
  int32_t dst_slot = -1;
  bool operator==(const SlotMove& o) const noexcept { return src_slot == o.src_slot && dst_slot == o.dst_slot; }
};

struct ForkResult {
  RequestId child = kInvalidRequest;
  PageCopy copy;  // the partly filled last page, copied-on-fork (or nothing to copy)
};

// Pool-wide counters (all O(1) to read).
struct PoolStats {
  int64_t total_pages = 0;
  int64_t free_pages = 0;
  int64_t used_pages = 0;       // pages with refcount > 0; free + used == total
  int64_t shared_pages = 0;     // pages with refcount > 1
  int64_t live_requests = 0;
  int64_t committed_tokens = 0; // sum over live requests (shared prefixes counted per request)
  int64_t reserved_tokens = 0;  // sum over live requests
};

// One request's accounting in a single lookup (pages points into the pool: valid until the next
// mutating call on that request).
struct RequestState {
  int64_t committed = 0;
  int64_t reserved = 0;
  const std::vector<int32_t>* pages = nullptr;
  int64_t total() const noexcept { return committed + reserved; }
};

class PagePool {
 public:
  // num_pages in [1, kMaxPoolPages]. Page ids are 0 .. num_pages - 1.
  explicit PagePool(int64_t num_pages);

  // ---- request lifecycle -----------------------------------------------------------------------
  // New request holding num_tokens (>= 0) committed positions (its prefill), i.e.
  // ceil(num_tokens / 64) fresh pages. Write the prefill KV at slots(id, 0, num_tokens).
  RequestId create(int64_t num_tokens);

  // Appends num_tokens (>= 0) committed positions (chunked prefill / extend). Requires no
  // outstanding reservation. New positions: [old committed, old committed + num_tokens).
  void extend(RequestId id, int64_t num_tokens);

  // Decode growth: extend(id, 1); returns the slot of the new (last) position.
  int32_t append(RequestId id);

  // Adds num_tokens (>= 0) draft positions after the current end (reservations accumulate until
  // commit()). New draft positions: [old total, old total + num_tokens).
  void reserve(RequestId id, int64_t num_tokens);

  // Keeps the first `accepted` reserved positions (0 <= accepted <= reserved_tokens) as committed
  // and drops the rest: total becomes committed, pages past ceil(total / 64) go back to the pool,
  // and the tail of the last page past total is free for the request's next write. Never fails for
  // lack of pages.
  void commit(RequestId id, int64_t accepted);

  // Tree commit: keeps the KV of the reserved tree positions path[0] < path[1] < ... <
  // path[accepted - 1] (each in [0, reserved_tokens); a root-to-node path of a tree whose parents
  // precede their children is strictly increasing) as the committed positions committed ..
  // committed + accepted - 1, then drops the rest as commit(id, accepted) does. Writes the moves
  // that bring tree position path[k] to position k (one per k with path[k] != k, in increasing k;
  // at most `accepted`) to moves_out (room for `accepted` moves, or nullptr) and returns their count. Every source
  // position is >= its destination. accepted = 0 drops the whole tree (path may be nullptr).
  int64_t commit_path(RequestId id, const int32_t* path, int64_t accepted, SlotMove* moves_out = nullptr);
  std::vector<SlotMove> commit_path(RequestId id, const std::vector<int32_t>& path);
  // The moves commit_path(id, path, accepted) would return, without committing (same checks).
  int64_t path_moves(RequestId id, const int32_t* path, int64_t accepted, SlotMove* moves_out) const;

  // New request sharing positions [0, num_tokens) of parent (num_tokens <= parent's committed
  // tokens; -1 means all of them). Full pages are shared by refcount; a partly filled last page is
  // copied into a fresh page (see PageCopy). The child starts with num_tokens committed and no
  // reservation; the parent is unchanged.
  ForkResult fork(RequestId parent, int64_t num_tokens = -1);

  // Ends a request: drops its reference to each page (a page goes free at refcount 0).
  // Releasing an unknown or already released request throws.
  void release(RequestId id);

  // ---- queries (throw for an unknown request) --------------------------------------------------
  bool contains(RequestId id) const noexcept;  // live?
  int64_t committed_tokens(RequestId id) const;
  int64_t reserved_tokens(RequestId id) const;
  int64_t total_tokens(RequestId id) const;  // committed + reserved
  // The request's block-table row: page ids of positions [0, total_tokens), one per 64 tokens.
  // The reference is valid until the next mutating call on this request.
  const std::vector<int32_t>& page_ids(RequestId id) const;
  // All of the above at once; `caller` names the operation in the unknown-request message.
  RequestState state(RequestId id, const char* caller = "state") const;
  // Slot of one position, 0 <= position < total_tokens.
  int32_t slot(RequestId id, int64_t position) const;
  // Slots of positions [begin, begin + count) into out[0 .. count), within [0, total_tokens).
  void slots(RequestId id, int64_t begin, int64_t count, int32_t* out) const;
  std::vector<int32_t> slots(RequestId id, int64_t begin, int64_t count) const;
  int32_t refcount(int32_t page) const;  // 0 for a free page
  // Live request handles in table order (deterministic).
  std::vector<RequestId> live_requests() const;

  // Fresh pages an operation would take now (0 if it fits in the pages it already holds), so a
  // scheduler can test before acting instead of catching PoolExhausted.
  int64_t pages_needed_to_grow(RequestId id, int64_t extra_tokens) const;
  int64_t pages_needed_to_create(int64_t num_tokens) const noexcept;

  int64_t num_pages() const noexcept { return static_cast<int64_t>(refcounts_.size()); }
  int64_t free_pages() const noexcept { return static_cast<int64_t>(free_list_.size()); }
  int64_t used_pages() const noexcept { return num_pages() - free_pages(); }
  PoolStats stats() const noexcept;

  // ---- invariants --------------------------------------------------------------------------------
  // Full consistency check; returns "" when consistent, else a description of the first
  // violation found. Checked: every page is free xor owned (free list without duplicates, free
  // pages have refcount 0, owned pages refcount > 0); each refcount equals the number of live
  // requests whose block-table row holds the page; no page twice in one row; free + used == total;
  // every request holds ceil(total_tokens / 64) pages; every shared page (refcount > 1) is full
  // and committed in each owner (so no writable slot is handed out twice); counters match.
  std::string check_invariants() const;
  // check_invariants(), throwing Error(kInternal) with the description when it is not "".
  void assert_invariants() const;

  // "request 7 (generation 2)" style name of a handle, for messages.
  static std::string describe(RequestId id);

 private:
  friend struct PagePoolTestAccess;  // tests corrupt internals to prove check_invariants() sees it
  struct Request {
    uint32_t generation = 0;  // of the current or last holder of this table entry
    bool live = false;
    int64_t committed = 0;
    int64_t reserved = 0;
    std::vector<int32_t> pages;
  };

  Request& lookup(RequestId id, const char* operation);
  const Request& lookup(RequestId id, const char* operation) const;
  RequestId new_request_entry();
  void take_pages(Request& req, int64_t count);   // count <= free_pages(), checked by callers
  void drop_pages(Request& req, int64_t keep);    // pages beyond `keep` lose one reference
  void require_pages(int64_t needed, const char* operation, RequestId id) const;
  // Checks a tree path against req's reservation and writes its moves (out may be nullptr).
  int64_t check_path(const Request& req, RequestId id, const int32_t* path, int64_t accepted, SlotMove* out,
                     const char* operation) const;

  std::vector<int32_t> refcounts_;    // per page
  std::vector<int32_t> free_list_;    // stack; back() is handed out next
  std::vector<Request> requests_;     // handle index -> state
  std::vector<uint32_t> free_entries_;  // reusable request table indices (stack)
  int64_t shared_pages_ = 0;
  int64_t live_requests_ = 0;
  int64_t committed_total_ = 0;
  int64_t reserved_total_ = 0;
  mutable std::vector<int32_t> scratch_;  // check_invariants() counts, kept to avoid reallocation
};

// ---- sizing ------------------------------------------------------------------------------------

// Bytes of one page of one layer's cache: (64 + pad_tokens_per_page) * kv_bytes_per_token(format)
// (FlashMLA's test caches pad each page by one token; our caches need a multiple of 16 bytes,
// which every format's token size already is).
int64_t page_stride_bytes(KVFormat format, int pad_tokens_per_page = 0);

// Pages that fit in budget_bytes when each page exists once per layer with the given page stride
// (0 = page_stride_bytes(format)); an explicit stride must be >= 64 * kv_bytes_per_token(format)
// and a multiple of 16. Result clamped to kMaxPoolPages. Throws for num_layers < 1 or a negative
// budget.
int64_t pages_for_budget(int64_t budget_bytes, KVFormat format, int num_layers,
                         int64_t page_stride = 0);

}  // namespace openmla::runtime
