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
    "  schedules: [1f1b]\n"                       // 8
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
  EXPECT_FALSE(f.supports.runs(Schedule::kInterleaved));
  EXPECT_TRUE(f.supports.runs(Schedule::kOneFOneB));
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
  EXPECT_FALSE(ds.supports.runs(Schedule::kInterleaved));
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
              "--layout: framework ds cannot run vpp=3 (needs schedule=1f1b-interleaved) (supports.schedules), "
              "recompute=selective (supports.selective_recompute), overlap_grad_reduce=1 "
              "(supports.overlap_grad_reduce), zero=2 with pp=4 (at most zero=1) "
              "(supports.max_zero_with_pipeline) (configs/frameworks/ds.yaml)");
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
              "(supports.overlap_grad_reduce) (configs/frameworks/ds.yaml)");
  }
}

// The lists and limits of `supports:` (issue 29, item 14).
TEST(LoadFramework, ReadsSupportedValueLists) {
  const std::string text =
      "name: old\n"
      "description: test\n"
      "supports:\n"
      "  schedules: [1f1b, gpipe]\n"
      "  precisions: [fp16]\n"
      "  fsdp: []\n"
      "  max_zero_without_pipeline: 1\n"
      "  max_zero_with_pipeline: 0\n"
      "  context_parallel: false\n"
      "  expert_parallel: false\n"
      "  uneven_pipeline_split: false\n"
      "source: test\n";
  const Framework f = load_framework_text(text, "old.yaml");
  EXPECT_EQ(f.supports.schedules, (std::vector<Schedule>{Schedule::kOneFOneB, Schedule::kGpipe}));
  EXPECT_EQ(f.supports.precisions, (std::vector<Precision>{Precision::kFp16}));
  EXPECT_TRUE(f.supports.fsdp.empty());
  EXPECT_EQ(f.supports.max_zero(1), 1);
  EXPECT_EQ(f.supports.max_zero(4), 0);
  EXPECT_FALSE(f.supports.context_parallel);
  EXPECT_FALSE(f.supports.expert_parallel);
  EXPECT_FALSE(f.supports.uneven_pipeline_split);
}

TEST(LoadFramework, UnknownListValueNamesFileLineKeyAndAcceptedValues) {
  const std::string text =
      "name: old\n"                      // 1
      "description: test\n"              // 2
      "supports:\n"                      // 3
      "  schedules: [1f1b, pipedream]\n"  // 4
      "  fsdp: megatron-fsdp\n"          // 5
      "source: test\n";
  try {
    load_framework_text(text, "old.yaml");
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    ASSERT_EQ(e.diagnostics().size(), 2u);
    EXPECT_EQ(e.diagnostics()[0].to_string(),
              "old.yaml:4:14: supports.schedules: got 'pipedream'; accepted: 1f1b, 1f1b-interleaved, gpipe, zb-h1");
    EXPECT_EQ(e.diagnostics()[1].to_string(),
              "old.yaml:5:9: supports.fsdp: expected a list, e.g. [megatron-fsdp]; accepted values: "
              "megatron-fsdp, fsdp2, deepspeed-zero3");
  }
}

TEST(LoadFramework, TheOldInterleavedKeyPointsToSchedules) {
  const std::string text =
      "name: old\ndescription: test\nsupports:\n  interleaved_schedule: false\nsource: test\n";
  EXPECT_THROW(load_framework_text(text, "old.yaml"), ConfigError);
}

// Megatron-LM of 2021: no distributed optimizer at any pipeline size, so a
// layout without a pipeline and zero left open gets zero 0, and zero 1 is
// refused naming the key (issue 29, item 14).
TEST(RestrictToFramework, MegatronLm2021RunsNoZeroWithoutAPipeline) {
  const PresetCatalog catalog(SEXTANT_TEST_CONFIG_DIR);
  const Framework f = catalog.framework("megatron-lm-2021");
  PartialLayout open;
  open.pp = 1;
  restrict_to_framework(open, f, "--layout");
  EXPECT_EQ(open.zero, 0);
  EXPECT_EQ(open.cp, 1);
  EXPECT_EQ(open.ep, 1);
  EXPECT_EQ(open.first_stage_layers, 0);  // the even split, given
  PartialLayout sharded = parse_layout("tp=1,pp=1,dp=32,gbs=512,zero=1");
  try {
    restrict_to_framework(sharded, f, "--layout");
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.diagnostics()[0].to_string(),
              "--layout: framework megatron-lm-2021 cannot run zero=1 with pp=1 (at most zero=0) "
              "(supports.max_zero_without_pipeline) (configs/frameworks/megatron-lm-2021.yaml)");
  }
}

// Each refusal names its key.
TEST(RestrictToFramework, EachUnsupportedValueNamesItsKey) {
  const PresetCatalog catalog(SEXTANT_TEST_CONFIG_DIR);
  const Framework f = catalog.framework("megatron-lm-2021");
  const std::pair<const char*, const char*> cases[] = {
      {"schedule=gpipe", "supports.schedules"},
      {"precision=fp8", "supports.precisions"},
      {"zero=3,pp=1", "supports.fsdp"},
      {"fsdp=fsdp2", "supports.fsdp"},
      {"cp=2", "supports.context_parallel"},
      {"ep=2", "supports.expert_parallel"},
      {"pp=4,first_stage_layers=4", "supports.uneven_pipeline_split"},
      {"pp=2,zero=1", "supports.max_zero_with_pipeline"},
      {"sp=1", "supports.sequence_parallel"},
  };
  for (const auto& [spec, key] : cases) {
    PartialLayout l = parse_layout(spec);
    try {
      restrict_to_framework(l, f, "--layout");
      ADD_FAILURE() << spec << " was accepted";
    } catch (const ConfigError& e) {
      EXPECT_NE(e.diagnostics()[0].message.find(key), std::string::npos) << spec << ": " << e.diagnostics()[0].message;
    }
  }
}

}  // namespace
}  // namespace sextant::sim
