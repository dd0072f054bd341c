// The device split-KV planner (kernels/common/plan_kernel.cu) read back: every schedule covers each
// request's blocks exactly once, in order, with consistent split records and partial slots; equal
// requests that pack into the parts within the whole-request slack (kWholeRequestSlackUnits, or the
// caller's percent of the equal share) stay whole, the rest split.
#include <gtest/gtest.h>

#include <algorithm>
#include <cuda_runtime.h>  // cudaMalloc(T**, size)
#include <random>
#include <string>
#include <vector>

#include "gpu/gpu_util.h"
#include "kernels/common/plan_kernel.h"
#include "kernels/common/schedule.h"
#include "kernels/common/workspace.h"

namespace openmla::testing {
namespace {

using kernels::RequestSplit;
using kernels::SplitPart;

struct Schedule {
  std::vector<SplitPart> parts;
  std::vector<RequestSplit> splits;
};

Schedule run_planner(const std::vector<int>& seqlens, int num_parts, int min_units_per_part,
                     int whole_slack_percent = 0, int overhead_units = kernels::kRequestOverheadUnits) {
  const int batch = static_cast<int>(seqlens.size());
  int* d_seqlens = nullptr;
  SplitPart* d_parts = nullptr;
  RequestSplit* d_splits = nullptr;
  EXPECT_EQ(cudaMalloc(&d_seqlens, sizeof(int) * batch), cudaSuccess);
  EXPECT_EQ(cudaMalloc(&d_parts, sizeof(SplitPart) * num_parts), cudaSuccess);
  EXPECT_EQ(cudaMalloc(&d_splits, sizeof(RequestSplit) * batch), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(d_seqlens, seqlens.data(), sizeof(int) * batch, cudaMemcpyHostToDevice), cudaSuccess);
  // Poison both outputs: the planner must write every part and every request.
  EXPECT_EQ(cudaMemset(d_parts, 0x7f, sizeof(SplitPart) * num_parts), cudaSuccess);
  EXPECT_EQ(cudaMemset(d_splits, 0x7f, sizeof(RequestSplit) * batch), cudaSuccess);
  const kernels::SplitTuning tuning{min_units_per_part, whole_slack_percent, overhead_units};
  EXPECT_EQ(kernels::launch_plan(d_seqlens, batch, num_parts, tuning, d_parts, d_splits, nullptr),
            cudaSuccess);
  Schedule s;
  s.parts.resize(num_parts);
  s.splits.resize(batch);
  EXPECT_EQ(cudaMemcpy(s.parts.data(), d_parts, sizeof(SplitPart) * num_parts, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(s.splits.data(), d_splits, sizeof(RequestSplit) * batch, cudaMemcpyDeviceToHost), cudaSuccess);
  cudaFree(d_seqlens);
  cudaFree(d_parts);
  cudaFree(d_splits);
  return s;
}

int units_of(int seqlen) { return std::max(1, kernels::planned_blocks(seqlen)); }

// Checks the schedule's invariants and returns the largest part load in planner units (blocks plus
// overhead_units per request a part touches).
int check_schedule(const std::vector<int>& seqlens, int num_parts, const Schedule& s,
                   int overhead_units = kernels::kRequestOverheadUnits) {
  const int batch = static_cast<int>(seqlens.size());
  std::vector<int> covering(batch, 0), first_part(batch, -1);
  int req = 0, block = 0, max_load = 0;
  for (int p = 0; p < num_parts; ++p) {
    const SplitPart& part = s.parts[p];
    if (part.begin_req > part.end_req) continue;  // empty
    // Parts follow one another over the (request, block) sequence without gaps or overlaps.
    EXPECT_EQ(part.begin_req, req) << "part " << p;
    EXPECT_EQ(part.begin_block, block) << "part " << p;
    EXPECT_LE(part.end_req, batch - 1) << "part " << p;
    int load = 0;
    for (int r = part.begin_req; r <= part.end_req && r < batch; ++r) {
      const int b0 = r == part.begin_req ? part.begin_block : 0;
      const int b1 = r == part.end_req ? part.end_block : units_of(seqlens[r]);
      EXPECT_LT(b0, b1) << "part " << p << " request " << r;
      EXPECT_LE(b1, units_of(seqlens[r])) << "part " << p << " request " << r;
      load += (b1 - b0) + overhead_units;
      if (covering[r]++ == 0) first_part[r] = p;
      req = r;
      block = b1;
    }
    if (block == units_of(seqlens[req])) {
      ++req;
      block = 0;
    }
    max_load = std::max(max_load, load);
  }
  EXPECT_EQ(req, batch) << "the parts do not cover the batch";
  std::vector<bool> slot_used(std::max(1, kernels::max_partials(batch, num_parts)), false);
  for (int r = 0; r < batch; ++r) {
    const RequestSplit& split = s.splits[r];
    EXPECT_EQ(split.first_part, first_part[r]) << "request " << r;
    EXPECT_EQ(split.num_splits, covering[r]) << "request " << r;
    EXPECT_EQ(split.blocks, kernels::planned_blocks(seqlens[r])) << "request " << r;
    if (split.num_splits > 1) {
      for (int k = 0; k < split.num_splits; ++k) {
        const int slot = split.partial_base + k;
        const bool in_range = slot >= 0 && slot < kernels::max_partials(batch, num_parts);
        EXPECT_TRUE(in_range) << "request " << r << ": partial slot " << slot;
        if (!in_range) continue;
        EXPECT_FALSE(slot_used[slot]) << "partial slot " << slot << " taken twice";
        slot_used[slot] = true;
      }
    }
  }
  return max_load;
}

int ideal_share(const std::vector<int>& seqlens, int num_parts, int min_units,
                int overhead_units = kernels::kRequestOverheadUnits) {
  long long total = 0;
  for (int len : seqlens) total += units_of(len) + overhead_units;
  return static_cast<int>(std::max<long long>((total + num_parts - 1) / num_parts, min_units));
}

int split_requests(const Schedule& s) {
  return static_cast<int>(std::count_if(s.splits.begin(), s.splits.end(),
                                        [](const RequestSplit& x) { return x.num_splits > 1; }));
}

TEST(Plan, EqualRequestsThatPackStayWhole) {
  struct Case {
    int batch, seqlen, num_parts;
  };
  // 128 x 16 blocks over 132 parts (one m-tile) and 66 (two), 64 x 64 blocks over 66, and 1000
  // requests over 132 parts (several chunks of the planner's block scan).
  for (const Case& c : {Case{128, 1024, 132}, Case{128, 1000, 66}, Case{64, 4096, 66}, Case{128, 1024, 33},
                        Case{1000, 640, 132}}) {
    SCOPED_TRACE(std::to_string(c.batch) + " x " + std::to_string(c.seqlen) + ", " + std::to_string(c.num_parts) +
                 " parts");
    const std::vector<int> seqlens(c.batch, c.seqlen);
    const Schedule s = run_planner(seqlens, c.num_parts, kernels::kSm90MinUnitsPerPart);
    const int max_load = check_schedule(seqlens, c.num_parts, s);
    EXPECT_EQ(split_requests(s), 0);
    EXPECT_LE(max_load, ideal_share(seqlens, c.num_parts, kernels::kSm90MinUnitsPerPart) +
                            kernels::kWholeRequestSlackUnits);
  }
}

TEST(Plan, RelativeSlackKeepsLongerRequestsWhole) {
  struct Case {
    int batch, seqlen, num_parts;
    bool whole;  // under kSm90WholeRequestSlackPercent
  };
  // The shapes of the A/B that set the percent (schedule.h): whole requests put a part 7 or 15 units above the
  // equal share, within 3% of it; 128 x 256 blocks over 66 parts miss it by one unit (15 over, 14 allowed).
  for (const Case& c : {Case{128, 8192, 66, true}, Case{128, 4096, 33, true}, Case{128, 8192, 33, true},
                        Case{64, 16384, 66, true}, Case{128, 16384, 66, false}}) {
    SCOPED_TRACE(std::to_string(c.batch) + " x " + std::to_string(c.seqlen) + ", " + std::to_string(c.num_parts) +
                 " parts");
    const std::vector<int> seqlens(c.batch, c.seqlen);
    const int share = ideal_share(seqlens, c.num_parts, kernels::kSm90MinUnitsPerPart);
    const Schedule units_only = run_planner(seqlens, c.num_parts, kernels::kSm90MinUnitsPerPart);
    check_schedule(seqlens, c.num_parts, units_only);
    EXPECT_GT(split_requests(units_only), 0) << "4 units of slack are too few here";
    const Schedule relative = run_planner(seqlens, c.num_parts, kernels::kSm90MinUnitsPerPart,
                                          kernels::kSm90WholeRequestSlackPercent);
    const int max_load = check_schedule(seqlens, c.num_parts, relative);
    if (c.whole) {
      EXPECT_EQ(split_requests(relative), 0);
      EXPECT_LE(max_load, share + share * kernels::kSm90WholeRequestSlackPercent / 100);
    } else {
      EXPECT_GT(split_requests(relative), 0);
      EXPECT_LE(max_load, share + kernels::kRequestOverheadUnits);
    }
  }
}

TEST(Plan, RequestsThatDoNotPackAreSplit) {
  struct Case {
    std::vector<int> seqlens;
    int num_parts;
    const char* what;
  };
  const unsigned seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  std::normal_distribution<double> normal(4096.0, 2048.0);
  std::vector<int> varlen(128);
  for (int& x : varlen) x = std::max(1, static_cast<int>(normal(rng)));
  std::vector<int> with_zeros(200, 3000);
  for (int r = 0; r < 200; r += 7) with_zeros[r] = 0;
  for (const Case& c : {Case{std::vector<int>(64, 1024), 132, "64 x 16 blocks over 132 parts"},
                        Case{std::vector<int>(128, 16384), 132, "128 x 256 blocks over 132 parts"},
                        Case{std::vector<int>{100000}, 132, "one long request"},
                        Case{varlen, 132, "varlen N(4096, 2048)"},
                        Case{with_zeros, 61, "200 requests, every seventh empty"}}) {
    SCOPED_TRACE(c.what);
    const Schedule s = run_planner(c.seqlens, c.num_parts, kernels::kSm90MinUnitsPerPart);
    const int max_load = check_schedule(c.seqlens, c.num_parts, s);
    EXPECT_GT(split_requests(s), 0);
    // The equal split: no part above its share.
    EXPECT_LE(max_load, ideal_share(c.seqlens, c.num_parts, kernels::kSm90MinUnitsPerPart) +
                            kernels::kRequestOverheadUnits);
  }
}

// The sm90 kernels with 2+ m-tiles charge a request's segment kSm90MultiTileOverheadUnits in a split plan: the
// parts that hold more (shorter) requests get fewer blocks. Both costs give valid schedules within one segment of
// the share; with the larger one, the largest part measured at that cost is lower on a fixed varlen batch and on
// a batch of short and long requests in turn. The whole-or-split choice keeps kRequestOverheadUnits: equal
// requests that pack stay whole at either cost.
TEST(Plan, SegmentCostBalancesPartsOfManyRequests) {
  static_assert(kernels::kSm90MultiTileOverheadUnits > kernels::kRequestOverheadUnits);
  constexpr int kOverhead = kernels::kSm90MultiTileOverheadUnits;
  auto varlen = [](unsigned seed, int b) {
    std::mt19937 rng(seed);
    std::normal_distribution<double> normal(4096.0, 2048.0);
    std::vector<int> v(b);
    for (int& x : v) x = std::max(1, static_cast<int>(normal(rng)));
    return v;
  };
  std::vector<int> mixed(120);
  for (int r = 0; r < 120; ++r) mixed[r] = r % 3 == 0 ? 6000 : 300;
  const unsigned seed = std::random_device{}();
  SCOPED_TRACE("random seed " + std::to_string(seed));
  struct Case {
    std::vector<int> seqlens;
    int num_parts;
    bool fixed;  // the comparison below is asserted on the fixed batches only
  };
  for (const Case& c : {Case{varlen(2026, 128), 66, true}, Case{mixed, 66, true}, Case{varlen(seed, 128), 66, false},
                        Case{varlen(seed + 1, 64), 33, false}}) {
    const Schedule light = run_planner(c.seqlens, c.num_parts, kernels::kSm90MinUnitsPerPart,
                                       kernels::kSm90WholeRequestSlackPercent);
    const Schedule heavy = run_planner(c.seqlens, c.num_parts, kernels::kSm90MinUnitsPerPart,
                                       kernels::kSm90WholeRequestSlackPercent, kOverhead);
    check_schedule(c.seqlens, c.num_parts, light);
    const int heavy_max = check_schedule(c.seqlens, c.num_parts, heavy, kOverhead);
    const int light_max = check_schedule(c.seqlens, c.num_parts, light, kOverhead);  // at the larger cost
    EXPECT_GT(split_requests(heavy), 0);
    EXPECT_LE(heavy_max, ideal_share(c.seqlens, c.num_parts, kernels::kSm90MinUnitsPerPart, kOverhead) + kOverhead);
    if (c.fixed) {
      EXPECT_LT(heavy_max, light_max) << "the segment cost did not move blocks off the busiest part";
    }
  }
  // b=128 x 64 blocks over 33 parts (4 m-tiles, e.g. s_q=2, h_q=128): four requests a part are 7 units over the
  // share at 1 unit a request, within the 3% slack; at 2 units they would be 8 over and split,
  // which is slower.
  const std::vector<int> equal(128, 4096);
  const Schedule whole = run_planner(equal, 33, kernels::kSm90MinUnitsPerPart, kernels::kSm90WholeRequestSlackPercent,
                                     kOverhead);
  check_schedule(equal, 33, whole);
  EXPECT_EQ(split_requests(whole), 0);
}

TEST(Plan, SmallBatchesAndMinimumPartSize) {
  // Fewer units than parts: parts stay empty rather than splitting below the minimum.
  for (int min_units : {kernels::kSm90MinUnitsPerPart, kernels::kMinUnitsPerPart}) {
    for (const std::vector<int>& seqlens : {std::vector<int>{1}, std::vector<int>{0}, std::vector<int>{64, 65, 0, 7},
                                            std::vector<int>{4000, 1}}) {
      const Schedule s = run_planner(seqlens, 132, min_units);
      const int max_load = check_schedule(seqlens, 132, s);
      // Whole requests within the slack, or the equal split (at most one overhead unit over; the slack is larger).
      static_assert(kernels::kWholeRequestSlackUnits >= kernels::kRequestOverheadUnits);
      EXPECT_LE(max_load, ideal_share(seqlens, 132, min_units) + kernels::kWholeRequestSlackUnits);
    }
  }
}

}  // namespace
}  // namespace openmla::testing
