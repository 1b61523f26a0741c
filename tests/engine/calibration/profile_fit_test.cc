// The fit of a profile's free parameters (engine/calibration/profile_fit.h)
// on synthetic runs generated from known parameters with the fixture profile.
#include "engine/calibration/profile_fit.h"

#include <gtest/gtest.h>

#include <cmath>

#include "sim/analytic/analytic_model.h"
#include "sim/core/config_error.h"
#include "sim/core/config_loader.h"
#include "sim/core/preset_catalog.h"
#include "tests/support/test_models.h"

namespace sextant::engine::calibration {
namespace {

const std::string kFixture = std::string(SEXTANT_TEST_DATA_DIR) + "/profiles/engine-measured-tiny.yaml";

struct Truth {
  double factor = 1.07;          // kernels 7 % slower than micro-benchmarked
  double step_s = 5e-4;          // 0.5 ms per step
  double microbatch_s = 4e-5;    // 40 µs per micro-batch
};

MeasuredStep run_of(const sim::PresetCatalog& catalog, const std::string& model, int mbs, int gbs,
                    sim::Recompute recompute) {
  MeasuredStep r;
  r.model = catalog.model(model);
  r.model.seq_length = 2048;
  r.layout.mbs = mbs;
  r.layout.gbs = gbs;
  r.layout.recompute = recompute;
  r.layout.sp = false;
  r.layout.overlap_grad_reduce = false;
  return r;
}

// Ten layouts: two models, micro-batch 1-8, recompute none/selective/full, accumulation 1-8.
std::vector<MeasuredStep> synthetic_runs(const sim::PresetCatalog& catalog,
                                         const sim::ClusterConfig& cluster, const Truth& t,
                                         double noise) {
  using R = sim::Recompute;
  const sim::PresetCatalog& c = catalog;
  std::vector<MeasuredStep> runs{
      run_of(c, "gpt-350m", 1, 8, R::kNone),      run_of(c, "gpt-350m", 2, 8, R::kNone),
      run_of(c, "gpt-350m", 4, 4, R::kSelective), run_of(c, "gpt-350m", 8, 8, R::kFull),
      run_of(c, "gpt-350m", 8, 64, R::kNone),     run_of(c, "gpt-1.3b", 1, 4, R::kNone),
      run_of(c, "gpt-1.3b", 2, 2, R::kNone),      run_of(c, "gpt-1.3b", 4, 8, R::kFull),
      run_of(c, "gpt-1.3b", 4, 32, R::kSelective), run_of(c, "gpt-1.3b", 8, 8, R::kFull)};
  sim::CostProfile truth = sim::load_profile_file(kFixture);
  truth.fit = sim::ProfileFit{"", {{"compute_time_factor", t.factor}, {"step_overhead_s", t.step_s},
                                   {"microbatch_overhead_s", t.microbatch_s}}, 0, 0};
  for (std::size_t i = 0; i < runs.size(); ++i) {
    sim::ModelConfig m = runs[i].model;
    m.hidden_dropout = m.attention_dropout = 0;
    const double step = sim::simulate_analytic(m, cluster, truth, runs[i].layout).step_time_s;
    runs[i].measured_s = step * (1 + (i % 2 ? noise : -noise));  // ± noise, alternating
  }
  return runs;
}

TEST(ProfileFit, RecoversTheParametersOfNoiselessRuns) {
  const sim::PresetCatalog catalog(SEXTANT_TEST_CONFIG_DIR);
  const sim::ClusterConfig cluster = catalog.cluster("dgx-h100");
  const Truth t;
  const auto runs = synthetic_runs(catalog, cluster, t, 0.0);
  const ProfileFitResult r = fit_profile(sim::load_profile_file(kFixture), cluster, runs);
  // The prediction is affine in the parameters, so the fit is exact up to rounding.
  EXPECT_NEAR(r.fit.parameter("compute_time_factor", 0), 1.07, 1e-6);
  EXPECT_NEAR(r.fit.parameter("step_overhead_s", 0), 5e-4, 1e-8);
  EXPECT_NEAR(r.fit.parameter("microbatch_overhead_s", 0), 4e-5, 1e-9);
  EXPECT_LT(r.fit.log_residual_sd, 1e-6);
  EXPECT_EQ(r.fit.runs, 10);
}

TEST(ProfileFit, ResidualSdMeasuresTheNoise) {
  const sim::PresetCatalog catalog(SEXTANT_TEST_CONFIG_DIR);
  const sim::ClusterConfig cluster = catalog.cluster("dgx-h100");
  const auto runs = synthetic_runs(catalog, cluster, Truth{}, 0.01);
  const ProfileFitResult r = fit_profile(sim::load_profile_file(kFixture), cluster, runs);
  // ±1 % on every run: the factor stays within 1 %, and the residual sd is
  // about 0.01·sqrt(10 / (10 − 3)) = 0.012 (the fit absorbs a little of the noise).
  EXPECT_NEAR(r.fit.parameter("compute_time_factor", 0), 1.07, 0.011);
  EXPECT_GT(r.fit.log_residual_sd, 0.006);
  EXPECT_LT(r.fit.log_residual_sd, 0.0125);
}

TEST(ProfileFit, HoldsANegativeOverheadAtZero) {
  const sim::PresetCatalog catalog(SEXTANT_TEST_CONFIG_DIR);
  const sim::ClusterConfig cluster = catalog.cluster("dgx-h100");
  // Generated with a step overhead of −2 ms (unphysical): the fit keeps it at 0
  // and refits the factor and the micro-batch overhead instead.
  Truth t;
  t.step_s = -2e-3;
  const auto runs = synthetic_runs(catalog, cluster, t, 0.0);
  const ProfileFitResult r = fit_profile(sim::load_profile_file(kFixture), cluster, runs);
  EXPECT_EQ(r.fit.parameter("step_overhead_s", -1), 0.0);
  EXPECT_GE(r.fit.parameter("microbatch_overhead_s", -1), 0.0);
  EXPECT_LT(r.fit.parameter("compute_time_factor", 0), 1.07);  // absorbs the −2 ms
  EXPECT_GT(r.fit.log_residual_sd, 0.0);
}

TEST(ProfileFit, NeedsThreeRuns) {
  const sim::PresetCatalog catalog(SEXTANT_TEST_CONFIG_DIR);
  const sim::ClusterConfig cluster = catalog.cluster("dgx-h100");
  auto runs = synthetic_runs(catalog, cluster, Truth{}, 0.0);
  runs.resize(2);
  EXPECT_THROW(fit_profile(sim::load_profile_file(kFixture), cluster, runs), sim::ConfigError);
}

// Runs generated with a power cap (sim/compute/power_cap.h) at HFU 0.4: the
// power-cap fit finds it on the 0.001 grid, and predicts every run exactly.
TEST(ProfileFit, PowerCapFitRecoversTheCapOfNoiselessRuns) {
  const sim::PresetCatalog catalog(SEXTANT_TEST_CONFIG_DIR);
  const sim::ClusterConfig cluster = catalog.cluster("dgx-h100");
  auto runs = synthetic_runs(catalog, cluster, Truth{1.0, 0.0, 0.0}, 0.0);
  sim::CostProfile truth = sim::load_profile_file(kFixture);
  truth.fit = sim::ProfileFit{"", {{"power_cap_hfu", 0.4}}, 0, 0};
  int throttled = 0;
  for (MeasuredStep& run : runs) {
    sim::ModelConfig m = run.model;
    m.hidden_dropout = m.attention_dropout = 0;
    const sim::SimulationResult capped = sim::simulate_analytic(m, cluster, truth, run.layout);
    run.measured_s = capped.step_time_s;
    throttled += capped.step_time_s > 1.001 * sim::simulate_analytic(m, cluster, sim::load_profile_file(kFixture),
                                                                     run.layout).step_time_s;
  }
  ASSERT_GE(throttled, 3);  // the cap binds on some runs, or the test could not tell caps apart
  const ProfileFitResult r = fit_power_cap(sim::load_profile_file(kFixture), cluster, runs);
  EXPECT_NEAR(r.fit.parameter("power_cap_hfu", 0), 0.4, 1e-9);
  EXPECT_LT(r.fit.log_residual_sd, 1e-6);
  ASSERT_EQ(r.predicted_s.size(), runs.size());
  for (std::size_t i = 0; i < runs.size(); ++i) EXPECT_NEAR(r.predicted_s[i] / r.measured_s[i], 1.0, 1e-9);
}

TEST(ProfileFit, WritesAFitBlockTheLoaderReadsBack) {
  sim::ProfileFit fit{"runs (10 engine runs)", {{"compute_time_factor", 1.07}, {"step_overhead_s", 5e-4}}, 0.012, 10};
  // The scalar keys with an old fit block in the middle, before `source`.
  std::string text = sextant::testing::kScalarProfileYaml;
  text.insert(text.find("source:"), "fit:\n  data_set: old\n  parameters: {compute_time_factor: 2}\n"
                                   "  log_residual_sd: 0.5\n  runs: 3\n");
  const sim::CostProfile p = sim::load_profile_text(with_fit_block(text, fit), "p.yaml");
  ASSERT_TRUE(p.fit);  // the old block replaced, the rest kept
  EXPECT_EQ(p.fit->data_set, "runs (10 engine runs)");
  EXPECT_DOUBLE_EQ(p.fit->parameter("compute_time_factor", 0), 1.07);
  EXPECT_DOUBLE_EQ(p.fit->log_residual_sd, 0.012);
  EXPECT_EQ(p.source, "test");
}

}  // namespace
}  // namespace sextant::engine::calibration
