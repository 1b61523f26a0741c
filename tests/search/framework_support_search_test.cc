// The search offers only what the named software runs (issue 29, item 14):
// every layout it ranks, for every framework preset, keeps to each key of the
// framework file's `supports:` block.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "search/complete_layout.h"
#include "search/layout_search.h"
#include "sim/core/framework.h"
#include "sim/core/preset_catalog.h"

namespace sextant::search {
namespace {

struct Problem {
  const char* model;
  long gpus;
  int gbs;
};

// A dense model whose 24 layers split evenly over few pipeline sizes, and a
// MoE model (experts to split) on one node.
constexpr Problem kProblems[] = {{"narayanan21-1.7b", 32, 512}, {"moe-mixtral-tiny", 8, 64}};

class FrameworkSupportSearch : public ::testing::TestWithParam<const char*> {};

TEST_P(FrameworkSupportSearch, OffersOnlySupportedValues) {
  const sim::PresetCatalog catalog(SEXTANT_TEST_CONFIG_DIR);
  const sim::Framework f = catalog.framework(GetParam());
  const sim::FrameworkSupport& s = f.supports;
  for (const Problem& problem : kProblems) {
    const sim::ModelConfig model = catalog.model(problem.model);
    const sim::ClusterConfig cluster = catalog.cluster("dgx-a100");
    const sim::CostProfile profile = sim::with_framework(catalog.profile("", cluster.gpu.name), f);
    sim::PartialLayout partial;
    partial.gbs = problem.gbs;
    sim::restrict_to_framework(partial, f, "--layout");
    SearchOptions options;
    options.keep_all = true;
    options.require_memory_fit = false;
    options.constraints.allow_fp8 = true;  // offered only where the software runs it
    options.threads = 2;
    const SearchResult r = search_layouts(model, cluster, profile, problem.gpus, partial, options);
    ASSERT_FALSE(r.all.empty()) << problem.model;
    for (const sim::SimulationResult& result : r.all) {
      const sim::ParallelLayout& l = result.layout;
      const std::string what = std::string(GetParam()) + " " + problem.model + ": " + l.to_spec();
      EXPECT_TRUE(s.runs(l.schedule)) << what << " (schedules)";
      EXPECT_TRUE(s.runs(l.precision)) << what << " (precisions)";
      EXPECT_LE(l.zero, s.max_zero(l.pp)) << what << " (" << s.max_zero_key(l.pp) << ")";
      if (l.zero == 3) EXPECT_TRUE(s.runs(l.fsdp)) << what << " (fsdp)";
      if (!s.context_parallel) EXPECT_EQ(l.cp, 1) << what << " (context_parallel)";
      if (!s.expert_parallel) EXPECT_TRUE(l.ep == 1 && l.etp == 1) << what << " (expert_parallel)";
      if (!s.uneven_pipeline_split) {
        EXPECT_TRUE(l.first_stage_layers == 0 && l.last_stage_layers == 0 && !l.embedding_in_split &&
                    !l.loss_in_split && l.pp_layout.empty())
            << what << " (uneven_pipeline_split)";
      }
      if (!s.sequence_parallel) EXPECT_FALSE(l.sp) << what << " (sequence_parallel)";
      if (!s.selective_recompute) EXPECT_NE(l.recompute, sim::Recompute::kSelective) << what;
      if (!s.flash_attention) EXPECT_EQ(l.attention, sim::AttentionKernel::kUnfused) << what;
      if (!s.overlap_grad_reduce) EXPECT_FALSE(l.overlap_grad_reduce) << what;
      if (!s.overlap_param_gather) EXPECT_FALSE(l.overlap_param_gather) << what;
      if (!s.tp_comm_overlap) EXPECT_FALSE(l.tp_comm_overlap) << what;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Presets, FrameworkSupportSearch,
                         ::testing::Values("megatron-lm-2021", "megatron-lm-2022", "deepspeed-pipe-2021",
                                           "megatron-core-0.8", "nemo-24.07", "megatron-core-0.12"),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& c : name) if (c == '-' || c == '.') c = '_';
                           return name;
                         });

// The case: Megatron-LM of 2021 ran no ZeRO and no FSDP, so
// tp=1,pp=1,dp=32 completes with zero=0 (it was zero=1, and zero=3 with
// Megatron-FSDP before that).
TEST(FrameworkSupportCompletion, MegatronLm2021CompletesWithoutZero) {
  const sim::PresetCatalog catalog(SEXTANT_TEST_CONFIG_DIR);
  const sim::Framework f = catalog.framework("megatron-lm-2021");
  const sim::ModelConfig model = catalog.model("narayanan21-1.7b");
  const sim::ClusterConfig cluster = catalog.cluster("dgx-a100");
  const sim::CostProfile profile = sim::with_framework(catalog.profile("", cluster.gpu.name), f);
  sim::PartialLayout partial = sim::parse_layout("tp=1,pp=1,dp=32,gbs=512");
  sim::restrict_to_framework(partial, f, "--layout");
  const Completion c = complete_layout(model, cluster, profile, 32, partial);
  ASSERT_TRUE(c.best) << "no completion";
  EXPECT_EQ(c.best->layout.zero, 0);
  EXPECT_FALSE(c.best->layout.overlap_param_gather);
  EXPECT_EQ(c.best->layout.to_spec().find("fsdp"), std::string::npos) << c.best->layout.to_spec();
  EXPECT_EQ(c.best->layout.attention, sim::AttentionKernel::kUnfused);
  EXPECT_EQ(c.best->layout.precision, sim::Precision::kBf16);  // the default, which it runs
}

}  // namespace
}  // namespace sextant::search
