#include "reports/validation_report.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "reports/validation_cases.h"
#include "sim/core/preset_catalog.h"

namespace sextant::reports {
namespace {

const std::string kCases = std::string(SEXTANT_TEST_SOURCE_DIR) + "/validation/dev_cases.yaml";

TEST(ValidationCases, ReadsPublishedLayoutAndLeavesUnknownKnobsOpen) {
  const std::vector<ValidationCase> cases = load_validation_cases(kCases);
  ASSERT_EQ(cases.size(), 34u);
  const ValidationCase& h100 = cases.front();
  EXPECT_EQ(h100.id, "megatron_h100_weak_1.7B");
  EXPECT_EQ(h100.cluster_preset, "dgx-h100");
  EXPECT_EQ(h100.num_gpus, 48);
  EXPECT_EQ(h100.model.hidden_size, 2048);
  EXPECT_EQ(*h100.layout.tp, 1);
  EXPECT_EQ(*h100.layout.zero, 1);  // "distributed optimizer"
  EXPECT_FALSE(h100.layout.mbs.has_value());
  EXPECT_FALSE(h100.layout.recompute.has_value());
  EXPECT_TRUE(*h100.layout.tp_comm_overlap);  // the notes quote --tp-comm-overlap
  EXPECT_EQ(*h100.layout.attention, sim::AttentionKernel::kFlash);
  EXPECT_DOUBLE_EQ(h100.measured_step_time_s, 0.4519);
  EXPECT_EQ(h100.model.activation, sim::Activation::kGelu);  // Megatron-LM's GPT
  EXPECT_EQ(h100.source_group, "NVIDIA/Megatron-LM README.md");
  const ValidationCase& a100 = cases[18];
  EXPECT_EQ(a100.cluster_preset, "dgx-a100");
  EXPECT_EQ(*a100.layout.recompute, sim::Recompute::kFull);
  EXPECT_EQ(*a100.layout.attention, sim::AttentionKernel::kUnfused);  // published 2021
  EXPECT_EQ(*a100.layout.precision, sim::Precision::kFp16);
  EXPECT_FALSE(*a100.layout.overlap_grad_reduce);
}

// NeMo's recipes: the case says zero: null and names no flags; the recipe
// (nemo/collections/llm/recipes/llama3_70b.py) runs the distributed optimizer
// with all three overlaps, and the id names a Llama (SwiGLU, RMSNorm, RoPE).
TEST(ValidationCases, NemoCasesGetTheRecipeAndTheArchitecture) {
  const std::vector<ValidationCase> cases = load_validation_cases(kCases);
  const auto it = std::find_if(cases.begin(), cases.end(), [](const ValidationCase& c) {
    return c.id == "nemo2407_LLAMA3-70B_64gpus";
  });
  ASSERT_NE(it, cases.end());
  EXPECT_EQ(*it->layout.zero, 1);
  EXPECT_TRUE(*it->layout.overlap_grad_reduce);
  EXPECT_TRUE(*it->layout.overlap_param_gather);
  EXPECT_TRUE(*it->layout.tp_comm_overlap);  // tp = 4 with sequence parallelism
  EXPECT_EQ(*it->layout.precision, sim::Precision::kFp8);
  EXPECT_FALSE(*it->layout.grad_reduce_in_fp32);  // NeMo's performance scripts under FP8
  EXPECT_EQ(it->model.activation, sim::Activation::kSwiglu);
  EXPECT_EQ(it->model.normalization, sim::Normalization::kRmsNorm);
  EXPECT_EQ(it->model.position_embedding, sim::PositionEmbedding::kRope);
  EXPECT_FALSE(it->model.add_bias_linear);
  EXPECT_EQ(it->source_group, "NVIDIA/NeMo docs/source/performance/performance_summary.md");
  const auto nemotron = std::find_if(cases.begin(), cases.end(), [](const ValidationCase& c) {
    return c.id == "nemo2407_Nemotron-8B_64gpus";
  });
  ASSERT_NE(nemotron, cases.end());
  EXPECT_EQ(nemotron->model.activation, sim::Activation::kSquaredRelu);
  EXPECT_EQ(nemotron->model.mlp_input_projections(), 1);  // not gated
}

// Issue 11's targets on the 34 development cases: every case answered (uneven
// pipeline splits included), median |error| <= 5 % and worst <= 15 % with both
// engines (today 3.6 % / 9.7 % analytic, 3.1 % / 10.2 % event; the worst is
// nemo2407_GPT3-175B_512gpus). The three megatron_examples_llama_* rows run
// configs/frameworks/megatron-core-0.12.yaml (fused cross entropy and a
// sustained fraction fitted on those three). The frameworks' sustained
// fractions are fitted on these cases (configs/frameworks), so this guards
// against regressions, not against overfitting.
TEST(ValidationReport, DevCasesWithinTargets) {
  const sim::PresetCatalog catalog(SEXTANT_TEST_CONFIG_DIR);
  const auto cases = load_validation_cases(kCases);
  for (const PredictionEngine engine : {PredictionEngine::kAnalytic, PredictionEngine::kEvent}) {
    const ValidationSummary s = run_validation(cases, catalog, "", engine);
    EXPECT_EQ(s.predicted, 34);
    EXPECT_LE(s.median_abs_error, 0.05);
    EXPECT_LE(s.worst_abs_error, 0.15) << "worst case: " << s.worst_case_id;
  }
}

// The event engine plays what the analytic model sums: on the dev cases it is
// at least as good in the median (3.1 % against 3.6 %).
TEST(ValidationReport, EventEngineMedianAtLeastAsGoodAsAnalytic) {
  const sim::PresetCatalog catalog(SEXTANT_TEST_CONFIG_DIR);
  const auto cases = load_validation_cases(kCases);
  const ValidationSummary analytic = run_validation(cases, catalog, "");
  const ValidationSummary event =
      run_validation(cases, catalog, "", PredictionEngine::kEvent);
  EXPECT_EQ(event.predicted, 34);
  EXPECT_LE(event.median_abs_error, analytic.median_abs_error);
}

// A case's source picks its framework, and the search completes the layout
// only with what that software ran (tests/data/validation: synthetic layouts,
// placeholder times). MT-NLG: DeepSpeed's pipeline engine, so no interleaving,
// no flash attention (a 2022 source would default to flash), no overlap;
// Korthikanti et al.: sequence parallelism and selective recompute of
// the unfused attention core.
TEST(ValidationReport, SourcesPickTheirFrameworksSupports) {
  const sim::PresetCatalog catalog(SEXTANT_TEST_CONFIG_DIR);
  const auto cases = load_validation_cases(std::string(SEXTANT_TEST_DATA_DIR) +
                                           "/validation/framework_mapping_cases.yaml");
  ASSERT_EQ(cases.size(), 2u);
  EXPECT_EQ(cases[0].framework, "deepspeed-pipe-2021");
  EXPECT_EQ(cases[1].framework, "megatron-lm-2022");
  for (const PredictionEngine engine : {PredictionEngine::kAnalytic, PredictionEngine::kEvent}) {
    const ValidationSummary s = run_validation(cases, catalog, "", engine);
    ASSERT_EQ(s.predicted, 2);
    const sim::ParallelLayout& ds = s.outcomes[0].predicted->layout;
    EXPECT_EQ(ds.schedule, sim::Schedule::kOneFOneB);
    EXPECT_EQ(ds.vpp, 1);
    EXPECT_EQ(ds.attention, sim::AttentionKernel::kUnfused);
    EXPECT_FALSE(ds.sp);
    EXPECT_FALSE(ds.overlap_grad_reduce);
    EXPECT_EQ(ds.zero, 0);  // not stated: the case reader's default (within DeepSpeed's 1)
    const sim::ParallelLayout& mlm = s.outcomes[1].predicted->layout;
    EXPECT_EQ(mlm.attention, sim::AttentionKernel::kUnfused);
    EXPECT_TRUE(mlm.sp);
    EXPECT_EQ(mlm.recompute, sim::Recompute::kSelective);
    EXPECT_FALSE(mlm.tp_comm_overlap);
  }
}

TEST(ValidationReport, Percentile) {
  EXPECT_DOUBLE_EQ(percentile({3, 1, 2}, 0.5), 2);
  EXPECT_DOUBLE_EQ(percentile({1, 2, 3, 4}, 0.5), 2.5);
  EXPECT_DOUBLE_EQ(percentile({0, 10}, 0.9), 9);
  EXPECT_DOUBLE_EQ(percentile({}, 0.5), 0);
}

}  // namespace
}  // namespace sextant::reports
