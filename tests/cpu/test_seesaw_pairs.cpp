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

#include "kernels/sm90/decode/wide/seesaw_pairs.h"

namespace openmla::kernels::sm90 {
namespace {

// The model, written from consume_seesaw: in a pair (a, b) consumer 0 computes S_a and consumer 1
// multiplies P_a from shared memory; consumer 1 computes S_b and consumer 0 reads P_b. With spare_pb,
// P_b is not written over box 8 (-1: no reader, either half may copy it).
int model_p_reader(int position_in_segment, bool spare_pb) {
  if (position_in_segment % 2 == 0) return 1;
  return spare_pb ? -1 : 0;
}

// Runs a part made of segments with the given tile counts; returns the number of tiles checked.
int check_part(const std::vector<int>& tiles_per_segment, bool spare_pb = false) {
  uint32_t second_of_pair = 0;
  int last_reader[2] = {-1, -1};  // per stage: the consumer that read the P over its box 8
  int it = 0, checked = 0;
  for (int tiles : tiles_per_segment) {
    for (int j = 0; j < tiles; ++j, ++it) {
      const int stage = it % 2;
      const int half = rope_box_half(second_of_pair, stage, j, spare_pb);
      EXPECT_TRUE(half == 0 || half == 1);
      if (last_reader[stage] >= 0) {
        EXPECT_EQ(half, last_reader[stage]) << "tile " << it << " (position " << j << ") in stage " << stage;
        ++checked;
      }
      last_reader[stage] = model_p_reader(j, spare_pb);
      if (last_reader[stage] >= 0) {
        EXPECT_EQ(seesaw_p_reader(j), last_reader[stage]);
      }
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

// Up to 128 rows P_b goes to the spare tile: box 8 of a stage holds at most P_a, read by consumer 1, whose half
// then always copies it (a stage's last P_a must not be overwritten before consumer 1 released the stage).
TEST(SeesawPairs, SparePbKeepsTheRopeBoxWithConsumerOne) {
  EXPECT_TRUE(seesaw_spare_pb(65));
  EXPECT_TRUE(seesaw_spare_pb(kSeesawSparePbMaxRows));
  EXPECT_FALSE(seesaw_spare_pb(kSeesawSparePbMaxRows + 1));
  EXPECT_EQ(check_part({1, 2, 3, 1, 1, 5}, true), 8);  // the tiles whose stage last held a P_a
  EXPECT_EQ(check_part({4, 6, 2}, true), 5);  // stage 1 holds only P_b tiles here
  std::mt19937 rng(20261203);
  std::uniform_int_distribution<int> count(0, 9);
  for (int part = 0; part < 200; ++part) {
    std::vector<int> tiles(1 + part % 17);
    for (int& t : tiles) t = count(rng);
    check_part(tiles, true);
  }
  // Without a reader the rule still answers half 1: never the half of a consumer that might hold P there.
  uint32_t second_of_pair = 0b11;
  EXPECT_EQ(rope_box_half(second_of_pair, 0, 2, true), 1);
  EXPECT_EQ(rope_box_half(second_of_pair, 1, 3, true), 1);
}

TEST(SeesawPairs, TheOtherConsumerReadsP) {
  for (int j = 0; j < 8; ++j) EXPECT_EQ(seesaw_p_reader(j), 1 - j % 2) << j;
}

}  // namespace
}  // namespace openmla::kernels::sm90
