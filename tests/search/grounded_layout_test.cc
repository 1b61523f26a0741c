#include "search/grounded_layout.h"

#include <gtest/gtest.h>

#include "search/mechanism_evidence.h"
#include "sim/core/preset_catalog.h"

namespace sextant::search {
namespace {

class GroundedLayout : public ::testing::Test {
 protected:
  GroundedLayout() : catalog(SEXTANT_TEST_CONFIG_DIR) {
    model = catalog.model("gpt3-175b");
    cluster = catalog.cluster("dgx-a100");
    profile = catalog.profile("", cluster.gpu.name);
    partial.gbs = 1536;
    options.constraints.tp_within_node = true;  // `sextant search`'s default
    options.top = 1;
  }
  sim::PresetCatalog catalog;
  sim::ModelConfig model;
  sim::ClusterConfig cluster;
  sim::CostProfile profile;
  sim::PartialLayout partial;
  SearchOptions options;
};

// GPT-3 175B on 1,024 A100s (issue 29, item 9): whatever the unconstrained
// search picks, the grounded answer uses ZeRO 0 or 1, no FSDP, no ungrounded
// mechanism, and is never faster than the pick.
TEST_F(GroundedLayout, Gpt3OnA1024A100sUsesOnlyGroundedMechanisms) {
  const SearchResult all = search_layouts(model, cluster, profile, 1024, partial, options);
  ASSERT_FALSE(all.best.empty());
  const GroundedAlternative g = fastest_grounded_layout(model, cluster, profile, 1024, partial, options);
  ASSERT_TRUE(g.best.has_value());
  EXPECT_TRUE(g.fixed_by_layout.empty());
  EXPECT_LE(g.best->layout.zero, 1);
  EXPECT_TRUE(ungrounded_mechanisms(g.best->layout).empty()) << g.best->layout.to_spec();
  EXPECT_TRUE(g.best->fits_memory);
  EXPECT_GE(g.best->step_time_s, all.best.front().step_time_s);
  if (ungrounded_names(all.best.front().layout).empty()) {
    EXPECT_EQ(g.best->step_time_s, all.best.front().step_time_s);
  }
}

// With pp fixed at 16 the search offers no ZeRO-2/3 (they need pp = 1): its
// pick is grounded, and the grounded passes find that same step time.
TEST_F(GroundedLayout, AGroundedPickIsItsOwnGroundedAnswer) {
  partial.pp = 16;
  const SearchResult all = search_layouts(model, cluster, profile, 1024, partial, options);
  ASSERT_FALSE(all.best.empty());
  ASSERT_TRUE(ungrounded_names(all.best.front().layout).empty()) << all.best.front().layout.to_spec();
  const GroundedAlternative g = fastest_grounded_layout(model, cluster, profile, 1024, partial, options);
  ASSERT_TRUE(g.best.has_value());
  EXPECT_EQ(g.best->step_time_s, all.best.front().step_time_s);
  EXPECT_EQ(g.best->layout.to_spec(), all.best.front().layout.to_spec());
}

// zero=3 given in --layout: no grounded completion, and the reason names it.
TEST_F(GroundedLayout, AnUngroundedKnobFixedByTheLayoutIsNamed) {
  partial.zero = 3;
  partial.fsdp = sim::FsdpImplementation::kDeepSpeedZero3;
  const GroundedAlternative g = fastest_grounded_layout(model, cluster, profile, 1024, partial, options);
  EXPECT_FALSE(g.best.has_value());
  EXPECT_EQ(g.fixed_by_layout,
            std::vector<std::string>{"zero=3 fsdp=deepspeed-zero3 (no dev case, not run by the engine)"});
}

// A 10 s step against a 9 s one: bubble +1.2 s, exposed DP +0.4 s, compute
// -0.6 s; the optimizer's 5 ms (0.05 % of 9 s) is under the 0.1 % shown.
TEST(StepDifference, GrowthsFirstThenShrinksLargestFirst) {
  sim::SimulationResult faster, slower;
  faster.step_time_s = 9.0;
  faster.time.compute_s = 8.0;
  faster.time.pipeline_bubble_s = 0.3;
  faster.exposed_dp_s = 0.1;
  faster.time.optimizer_s = 0.1;
  slower.step_time_s = 10.0;
  slower.time.compute_s = 7.4;
  slower.time.pipeline_bubble_s = 1.5;
  slower.exposed_dp_s = 0.5;
  slower.time.optimizer_s = 0.105;
  EXPECT_EQ(step_difference(slower, faster),
            "pipeline bubble +1.200 s, exposed data-parallel sync +0.400 s; compute -0.600 s");
  EXPECT_EQ(step_difference(faster, faster), "no part of the step differs by 0.1 %");
}

}  // namespace
}  // namespace sextant::search

namespace sextant::search {
namespace {

// 9.02 s against 9 s is 0.2 % slower; 9.004 s is within 0.05 %: as fast, and
// ranked below on memory (40 GiB against 32 GiB).
TEST(CompareWithPick, SlowerOrAsFastOnTheStep) {
  sim::SimulationResult pick, grounded;
  pick.step_time_s = 9.0;
  pick.time.compute_s = 9.0;
  pick.memory.parameters = 32.0 * (1 << 30);
  grounded.step_time_s = 9.02;
  grounded.time.compute_s = 9.02;
  grounded.memory.parameters = 40.0 * (1 << 30);
  const PickComparison slower = compare_with_pick(grounded, pick);
  EXPECT_EQ(slower.how, "0.2 % slower");
  EXPECT_EQ(slower.loses, "it loses on: compute +0.020 s");
  grounded.step_time_s = 9.004;
  const PickComparison tie = compare_with_pick(grounded, pick);
  EXPECT_EQ(tie.how, "as fast");
  EXPECT_EQ(tie.loses, "it ranks below on memory alone: 40.00 GiB against 32.00 GiB per GPU");
}

}  // namespace
}  // namespace sextant::search
