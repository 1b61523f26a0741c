#include "engine/model/lr_schedule.h"

#include <gtest/gtest.h>

#include <cmath>

namespace sextant::engine {
namespace {

TEST(LrSchedule, WarmsUpLinearlyThenFollowsTheCosineToTheFloor) {
  LrSchedule s;
  s.max_lr = 6e-4;
  s.min_lr = 6e-5;
  s.warmup_steps = 10;
  s.decay_steps = 110;
  EXPECT_DOUBLE_EQ(s.at(1), 6e-5);   // 1/10 of the peak, not 0
  EXPECT_DOUBLE_EQ(s.at(5), 3e-4);
  EXPECT_DOUBLE_EQ(s.at(10), 6e-4);  // the peak ends the warmup
  // Halfway through the decay the cosine term is 0.5: (max + min) / 2.
  EXPECT_NEAR(s.at(60), 3.3e-4, 1e-15);
  // A quarter in: min + (max - min) (1 + cos(pi/4)) / 2.
  EXPECT_NEAR(s.at(35), 6e-5 + 5.4e-4 * 0.5 * (1 + std::cos(M_PI / 4)), 1e-15);
  EXPECT_DOUBLE_EQ(s.at(110), 6e-5);
  EXPECT_DOUBLE_EQ(s.at(500), 6e-5);
  for (int step = 11; step < 110; ++step) EXPECT_LT(s.at(step + 1), s.at(step)) << step;
}

TEST(LrSchedule, WithoutWarmupStartsAtThePeak) {
  LrSchedule s;
  s.max_lr = 1e-3;
  s.min_lr = 0;
  s.warmup_steps = 0;
  s.decay_steps = 4;
  EXPECT_NEAR(s.at(1), 1e-3 * 0.5 * (1 + std::cos(M_PI / 4)), 1e-18);
  EXPECT_DOUBLE_EQ(s.at(4), 0.0);
}

TEST(LrSchedule, ProblemsNameTheOption) {
  LrSchedule s;
  s.max_lr = 1e-3;
  s.min_lr = 1e-2;
  EXPECT_NE(lr_schedule_problem(s).find("--min-lr (0.01) must be between 0 and --lr (0.001)"),
            std::string::npos) << lr_schedule_problem(s);
  s.min_lr = 0;
  s.warmup_steps = 10;
  s.decay_steps = 5;
  EXPECT_NE(lr_schedule_problem(s).find("--lr-decay-steps (5)"), std::string::npos);
  s.decay_steps = 10;
  EXPECT_EQ(lr_schedule_problem(s), "");
  s.max_lr = -1;
  EXPECT_NE(lr_schedule_problem(s).find("--lr (-1)"), std::string::npos);
}

}  // namespace
}  // namespace sextant::engine
