// The ring all-gather's chunk order for tp_comm_overlap
// (engine/tensor_parallel/overlap_schedule.h): every rank ends with every
// chunk, each ring step's send is the chunk its next rank expects, and a rank
// only sends what it already holds.
#include "engine/tensor_parallel/overlap_schedule.h"

#include <gtest/gtest.h>

#include <set>
#include <vector>

namespace sextant::engine::tensor_parallel {
namespace {

// tp = 4, rank 1: its own chunk 1, then (1 − i) mod 4 at step i = 0, 3, 2;
// it passes on what it got the step before: 1, 0, 3. Its neighbours are 2 (next) and 0 (previous).
TEST(OverlapSchedule, RingOrderOfOneRank) {
  std::vector<int> received, sent;
  for (int step = 0; step < 4; ++step) received.push_back(ring_gather_received_chunk(1, 4, step));
  for (int step = 1; step < 4; ++step) sent.push_back(ring_gather_sent_chunk(1, 4, step));
  EXPECT_EQ(received, (std::vector<int>{1, 0, 3, 2}));
  EXPECT_EQ(sent, (std::vector<int>{1, 0, 3}));
  EXPECT_EQ(ring_next(1, 4), 2);
  EXPECT_EQ(ring_previous(1, 4), 0);
  EXPECT_EQ(ring_next(3, 4), 0);
  EXPECT_EQ(ring_previous(0, 4), 3);
}

TEST(OverlapSchedule, EveryRankGathersEveryChunkFromItsPreviousRank) {
  for (int size = 1; size <= 8; ++size) {
    for (int rank = 0; rank < size; ++rank) {
      std::set<int> held = {ring_gather_received_chunk(rank, size, 0)};
      EXPECT_EQ(*held.begin(), rank) << "step 0 is the rank's own chunk";
      for (int step = 1; step < size; ++step) {
        const int previous = ring_previous(rank, size);
        const int chunk = ring_gather_received_chunk(rank, size, step);
        // What arrives is what the previous rank sends at this step ...
        EXPECT_EQ(chunk, ring_gather_sent_chunk(previous, size, step)) << size << " " << rank << " " << step;
        // ... and a rank sends only a chunk it already holds.
        EXPECT_EQ(held.count(ring_gather_sent_chunk(rank, size, step)), 1u) << size << " " << rank << " " << step;
        held.insert(chunk);
      }
      EXPECT_EQ(held.size(), static_cast<std::size_t>(size)) << "tp " << size << ", rank " << rank;
    }
  }
}

}  // namespace
}  // namespace sextant::engine::tensor_parallel
