// The decision and the message after a step whose loss or gradient norm is
// not finite (engine/model/nonfinite_step.h); the GPU side, which finds the
// tensor, is tested in tests/engine/trainer_nonfinite_test.cc.
#include "engine/model/nonfinite_step.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

namespace sextant::engine {
namespace {

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

TEST(NonFiniteStep, PoliciesAreStopAndSkip) {
  EXPECT_EQ(parse_nonfinite_policy("stop"), NonFinitePolicy::kStop);
  EXPECT_EQ(parse_nonfinite_policy("skip"), NonFinitePolicy::kSkip);
  EXPECT_EQ(parse_nonfinite_policy("Skip"), std::nullopt);
  EXPECT_EQ(parse_nonfinite_policy(""), std::nullopt);
}

TEST(NonFiniteStep, AStepIsFiniteWhenLossAndNormAre) {
  EXPECT_TRUE(step_is_finite(2.5, 0.75));
  EXPECT_FALSE(step_is_finite(kNan, 0.75));
  EXPECT_FALSE(step_is_finite(2.5, kInf));
  EXPECT_FALSE(step_is_finite(2.5, -kInf));
}

TEST(NonFiniteStep, FirstNonFiniteIsTheFirstNanOrInf) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(first_nonfinite(std::vector<float>{1.0f, 3e38f, inf, std::nanf("")}), 2);
  EXPECT_EQ(first_nonfinite(std::vector<float>{0.0f, std::nanf(""), -inf}), 1);
  EXPECT_EQ(first_nonfinite(std::vector<float>{1.0f, 2.0f}), -1);
  EXPECT_EQ(first_nonfinite(std::vector<float>{}), -1);
}

TEST(NonFiniteStep, MessageNamesTheStepTheNumbersAndTheTensor) {
  EXPECT_EQ(nonfinite_step_message(12, kNan, kInf, "layers.1.fc2_weight"),
            "step 12: loss nan, gradient norm inf; the first parameter whose gradient is not finite is "
            "'layers.1.fc2_weight'");
  EXPECT_EQ(nonfinite_step_message(3, 2.5, kInf, ""),
            "step 3: loss 2.5, gradient norm inf; no single parameter's gradient is non-finite (the sum of "
            "squares overflowed)");
  EXPECT_EQ(nonfinite_step_message(4, kNan, 0.5, ""), "step 4: loss nan, gradient norm 0.5 (the gradients are finite)");
}

}  // namespace
}  // namespace sextant::engine
