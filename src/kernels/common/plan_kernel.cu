// Device-side split-KV planner: turns device cache_seqlens into the schedule of schedule.h.
// One CTA walks the batch in chunks of kThreads requests with block-wide scans, so the cost is
// O(b / kThreads) steps and nothing returns to the host.
#include <cub/block/block_scan.cuh>

#include "kernels/common/plan_kernel.h"
#include "kernels/common/schedule.h"

namespace openmla::kernels {
namespace {

constexpr int kThreads = 512;

__global__ void __launch_bounds__(kThreads) plan_kernel(const int* __restrict__ seqlens, int batch,
                                                        int num_parts, int min_units_per_part,
                                                        int whole_slack_percent, int split_overhead_units,
                                                        SplitPart* __restrict__ parts,
                                                        RequestSplit* __restrict__ splits) {
  using Scan = cub::BlockScan<long long, kThreads>;
  __shared__ typename Scan::TempStorage scan_storage;

  // The whole-or-split choice weighs a request kRequestOverheadUnits besides its blocks (the rules of
  // schedule.h are tuned with that weight); the split below weighs it split_overhead_units.
  auto units_of = [](int seqlen) -> long long {
    const int blocks = planned_blocks(seqlen);
    return (blocks > 0 ? blocks : 1) + kRequestOverheadUnits;
  };

  // Pass 1: total cost, and every part starts out empty.
  long long my_total = 0;
  for (int r = threadIdx.x; r < batch; r += kThreads) my_total += units_of(seqlens[r]);
  for (int p = threadIdx.x; p < num_parts; p += kThreads) parts[p] = SplitPart{1, 0, 0, 0};
  long long total = 0;
  {
    long long excl;
    Scan(scan_storage).ExclusiveSum(my_total, excl, total);
  }
  __syncthreads();
  const long long per_part = max((total + num_parts - 1) / num_parts, static_cast<long long>(min_units_per_part));

  // Whole requests when that balances nearly as well (schedule.h): each request goes to the part
  // holding its middle unit (its "home"); if no part then carries more than per_part + slack,
  // nothing is split and the combine has nothing to do.
  const long long whole_slack =
      max(static_cast<long long>(kWholeRequestSlackUnits), per_part * whole_slack_percent / 100);
  struct Home {
    int part;     // the part holding the request's middle unit
    bool first;   // the part's first request
    bool last;    // the part's last request
  };
  // Request r, whose units start at `start` (its neighbours' costs are read again, not exchanged).
  auto home_of = [&](int r, long long start, long long cost) {
    auto part_at = [&](long long s, long long c) { return static_cast<int>((s + c / 2) / per_part); };
    Home h;
    h.part = part_at(start, cost);
    if (r == 0) {
      h.first = true;
    } else {
      const long long prev_cost = units_of(seqlens[r - 1]);
      h.first = part_at(start - prev_cost, prev_cost) != h.part;
    }
    h.last = r + 1 == batch || part_at(start + cost, units_of(seqlens[r + 1])) != h.part;
    return h;
  };
  auto max_op = [](long long a, long long b) { return a > b ? a : b; };
  // Pass 2: the largest part load under the home assignment. A part's load is its last request's
  // end minus its first request's start (a running max of the first requests' starts); the block
  // scans' aggregates give the chunk maxima.
  long long max_load = 0;
  {
    long long cost_base = 0, first_start_carry = -1;
    for (int chunk = 0; chunk < batch; chunk += kThreads) {
      const int r = chunk + threadIdx.x;
      const bool active = r < batch;
      const long long cost = active ? units_of(seqlens[r]) : 0;
      long long start, chunk_cost;
      Scan(scan_storage).ExclusiveSum(cost, start, chunk_cost);
      __syncthreads();
      start += cost_base;
      const Home h = active ? home_of(r, start, cost) : Home{0, false, false};
      long long first_start, chunk_max;
      Scan(scan_storage).InclusiveScan(h.first ? start : -1, first_start, max_op, chunk_max);
      __syncthreads();
      first_start = max_op(first_start, first_start_carry);
      const long long load = h.last ? start + cost - first_start : 0;
      long long unused, chunk_max_load;
      Scan(scan_storage).InclusiveScan(load, unused, max_op, chunk_max_load);
      __syncthreads();
      max_load = max_op(max_load, chunk_max_load);
      first_start_carry = max_op(first_start_carry, chunk_max);
      cost_base += chunk_cost;
    }
  }
  if (max_load <= per_part + whole_slack) {
    // Pass 3 (whole requests): every request in its home part, unsplit.
    long long cost_base = 0;
    for (int chunk = 0; chunk < batch; chunk += kThreads) {
      const int r = chunk + threadIdx.x;
      const bool active = r < batch;
      const int blocks = active ? planned_blocks(seqlens[r]) : 0;
      const long long cost = active ? units_of(seqlens[r]) : 0;
      long long start, chunk_cost;
      Scan(scan_storage).ExclusiveSum(cost, start, chunk_cost);
      __syncthreads();
      start += cost_base;
      if (active) {
        const Home h = home_of(r, start, cost);
        splits[r] = RequestSplit{h.part, 1, 0, blocks};
        if (h.first) {
          parts[h.part].begin_req = r;
          parts[h.part].begin_block = 0;
        }
        if (h.last) {
          parts[h.part].end_req = r;
          parts[h.part].end_block = blocks > 0 ? blocks : 1;
        }
      }
      cost_base += chunk_cost;
      __syncthreads();
    }
    return;
  }

  // Pass 3 (split): each request finds the parts its units fall in (unit k of request r sits at position
  // start_r + split_overhead_units + k; part = position / split_per_part, the equal share at that cost).
  const long long split_per_part =
      max((total + static_cast<long long>(split_overhead_units - kRequestOverheadUnits) * batch + num_parts - 1) /
              num_parts,
          static_cast<long long>(min_units_per_part));
  long long cost_base = 0;
  long long partial_base = 0;
  for (int chunk = 0; chunk < batch; chunk += kThreads) {
    const int r = chunk + threadIdx.x;
    const bool active = r < batch;
    const int blocks = active ? planned_blocks(seqlens[r]) : 0;
    const long long units = blocks > 0 ? blocks : 1;
    const long long cost = active ? units + split_overhead_units : 0;

    long long start, chunk_cost;
    Scan(scan_storage).ExclusiveSum(cost, start, chunk_cost);
    __syncthreads();
    start += cost_base;
    const long long first_pos = start + split_overhead_units;
    const int first_part = static_cast<int>(first_pos / split_per_part);
    const int last_part = static_cast<int>((first_pos + units - 1) / split_per_part);
    const int num_splits = last_part - first_part + 1;

    long long my_partials = (active && num_splits > 1) ? num_splits : 0;
    long long partial_start, chunk_partials;
    Scan(scan_storage).ExclusiveSum(my_partials, partial_start, chunk_partials);
    __syncthreads();

    if (active) {
      splits[r] = RequestSplit{first_part, num_splits, static_cast<int>(partial_base + partial_start), blocks};
      // Parts beginning in r: every part after its first, and the first one unless the previous
      // request's last unit (at position start - 1) already lies in it.
      const bool first_begins_here = (r == 0) || ((start - 1) / split_per_part < first_part);
      for (int p = first_part; p <= last_part; ++p) {
        if (p == first_part && !first_begins_here) continue;
        const long long begin_pos = p == first_part ? first_pos : static_cast<long long>(p) * split_per_part;
        parts[p].begin_req = r;
        parts[p].begin_block = static_cast<int>(begin_pos - first_pos);
      }
      // Parts ending in r: every part before its last, and the last one unless the next request's
      // first unit lies in it too.
      bool last_ends_here = true;
      if (r + 1 < batch) {
        const long long next_first_pos = start + cost + split_overhead_units;
        last_ends_here = next_first_pos / split_per_part > last_part;
      }
      for (int p = first_part; p <= last_part; ++p) {
        if (p == last_part && !last_ends_here) continue;
        const long long end_pos = p == last_part ? first_pos + units : static_cast<long long>(p + 1) * split_per_part;
        parts[p].end_req = r;
        parts[p].end_block = static_cast<int>(end_pos - first_pos);
      }
    }
    cost_base += chunk_cost;
    partial_base += chunk_partials;
    __syncthreads();
  }
}

}  // namespace

cudaError_t launch_plan(const int* seqlens, int batch, int num_parts, const SplitTuning& tuning, SplitPart* parts,
                        RequestSplit* splits, cudaStream_t stream) {
  plan_kernel<<<1, kThreads, 0, stream>>>(seqlens, batch, num_parts, tuning.min_units_per_part,
                                          tuning.whole_slack_percent, tuning.split_overhead_units, parts, splits);
  return cudaGetLastError();
}

}  // namespace openmla::kernels
