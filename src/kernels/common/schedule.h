// Split-KV schedule shared by the planner kernel, the decode kernels and the combine kernel.
//
// The batch's work is a sequence of units in request order: request r has max(1, blocks_r) units
// (blocks_r = ceil(seqlen_r / 64); a request with no block still needs one unit to write its
// empty result), preceded by a fixed cost of kRequestOverheadUnits (Q load, epilogue; a split plan
// of the sm90 kernels with 2+ m-tiles uses kSm90MultiTileOverheadUnits). The total
// cost is cut into num_parts equal ranges; a part owns the units that fall in its range. A part
// therefore covers a contiguous run of (request, block) pairs and a request spans one or more
// consecutive parts. A request spanning one part writes out/lse directly; otherwise each of its
// parts writes a partial (normalized o, lse) and the combine kernel merges them by LSE.
// Whole requests first: when every request can go, unsplit, to the part holding its middle unit with
// no part above per_part + slack (e.g. 128 requests of equal length over 132 or 66 parts), the planner
// does that instead; parts may then stay empty. slack = max(kWholeRequestSlackUnits, per_part * the
// caller's percent / 100): the sm90 kernels pass kSm90WholeRequestSlackPercent for 2+ m-tiles.
#pragma once

#include <cstdint>

#include "core/host_device.h"

namespace openmla::kernels {

inline constexpr int kRequestOverheadUnits = 1;
// A part gets at least this many units: below it, a split's fixed costs (Q load, pipeline fill,
// partial write and its combine read: a 16-row partial is 32 KB against 72 KB per KV block) cost
// more than the parallelism gains. Short batches then leave parts empty instead of splitting thin.
// The portable kernel's value; the sm90 kernel's tiles take longer one after another (the softmax
// step sits between two wgmma chains), so a short request is split thinner there.
inline constexpr int kMinUnitsPerPart = 4;
inline constexpr int kSm90MinUnitsPerPart = 2;
inline constexpr int kMaxBlocksPerRequest = 1 << 20;  // planner clamp; real tables are far smaller
// How much more than the equal share (units) a part may carry so that no request is split: splitting
// costs partial writes and the combine, 5-12 tiles of the sm90 kernel with 2-4 m-tiles per request,
// against under one tile with 1 m-tile.
inline constexpr int kWholeRequestSlackUnits = 4;
// Relative slack for the sm90 kernels with 2+ m-tiles per request (a split there also costs each m-tile's
// CTA a segment boundary): 3% of the equal share. More slack starts keeping long requests (16K-32K) whole,
// which leaves SMs idle; one m-tile keeps the fixed units (a split costs it under one tile), and so does the
// portable kernel, which gains nothing from a relative slack.
inline constexpr int kSm90WholeRequestSlackPercent = 3;
// The cost of a request's segment in a split plan of the sm90 kernels with 2+ m-tiles, in units
// (kRequestOverheadUnits otherwise, and in the whole-or-split choice, whose rules above are tuned with it).
// A segment there costs each m-tile's CTA the Q load, the pipeline's drain and fill and the epilogue, about 3
// tiles of the seesaw, so with one unit the parts that hold more requests finish last. 3 units would
// over-weigh segments on short requests; in the whole-or-split choice the heavier weight splits requests
// that are faster whole.
inline constexpr int kSm90MultiTileOverheadUnits = 2;

// How a backend's kernels want the batch cut into parts (the planner's arguments, launch_plan): a part gets
// at least min_units_per_part units; requests stay whole within max(kWholeRequestSlackUnits,
// whole_slack_percent % of the equal share); a split plan weighs a request split_overhead_units. Chosen
// once per plan by the backend's choose_launch.
struct SplitTuning {
  int min_units_per_part = kMinUnitsPerPart;
  int whole_slack_percent = 0;
  int split_overhead_units = kRequestOverheadUnits;
};

// Split-KV parts per query tile so that parts * m_tiles fills the SMs (>= 1). Host code (schedule.cpp).
int choose_num_parts(int num_sms, int ctas_per_sm, int m_tiles) noexcept;

struct SplitPart {
  int begin_req;    // first request of the part
  int begin_block;  // its first block
  int end_req;      // last request of the part (inclusive); begin_req > end_req: empty part
  int end_block;    // block after the last block of end_req (exclusive); for a 0-block request, 1
};

struct RequestSplit {
  int first_part;    // part holding block 0 of this request
  int num_splits;    // parts the request spans (1: written directly)
  int partial_base;  // first partial slot (valid when num_splits > 1)
  int blocks;        // planned blocks (ceil(max(seqlen, 0) / 64), clamped)
};

// The heads of the kernels' row layout (row = token * heads + head, split by a shift and a mask): h_q rounded up to
// a power of two >= 8. Equal to h_q for 8, 16, 32, 64, 128; other head counts (1..128) run the portable kernel's
// general-query variant, which neither reads nor writes the padding heads' rows.
OPENMLA_HOST_DEVICE inline int row_layout_heads(int h_q) {
  int heads = 8;
  while (heads < h_q) heads *= 2;
  return heads;
}

// Blocks a request of `seqlen` tokens has (0 for seqlen <= 0), clamped as the planner does.
OPENMLA_HOST_DEVICE inline int planned_blocks(int seqlen) {
  if (seqlen <= 0) return 0;
  int64_t b = (static_cast<int64_t>(seqlen) + 63) / 64;
  return b > kMaxBlocksPerRequest ? kMaxBlocksPerRequest : static_cast<int>(b);
}

}  // namespace openmla::kernels
