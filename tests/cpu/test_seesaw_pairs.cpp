// The sm90 seesaw schedule's pairing rule (kernels/sm90/decode/seesaw_pairs.h), against a model of
// its consumers: P of a tile is written over the tile's rope box (box 8) and read by the consumer that
// did not compute S, so the producer may copy the next tile's box 8 into that stage only with the half
// that reader releases. A part's tiles run through the two stages in order across its segments
// (requests), and a segment's pairs restart at its first tile, so an odd tile count flips which
// consumer read a stage's last P: the case the first version of the rule got wrong.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "kernels/sm90/decode/seesaw_pairs.h"

namespace openmla::kernels::sm90 {
namespace {

// The model, written from consume_seesaw: in a pair (a, b) consumer 0 computes S_a and consumer 1
// multiplies P_a from shared memory; consumer 1 computes S_b and consumer 0 reads P_b.
int model_p_reader(int position_in_segment) { return position_in_segment % 2 == 0 ? 1 : 0; }

// Runs a part made of segments with the given tile counts; returns the number of tiles checked.
int check_part(const std::vector<int>& tiles_per_segment) {
  uint32_t second_of_pair = 0;
  int last_reader[2] = {-1, -1};  // per stage: the consumer that read the P over its box 8
  int it = 0, checked = 0;
  for (int tiles : tiles_per_segment) {
    for (int j = 0; j < tiles; ++j, ++it) {
      const int stage = it % 2;
      const int half = rope_box_half(second_of_pair, stage, j);
      EXPECT_TRUE(half == 0 || half == 1);
      if (last_reader[stage] >= 0) {
        EXPECT_EQ(half, last_reader[stage]) << "tile " << it << " (position " << j << ") in stage " << stage;
        ++checked;
      }
      last_reader[stage] = model_p_reader(j);
      EXPECT_EQ(seesaw_p_reader(j), last_reader[stage]);
    }
  }
  return checked;
}

TEST(SeesawPairs, RopeBoxGoesBackWithTheHalfOfItsPReader) {
  // Even segments only: the rule by the tile's own position would pass too.
  EXPECT_EQ(check_part({4, 6, 2}), 10);
  // Odd counts shift the pairing against the stage sequence.
  EXPECT_EQ(check_part({1, 2, 3, 1, 1, 5}), 11);
  // Empty segments (length 0, or requests with no tile in this part) take no stage.
  EXPECT_EQ(check_part({0, 3, 0, 0, 2, 1}), 4);
  std::mt19937 rng(20261130);
  std::uniform_int_distribution<int> count(0, 9);
  for (int part = 0; part < 200; ++part) {
    std::vector<int> tiles(1 + part % 17);
    for (int& t : tiles) t = count(rng);
    check_part(tiles);
  }
}

TEST(SeesawPairs, TheOtherConsumerReadsP) {
  for (int j = 0; j < 8; ++j) EXPECT_EQ(seesaw_p_reader(j), 1 - j % 2) << j;
}

}  // namespace
}  // namespace openmla::kernels::sm90
