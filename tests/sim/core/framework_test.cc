#include "sim/core/framework.h"

#include <gtest/gtest.h>

#include "sim/core/config_error.h"
#include "sim/core/config_loader.h"
#include "sim/core/preset_catalog.h"

namespace sextant::sim {
namespace {

const std::string kDeepSpeedLike =
    "name: ds\n"                                  // 1
    "description: test\n"                         // 2
    "behaviour:\n"                                // 3
    "  pipeline_exchange: sequential\n"           // 4
    "  gradient_accumulation: separate-pass\n"    // 5
    "  cross_entropy: fused\n"                    // 6
    "supports:\n"                                 // 7
    "  interleaved_schedule: false\n"             // 8
    "  flash_attention: false\n"                  // 9
    "  overlap_grad_reduce: false\n"              // 10
    "  max_zero_with_pipeline: 1\n"               // 11
    "  selective_recompute: false\n"              // 12
    "source: test\n";                             // 13

TEST(LoadFramework, ReadsBehaviourAndSupport) {
  const Framework f = load_framework_text(kDeepSpeedLike, "ds.yaml");
  EXPECT_FALSE(f.sustained_compute_fraction.has_value());  // none given: the profile's own
  EXPECT_EQ(f.behaviour.pipeline_exchange, PipelineExchange::kSequential);
  EXPECT_EQ(f.behaviour.gradient_accumulation, GradientAccumulation::kSeparatePass);
  EXPECT_EQ(f.behaviour.cross_entropy, CrossEntropyKernel::kFused);
  EXPECT_FALSE(f.supports.interleaved_schedule);
  EXPECT_FALSE(f.supports.flash_attention);
  EXPECT_FALSE(f.supports.overlap_grad_reduce);
  EXPECT_TRUE(f.supports.sequence_parallel);  // not named: supported
  EXPECT_EQ(f.supports.max_zero_with_pipeline, 1);
  EXPECT_FALSE(f.supports.selective_recompute);
}

TEST(LoadFramework, BadBehaviourNamesFileLineAndAcceptedValues) {
  std::string text = kDeepSpeedLike;
  text.replace(text.find("sequential"), 10, "async");
  try {
    load_framework_text(text, "ds.yaml");
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    ASSERT_EQ(e.diagnostics().size(), 1u);
    EXPECT_EQ(e.diagnostics()[0].to_string(),
              "ds.yaml:4:22: behaviour.pipeline_exchange: got 'async'; accepted: batched, "
              "sequential");
  }
}

TEST(LoadFramework, UnknownSupportKeyIsRefused) {
  std::string text = kDeepSpeedLike;
  text.replace(text.find("  max_zero"), 0, "  zero_bubble: true\n");
  EXPECT_THROW(load_framework_text(text, "ds.yaml"), ConfigError);
}

// Every preset under configs/frameworks loads, and each names what it is.
TEST(LoadFramework, PresetsLoad) {
  const PresetCatalog catalog(SEXTANT_TEST_CONFIG_DIR);
  const Framework ds = catalog.framework("deepspeed-pipe-2021");
  EXPECT_EQ(ds.behaviour.pipeline_exchange, PipelineExchange::kSequential);
  EXPECT_FALSE(ds.supports.interleaved_schedule);
  EXPECT_FALSE(ds.sustained_compute_fraction.has_value());
  const Framework mlm22 = catalog.framework("megatron-lm-2022");
  EXPECT_TRUE(mlm22.supports.sequence_parallel);
  EXPECT_FALSE(mlm22.supports.flash_attention);
  EXPECT_DOUBLE_EQ(*mlm22.sustained_compute_fraction, 0.87);  // borrowed from 2021's fit
  const Framework mcore12 = catalog.framework("megatron-core-0.12");
  EXPECT_EQ(mcore12.behaviour.cross_entropy, CrossEntropyKernel::kFused);
  EXPECT_DOUBLE_EQ(*mcore12.sustained_compute_fraction, 0.88);
}

TEST(WithFramework, KeepsTheProfilesFractionWhenTheFrameworkHasNone) {
  CostProfile p;
  p.sustained_compute_fraction = 0.71;
  Framework f;
  f.name = "ds";
  f.behaviour.pipeline_exchange = PipelineExchange::kSequential;
  const CostProfile out = with_framework(p, f);
  EXPECT_DOUBLE_EQ(out.sustained_compute_fraction, 0.71);
  EXPECT_EQ(out.behaviour.pipeline_exchange, PipelineExchange::kSequential);
  EXPECT_TRUE(out.supports.selective_recompute);
  EXPECT_EQ(out.framework, "ds");
  f.sustained_compute_fraction = 0.87;
  EXPECT_DOUBLE_EQ(with_framework(p, f).sustained_compute_fraction, 0.87);
}

// Knobs left open get the one value the software supports.
TEST(RestrictToFramework, ClosesOpenKnobs) {
  const Framework f = load_framework_text(kDeepSpeedLike, "ds.yaml");
  PartialLayout l;
  l.pp = 4;
  restrict_to_framework(l, f, "--layout");
  EXPECT_EQ(l.schedule, Schedule::kOneFOneB);
  EXPECT_EQ(l.vpp, 1);
  EXPECT_EQ(l.attention, AttentionKernel::kUnfused);
  EXPECT_EQ(l.overlap_grad_reduce, false);
  EXPECT_EQ(l.zero, 1);                      // pp 4: the highest stage it runs with a pipeline
  EXPECT_FALSE(l.sp.has_value());           // supported: still the search's
  EXPECT_FALSE(l.overlap_param_gather.has_value());
}

// Knobs given a value the software cannot run: all named in one message.
TEST(RestrictToFramework, RefusesWhatTheSoftwareCannotRun) {
  const Framework f = load_framework_text(kDeepSpeedLike, "ds.yaml");
  PartialLayout l;
  l.pp = 4;
  l.vpp = 3;
  l.zero = 2;
  l.overlap_grad_reduce = true;
  l.recompute = Recompute::kSelective;
  try {
    restrict_to_framework(l, f, "--layout");
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.diagnostics()[0].to_string(),
              "--layout: framework ds cannot run vpp=3, recompute=selective, overlap_grad_reduce=1, "
              "zero=2 with pp=4 (at most zero=1) (configs/frameworks/ds.yaml, supports:)");
  }
}

// ZeRO-3 is modelled with its gathers and reduce-scatters overlapping
// compute: software that cannot overlap gradient reduction is refused it.
TEST(RestrictToFramework, RefusesZeroThreeWhereTheSoftwareCannotOverlap) {
  const Framework f = load_framework_text(kDeepSpeedLike, "ds.yaml");
  PartialLayout l;
  l.zero = 3;
  try {
    restrict_to_framework(l, f, "--layout");
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.diagnostics()[0].to_string(),
              "--layout: framework ds cannot run zero=3 (modelled with its weight all-gathers and gradient "
              "reduce-scatters overlapping compute, which this software does not do) "
              "(configs/frameworks/ds.yaml, supports:)");
  }
}

}  // namespace
}  // namespace sextant::sim
