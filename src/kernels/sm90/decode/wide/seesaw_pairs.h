// The seesaw's pairing of tiles (kernel.cuh, consume_seesaw), shared with the CPU tests. Tiles j, j + 1
// of a segment form a pair: consumer 0 computes S of the first, consumer 1 of the second, and each
// writes its tile's P over that tile's rope box (box 8) for the other consumer (up to 128 rows P_b goes
// to a spare tile instead). So the next copy into a stage's box 8 must wait for the release of the
// consumer that read the P written there.
#pragma once

#include <cstdint>

#include "core/host_device.h"

namespace openmla::kernels::sm90 {

// The consumer that reads P of the tile at position j of its segment: the other one than computes S.
OPENMLA_HOST_DEVICE constexpr int seesaw_p_reader(int j) { return (j & 1) ? 0 : 1; }

// Up to two query tiles per request, P of a pair's second tile (P_b) goes to the spare P tile instead of over its
// rope box, so box 8 of every stage goes back with consumer 1's half, and consumer 1's next S takes boxes 4-8 before
// 0-3 (FlashMLA keeps P_b in Q's rope box for the same reason). It gains at 65-128 rows; with more query tiles the
// pages are in L2 for the other tiles anyway, and it gains nothing.
inline constexpr int kSeesawSparePbMaxRows = 128;
OPENMLA_HOST_DEVICE constexpr bool seesaw_spare_pb(int rows) { return rows <= kSeesawSparePbMaxRows; }

// Producer side, tile by tile in stage order: the stage half (= the consumer whose release it waits
// for) whose copying thread also copies box 8 of the tile at position j of its segment into `stage`.
// second_of_pair, bit s: the tile last copied into stage s was the second of its pair (0 before a
// stage's first tile, when no P was written there and either half would do). Updated for this tile.
// spare_pb: P_b is not in box 8, so only consumer 1 (the reader of P_a) ever holds it: always half 1.
OPENMLA_HOST_DEVICE inline int rope_box_half(uint32_t& second_of_pair, int stage, int j, bool spare_pb = false) {
  const int half = spare_pb || !((second_of_pair >> stage) & 1) ? 1 : 0;  // seesaw_p_reader of the stage's last tile
  second_of_pair = (second_of_pair & ~(1u << stage)) | ((j & 1u) << stage);
  return half;
}

}  // namespace openmla::kernels::sm90
