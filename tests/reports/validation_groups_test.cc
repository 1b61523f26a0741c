#include "reports/validation_groups.h"

#include <gtest/gtest.h>

namespace sextant::reports {
namespace {

CaseOutcome outcome(std::string source_group, std::string cluster, sim::Precision precision,
                    double error, bool predicted = true) {
  CaseOutcome o;
  o.input.source_group = std::move(source_group);
  o.input.cluster_preset = std::move(cluster);
  o.input.layout.precision = precision;
  if (predicted) o.predicted = sim::SimulationResult{};
  o.relative_error = error;
  return o;
}

TEST(SourceGroup, FirstTwoWordsWithoutQuotesOrCommas) {
  EXPECT_EQ(source_group("NVIDIA/NeMo docs/source/performance/performance_summary.md at commit"),
            "NVIDIA/NeMo docs/source/performance/performance_summary.md");
  EXPECT_EQ(source_group("Narayanan et al., 'Efficient Large-Scale ...'"), "Narayanan et al.");
  EXPECT_EQ(source_group(""), "(no source)");
}

// Three cases: two NeMo fp8 (errors +10 %, −20 %), one Megatron bf16 (+2 %)
// that was not predicted. Medians by linear interpolation: (0.10 + 0.20)/2 = 0.15.
TEST(SummarizeByGroup, OneRowPerValueOfEachDimension) {
  ValidationSummary s;
  s.outcomes.push_back(outcome("NeMo", "dgx-h100", sim::Precision::kFp8, 0.10));
  s.outcomes.push_back(outcome("NeMo", "dgx-h100", sim::Precision::kFp8, -0.20));
  s.outcomes.push_back(outcome("Megatron", "dgx-a100", sim::Precision::kBf16, 0.02, false));
  const std::vector<GroupSummary> groups = summarize_by_group(s);
  // source: NeMo, Megatron; gpu: dgx-h100, dgx-a100; precision: fp8, bf16; model: dense.
  ASSERT_EQ(groups.size(), 7u);
  EXPECT_EQ(groups[0].dimension, "source");
  EXPECT_EQ(groups[0].name, "NeMo");
  EXPECT_EQ(groups[0].cases, 2);
  EXPECT_EQ(groups[0].predicted, 2);
  EXPECT_NEAR(groups[0].median_abs_error, 0.15, 1e-12);
  EXPECT_NEAR(groups[0].worst_abs_error, 0.20, 1e-12);
  EXPECT_EQ(groups[1].name, "Megatron");
  EXPECT_EQ(groups[1].predicted, 0);
  EXPECT_EQ(groups[4].dimension, "precision");
  EXPECT_EQ(groups[4].name, "fp8");
  EXPECT_EQ(groups[6].dimension, "model");
  EXPECT_EQ(groups[6].name, "dense");
  EXPECT_EQ(groups[6].cases, 3);
  EXPECT_EQ(groups[6].predicted, 2);
}

}  // namespace
}  // namespace sextant::reports
