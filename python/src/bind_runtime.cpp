// The page pool (openmla/runtime/page_pool.h): request lifecycle, speculative reserve/commit and tree commits,
// forks, queries, the invariant check, and the sizing helpers.
#include <algorithm>
#include <climits>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "openmla/runtime/page_pool.h"
#include "tensor_args.h"

namespace openmla::python {
namespace {

using namespace nb::literals;
using runtime::PagePool;
using runtime::RequestId;

nb::ndarray<nb::numpy, int32_t> to_numpy(const std::vector<int32_t>& values) {
  auto result = new_numpy<int32_t>({values.size()});
  std::copy(values.begin(), values.end(), result.data());
  return result;
}

// Slots of [begin, begin + count) into `out` (a writable contiguous CPU int32 tensor of >= count
// elements, e.g. a pinned torch tensor), or into a fresh NumPy array.
nb::object pool_slots(const PagePool& pool, RequestId id, int64_t begin, int64_t count, nb::handle out) {
  if (out.is_none()) {
    if (count < 0) throw nb::value_error(("count: expected >= 0, got " + std::to_string(count)).c_str());
    auto result = new_numpy<int32_t>({static_cast<size_t>(count)});
    pool.slots(id, begin, count, result.data());
    return nb::cast(result);
  }
  Output o = output_tensor(out, "out");
  if (o.view.device != DeviceType::kCPU)
    throw nb::value_error("out: expected a CPU tensor (host memory the pool writes), got a CUDA tensor");
  if (o.view.dtype != DType::kInt32)
    throw nb::type_error((std::string("out: expected dtype int32, got ") + dtype_name(o.view.dtype)).c_str());
  const size_t bytes = contiguous_bytes(o.view, "out");
  if (count < 0 || static_cast<size_t>(count) * sizeof(int32_t) > bytes)
    throw nb::value_error(("out: expected room for " + std::to_string(count) + " slots, got " +
                           std::to_string(bytes / sizeof(int32_t)))
                              .c_str());
  pool.slots(id, begin, count, static_cast<int32_t*>(o.view.data));
  return nb::borrow<nb::object>(out);
}

// A tree path (`path` argument): None (no accepted token) or an iterable of integers (a list, a
// tuple, a 1-D NumPy array or CPU tensor), each an int32 tree position; the pool checks the values
// against the request. `accepted` None means len(path).
std::vector<int32_t> path_arg(nb::handle path, const std::optional<int64_t>& accepted, int64_t* count) {
  std::vector<int32_t> values;
  if (!path.is_none()) {
    nb::object iterator = nb::steal(PyObject_GetIter(path.ptr()));
    if (!iterator.is_valid()) {
      PyErr_Clear();
      throw nb::type_error(("path: expected a sequence of tree positions (ints), got " +
                            nb::cast<std::string>(nb::str(nb::handle(reinterpret_cast<PyObject*>(Py_TYPE(path.ptr())))
                                                              .attr("__name__"))))
                               .c_str());
    }
    for (nb::handle item : path) {
      const std::string name = "path[" + std::to_string(values.size()) + "]";
      nb::object index = nb::steal(PyNumber_Index(item.ptr()));
      if (!index.is_valid()) {
        PyErr_Clear();
        throw nb::type_error((name + ": expected an int (a tree position), got " +
                              nb::cast<std::string>(nb::repr(item)))
                                 .c_str());
      }
      const long long v = PyLong_AsLongLong(index.ptr());
      if (PyErr_Occurred() || v < INT32_MIN || v > INT32_MAX) {
        PyErr_Clear();
        throw nb::value_error((name + ": expected a tree position (an int32), got " +
                               nb::cast<std::string>(nb::repr(item)))
                                  .c_str());
      }
      values.push_back(static_cast<int32_t>(v));
    }
  }
  const int64_t size = static_cast<int64_t>(values.size());
  *count = accepted.value_or(size);
  if (*count > size)
    throw nb::value_error(("accepted: expected at most len(path) = " + std::to_string(size) + ", got " +
                           std::to_string(*count))
                              .c_str());
  return values;
}

using SlotArrays = std::pair<nb::ndarray<nb::numpy, int32_t>, nb::ndarray<nb::numpy, int32_t>>;

// Moves as two int32 NumPy arrays (src_slots, dst_slots), ready for move_kv.
SlotArrays moves_to_numpy(const std::vector<runtime::SlotMove>& moves, int64_t count) {
  auto src = new_numpy<int32_t>({static_cast<size_t>(count)});
  auto dst = new_numpy<int32_t>({static_cast<size_t>(count)});
  for (int64_t k = 0; k < count; ++k) {
    src.data()[k] = moves[static_cast<size_t>(k)].src_slot;
    dst.data()[k] = moves[static_cast<size_t>(k)].dst_slot;
  }
  return {src, dst};
}

SlotArrays commit_or_preview(PagePool& pool, RequestId id, nb::handle path, const std::optional<int64_t>& accepted,
                            bool commit) {
  int64_t count = 0;
  const std::vector<int32_t> values = path_arg(path, accepted, &count);
  std::vector<runtime::SlotMove> moves(static_cast<size_t>(std::max<int64_t>(count, 0)));
  const int32_t* data = values.empty() ? nullptr : values.data();
  const int64_t n = commit ? pool.commit_path(id, data, count, moves.data())
                           : pool.path_moves(id, data, count, moves.data());
  return moves_to_numpy(moves, n);
}

std::string stats_repr(const runtime::PoolStats& s) {
  return "PoolStats(total_pages=" + std::to_string(s.total_pages) + ", free_pages=" + std::to_string(s.free_pages) +
         ", used_pages=" + std::to_string(s.used_pages) + ", shared_pages=" + std::to_string(s.shared_pages) +
         ", live_requests=" + std::to_string(s.live_requests) +
         ", committed_tokens=" + std::to_string(s.committed_tokens) +
         ", reserved_tokens=" + std::to_string(s.reserved_tokens) + ")";
}

}  // namespace

void register_runtime(nb::module_& m) {
  m.attr("MAX_POOL_PAGES") = runtime::kMaxPoolPages;
  m.attr("INVALID_REQUEST") = runtime::kInvalidRequest;

  nb::class_<runtime::PageCopy>(m, "PageCopy",
                                "A copy fork() asks for: in every layer's cache, tokens [0, num_tokens) of "
                                "src_page onto dst_page, before the child's next use of that page.")
      .def_ro("src_page", &runtime::PageCopy::src_page, "Page to copy from (the parent's partly filled page).")
      .def_ro("dst_page", &runtime::PageCopy::dst_page, "Page to copy onto (the child's fresh page).")
      .def_ro("num_tokens", &runtime::PageCopy::num_tokens, "Tokens [0, num_tokens) of the page; 0: nothing to copy.")
      .def_prop_ro("needed", &runtime::PageCopy::needed, "True when there is something to copy (num_tokens > 0).")
      .def("__repr__", [](const runtime::PageCopy& c) {
        return "PageCopy(src_page=" + std::to_string(c.src_page) + ", dst_page=" + std::to_string(c.dst_page) +
               ", num_tokens=" + std::to_string(c.num_tokens) + ")";
      });

  nb::class_<runtime::PoolStats>(m, "PoolStats", "Pool-wide counters (PagePool.stats()).")
      .def_ro("total_pages", &runtime::PoolStats::total_pages, "Pages in the pool.")
      .def_ro("free_pages", &runtime::PoolStats::free_pages, "Pages no request holds.")
      .def_ro("used_pages", &runtime::PoolStats::used_pages, "Pages with refcount > 0 (free + used == total).")
      .def_ro("shared_pages", &runtime::PoolStats::shared_pages, "Pages held by more than one request (forks).")
      .def_ro("live_requests", &runtime::PoolStats::live_requests, "Requests created and not released.")
      .def_ro("committed_tokens", &runtime::PoolStats::committed_tokens,
              "Committed positions over live requests (shared prefixes counted per request).")
      .def_ro("reserved_tokens", &runtime::PoolStats::reserved_tokens, "Draft positions reserved over live requests.")
      .def("__repr__", &stats_repr);

  nb::class_<PagePool>(
      m, "PagePool",
      "Paged KV-cache accounting (64-token pages, one page id for every layer's cache). Speculative step: "
      "reserve(r, num_draft); write drafts at slots(r, committed_tokens(r), num_draft); commit(r, accepted). "
      "Tree drafts: reserve(r, n); write the tree at slots(r, committed_tokens(r), n); src, dst = "
      "commit_path(r, path); openmla.move_kv(caches, src, dst, ...). "
      "Every misuse raises ValueError and leaves the pool unchanged; running out raises PoolExhausted.")
      .def(nb::init<int64_t>(), "num_pages"_a,
           "A pool of num_pages pages (1 to MAX_POOL_PAGES), ids 0 .. num_pages - 1; ValueError otherwise.")
      .def("create", &PagePool::create, "num_tokens"_a = 0,
           "New request with num_tokens committed positions (its prefill); returns its id (an int handle).")
      .def("extend", &PagePool::extend, "request"_a, "num_tokens"_a,
           "Appends num_tokens committed positions (chunked prefill); needs no outstanding reservation.")
      .def("append", &PagePool::append, "request"_a, "Decode growth by one token; returns the new token's slot.")
      .def("reserve", &PagePool::reserve, "request"_a, "num_tokens"_a,
           "Adds num_tokens draft positions after the current end (reservations add up until commit()).")
      .def("commit", &PagePool::commit, "request"_a, "accepted"_a,
           "Keeps the first `accepted` reserved positions as committed, drops the rest and frees pages past the "
           "new end. Never raises PoolExhausted.")
      .def(
          "commit_path",
          [](PagePool& pool, RequestId id, nb::handle path, std::optional<int64_t> accepted) {
            return commit_or_preview(pool, id, path, accepted, true);
          },
          "request"_a, "path"_a.none(), "accepted"_a.none() = nb::none(),
          "Tree commit after a speculative verify: the KV of the reserved tree positions path[0] < path[1] < ... "
          "(the accepted root-to-node path, its first `accepted` entries; None: all of them) becomes the committed "
          "positions committed .. committed + accepted - 1, the rest of the reservation is dropped and pages past "
          "the new end are freed, as commit(request, accepted). Returns (src_slots, dst_slots), int32 NumPy arrays "
          "of the moves (one per k with path[k] != k) that the caller performs with openmla.move_kv in every "
          "layer's cache before anything reads those positions. Raises ValueError (pool unchanged) for a path out "
          "of order or beyond the reservation.")
      .def(
          "path_moves",
          [](PagePool& pool, RequestId id, nb::handle path, std::optional<int64_t> accepted) {
            return commit_or_preview(pool, id, path, accepted, false);
          },
          "request"_a, "path"_a.none(), "accepted"_a.none() = nb::none(),
          "The (src_slots, dst_slots) commit_path(request, path, accepted) would return, without committing "
          "(same checks).")
      .def(
          "fork",
          [](PagePool& pool, RequestId parent, int64_t num_tokens) {
            runtime::ForkResult r = pool.fork(parent, num_tokens);
            return std::make_pair(r.child, r.copy);
          },
          "parent"_a, "num_tokens"_a = -1,
          "New request sharing positions [0, num_tokens) of parent (-1: all committed ones). Returns (child, "
          "PageCopy): full pages are shared, a partly filled last page must be copied in every layer's cache "
          "before the child uses it.")
      .def("release", &PagePool::release, "request"_a,
           "Ends a request; its pages go free when no other request holds them.")
      .def("contains", &PagePool::contains, "request"_a, "True while the request is live.")
      .def("__contains__", &PagePool::contains, "request"_a, "True while the request is live.")
      .def("committed_tokens", &PagePool::committed_tokens, "request"_a, "The request's committed positions.")
      .def("reserved_tokens", &PagePool::reserved_tokens, "request"_a, "The request's reserved draft positions.")
      .def("total_tokens", &PagePool::total_tokens, "request"_a, "committed_tokens + reserved_tokens.")
      .def(
          "page_ids", [](const PagePool& pool, RequestId id) { return to_numpy(pool.page_ids(id)); }, "request"_a,
          "The request's block-table row (int32 NumPy array, one page id per 64 positions).")
      .def("slot", &PagePool::slot, "request"_a, "position"_a,
           "write_kv slot of one position (page * 64 + position % 64), 0 <= position < total_tokens.")
      .def("slots", &pool_slots, "request"_a, "begin"_a, "count"_a, "out"_a = nb::none(),
           "Slots of positions [begin, begin + count): into out (CPU int32) or a new NumPy array.")
      .def("refcount", &PagePool::refcount, "page"_a, "Requests holding the page (0 for a free page).")
      .def("live_requests", &PagePool::live_requests, "Live request ids in table order.")
      .def("pages_needed_to_grow", &PagePool::pages_needed_to_grow, "request"_a, "extra_tokens"_a,
           "Fresh pages extending or reserving extra_tokens would take now (0 if they fit).")
      .def("pages_needed_to_create", &PagePool::pages_needed_to_create, "num_tokens"_a,
           "Fresh pages create(num_tokens) would take.")
      .def_prop_ro("num_pages", &PagePool::num_pages, "Pages in the pool.")
      .def_prop_ro("free_pages", &PagePool::free_pages, "Pages no request holds.")
      .def_prop_ro("used_pages", &PagePool::used_pages, "Pages some request holds.")
      .def("stats", &PagePool::stats, "All counters at once (PoolStats).")
      .def("check_invariants", &PagePool::check_invariants,
           "Full consistency check: '' when consistent, else the first violation.")
      .def("assert_invariants", &PagePool::assert_invariants, "check_invariants(), raising RuntimeError if broken.")
      .def_static("describe", &PagePool::describe, "request"_a,
                  "'request 7 (generation 2)' style name of a request id, for messages.");

  m.def("page_stride_bytes", &runtime::page_stride_bytes, "kv_format"_a, "pad_tokens_per_page"_a = 0,
        "Bytes of one page of one layer's cache.");
  m.def("pages_for_budget", &runtime::pages_for_budget, "budget_bytes"_a, "kv_format"_a, "num_layers"_a,
        "page_stride"_a = 0, "Pages that fit in budget_bytes when each page exists once per layer.");
}

}  // namespace openmla::python
