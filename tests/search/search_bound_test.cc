// The search's branch and bound (SearchOptions::prune_by_bound) skips timing
// layouts whose bound ranks them out; the best list must be the one the full
// enumeration gives: the same layouts in the same order with the same times.
#include <gtest/gtest.h>

#include <string>
#include <tuple>

#include "search/layout_search.h"
#include "sim/analytic/analytic_model.h"
#include "sim/core/layout_check.h"
#include "sim/core/pipeline_split.h"
#include "sim/core/preset_catalog.h"

namespace sextant::search {
namespace {

struct Case {
  const char* model;
  const char* cluster;
  long gpus;
  int gbs;
  int top;
};

class SearchBound : public ::testing::TestWithParam<Case> {};

TEST_P(SearchBound, SameBestListAsTheFullEnumeration) {
  const Case c = GetParam();
  const sim::PresetCatalog catalog(SEXTANT_TEST_CONFIG_DIR);
  const sim::ModelConfig model = catalog.model(c.model);
  const sim::ClusterConfig cluster = catalog.cluster(c.cluster);
  const sim::CostProfile profile = catalog.profile("", cluster.gpu.name);
  sim::PartialLayout partial;
  partial.gbs = c.gbs;
  SearchOptions options;
  options.top = c.top;
  options.threads = 2;
  options.prune_by_bound = false;
  const SearchResult full = search_layouts(model, cluster, profile, c.gpus, partial, options);
  options.prune_by_bound = true;
  const SearchResult bounded = search_layouts(model, cluster, profile, c.gpus, partial, options);

  ASSERT_EQ(full.best.size(), static_cast<std::size_t>(c.top));
  ASSERT_EQ(bounded.best.size(), full.best.size());
  for (std::size_t i = 0; i < full.best.size(); ++i) {
    EXPECT_EQ(bounded.best[i].layout.to_spec(), full.best[i].layout.to_spec()) << "rank " << i;
    EXPECT_EQ(bounded.best[i].step_time_s, full.best[i].step_time_s) << "rank " << i;  // bit for bit
    EXPECT_EQ(bounded.best[i].memory.total(), full.best[i].memory.total()) << "rank " << i;
  }
  // Every layout is still checked and its memory computed: the counts are the full ones.
  EXPECT_EQ(bounded.evaluated, full.evaluated);
  EXPECT_EQ(bounded.valid, full.valid);
  EXPECT_EQ(bounded.feasible, full.feasible);
  EXPECT_EQ(full.bounded, 0);
  EXPECT_GT(bounded.bounded, bounded.feasible / 2) << "the bound should skip most fitting layouts";
}

INSTANTIATE_TEST_SUITE_P(
    Presets, SearchBound,
    ::testing::Values(Case{"gpt3-175b", "dgx-a100", 1024, 1536, 5},
                      Case{"llama3-70b", "dgx-h100", 512, 1024, 20},
                      Case{"mixtral-8x7b", "dgx-h100", 256, 512, 5},
                      Case{"narayanan21-1.7b", "dgx-a100", 32, 512, 10},
                      Case{"deepseek-v3", "dgx-h100", 256, 1024, 5}),
    [](const auto& info) {
      std::string name = std::string(info.param.model) + "_" + std::to_string(info.param.gpus);
      for (char& ch : name) if (ch == '-' || ch == '.') ch = '_';
      return name;
    });

// The bound itself: never above the step of a layout differing only in its
// data-parallel sync (GPT-3 175B, tp 8, pp 16, dp 8, every ZeRO-0/1 overlap).
TEST(StepTimeLowerBound, AtMostTheStepOfEveryDataParallelSync) {
  const sim::PresetCatalog catalog(SEXTANT_TEST_CONFIG_DIR);
  const sim::ModelConfig model = catalog.model("gpt3-175b");
  const sim::ClusterConfig cluster = catalog.cluster("dgx-a100");
  const sim::CostProfile profile = catalog.profile("", cluster.gpu.name);
  sim::ParallelLayout l;
  l.tp = 8;
  l.pp = 16;
  l.dp = 8;
  l.gbs = 1536;
  l.sp = true;
  const sim::PipelineSplit split = sim::pipeline_split(model, l);
  const double bound = sim::step_time_lower_bound_s(model, cluster, profile, l, split);
  EXPECT_GT(bound, 0.0);
  for (int zero : {0, 1})
    for (bool grad : {false, true})
      for (bool gather : {false, true}) {
        if (gather && zero == 0) continue;
        l.zero = zero;
        l.overlap_grad_reduce = grad;
        l.overlap_param_gather = gather;
        ASSERT_TRUE(sim::is_valid_layout(model, cluster, 1024, l));
        const sim::SimulationResult r = sim::simulate_analytic(model, cluster, profile, l);
        EXPECT_LE(bound, r.step_time_s) << l.to_spec();
        // What the bound leaves out: the data-parallel sync and the optimizer.
        EXPECT_NEAR(bound, r.step_time_s - r.exposed_dp_s - r.time.optimizer_s, 1e-9 * r.step_time_s);
      }
}

}  // namespace
}  // namespace sextant::search
