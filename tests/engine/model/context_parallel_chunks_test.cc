#include "engine/model/context_parallel_chunks.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

namespace sextant::engine {
namespace {

TEST(ContextParallelChunks, RankHoldsChunkAndItsMirror) {
  // S = 16, cp = 2: chunks of 4; rank 0 holds chunks 0 and 3, rank 1 chunks 1 and 2.
  const ContextParallelChunks r0(16, 2, 0), r1(16, 2, 1);
  EXPECT_EQ(r0.chunk_tokens(), 4);
  EXPECT_EQ(r0.local_tokens(), 8);
  EXPECT_EQ(r0.chunk_index(0), 0);
  EXPECT_EQ(r0.chunk_index(1), 3);
  EXPECT_EQ(r1.chunk_index(0), 1);
  EXPECT_EQ(r1.chunk_index(1), 2);
  std::vector<int> p0, p1;
  for (int t = 0; t < 8; ++t) p0.push_back(r0.global_position(t)), p1.push_back(r1.global_position(t));
  EXPECT_EQ(p0, (std::vector<int>{0, 1, 2, 3, 12, 13, 14, 15}));
  EXPECT_EQ(p1, (std::vector<int>{4, 5, 6, 7, 8, 9, 10, 11}));
}

TEST(ContextParallelChunks, EveryRankSeesTheSameCausalWork) {
  // Visible keys per local chunk: (index + 1)·chunk; summed per rank it is (2·cp + 1)·chunk.
  for (int cp : {1, 2, 4, 8}) {
    for (int r = 0; r < cp; ++r) {
      const ContextParallelChunks c(64 * cp, cp, r);
      EXPECT_EQ(c.visible_keys(0) + c.visible_keys(1), (2 * cp + 1) * c.chunk_tokens()) << cp << " " << r;
    }
  }
}

TEST(ContextParallelChunks, PositionsCoverTheSequenceOnce) {
  const int S = 48, cp = 3;
  std::vector<int> seen(S, 0);
  for (int r = 0; r < cp; ++r) {
    const ContextParallelChunks c(S, cp, r);
    for (int t = 0; t < c.local_tokens(); ++t) ++seen[static_cast<std::size_t>(c.global_position(t))];
  }
  for (int n : seen) EXPECT_EQ(n, 1);
}

TEST(ContextParallelChunks, OneRankIsTheIdentity) {
  const ContextParallelChunks c(10, 1, 0);
  for (int t = 0; t < 10; ++t) EXPECT_EQ(c.global_position(t), t);
  EXPECT_EQ(c.visible_keys(1), 10);
}

TEST(ContextParallelChunks, RefusesSplitsThatDoNotDivide) {
  EXPECT_THROW(ContextParallelChunks(30, 4, 0), std::invalid_argument);  // 30 % 8 != 0
  EXPECT_THROW(ContextParallelChunks(32, 4, 4), std::invalid_argument);  // rank out of range
  EXPECT_THROW(ContextParallelChunks(32, 0, 0), std::invalid_argument);
}

}  // namespace
}  // namespace sextant::engine
