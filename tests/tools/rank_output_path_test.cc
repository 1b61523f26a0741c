#include "tools/rank_output_path.h"

#include <gtest/gtest.h>

namespace sextant::tools {
namespace {

TEST(RankOutputPath, OneRankKeepsThePath) {
  EXPECT_EQ(rank_output_path("timing.csv", 0, 1), "timing.csv");
}

TEST(RankOutputPath, SeveralRanksNameTheirs) {
  EXPECT_EQ(rank_output_path("timing.csv", 3, 4), "timing.rank3.csv");
  EXPECT_EQ(rank_output_path("out/timing.csv", 3, 16), "out/timing.rank03.csv");
  EXPECT_EQ(rank_output_path("out.d/timing", 12, 128), "out.d/timing.rank012");
}

}  // namespace
}  // namespace sextant::tools
