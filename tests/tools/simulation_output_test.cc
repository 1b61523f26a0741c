#include "tools/simulation_output.h"

#include <gtest/gtest.h>

#include <set>

#include "tests/support/test_models.h"

namespace sextant::tools {
namespace {

std::set<std::string> keys(const nlohmann::json& object) {
  std::set<std::string> out;
  for (auto it = object.begin(); it != object.end(); ++it) out.insert(it.key());
  return out;
}

// DESIGN.md, "JSON of simulate --format json": these fields may not be renamed.
TEST(SimulationJson, HasEveryContractField) {
  sim::SimulationResult r;
  r.layout.tp = 8;
  r.layout.pp = 16;
  r.layout.dp = 12;
  r.layout.gbs = 1536;
  r.layout.zero = 1;
  r.step_time_s = 10;
  const nlohmann::json j = simulation_json({"gpt3-175b", "dgx-a100", "a100", 1536, 80e9}, r);
  const std::set<std::string> top = keys(j);
  for (const char* key : {"model", "cluster", "gpus", "layout", "step_time_s", "tokens_per_s",
                          "tokens_per_s_per_gpu", "model_flops_per_step",
                          "hardware_flops_per_step", "mfu", "hfu", "memory_bytes_per_gpu",
                          "fits_memory", "time_breakdown_s"}) {
    EXPECT_TRUE(top.count(key)) << key;
  }
  const std::set<std::string> layout = keys(j["layout"]);
  for (const char* key : {"tp", "pp", "vpp", "dp", "cp", "ep", "etp", "mbs", "gbs", "sp",
                          "recompute", "dist_opt", "zero", "schedule", "precision"}) {
    EXPECT_TRUE(layout.count(key)) << key;
  }
  EXPECT_EQ(keys(j["memory_bytes_per_gpu"]),
            (std::set<std::string>{"total", "parameters", "gradients", "optimizer_states",
                                   "activations", "other", "runtime", "runtime_parts"}));
  EXPECT_EQ(keys(j["time_breakdown_s"]),
            (std::set<std::string>{"compute", "exposed_communication", "pipeline_bubble",
                                   "optimizer"}));
  EXPECT_EQ(j["layout"]["sp"], false);
  EXPECT_EQ(j["layout"]["dist_opt"], true);
  EXPECT_EQ(j["layout"]["schedule"], "1f1b");
  EXPECT_EQ(j["gpus"], 1536);
}

TEST(SimulationJson, NamesTheProfileAndGivesTheFitsInterval) {
  sim::SimulationResult r;
  r.step_time_s = 0.2;
  sim::CostProfile profile;
  profile.name = "h100-sxm-80gb-measured";
  profile.software = sim::Software::kSextantEngine;
  SimulationContext c{"gpt-1.3b", "dgx-h100", "h100", 1, 80e9, "analytic"};
  c.profile = &profile;
  nlohmann::json j = simulation_json(c, r);
  EXPECT_EQ(j["profile"], (nlohmann::json{{"name", "h100-sxm-80gb-measured"},
                                             {"software", "sextant-engine"},
                                             {"framework", nullptr}}));
  EXPECT_FALSE(j.contains("step_time_interval_s"));  // no fit, no interval
  EXPECT_NE(simulation_table(c, r).find("profile: h100-sxm-80gb-measured (sextant-engine)"),
            std::string::npos);
  // A fit with sd 0.03 over 10 runs of 3 parameters: t(0.95, 7) = 1.8946, half-width
  // 0.056838 in log: 0.2·e^∓0.056838 = [0.188950, 0.211697] s.
  profile.fit = sim::ProfileFit{"runs", {{"compute_time_factor", 1.1}, {"step_overhead_s", 0},
                                         {"microbatch_overhead_s", 0}}, 0.03, 10};
  j = simulation_json(c, r);
  ASSERT_TRUE(j.contains("step_time_interval_s"));
  EXPECT_NEAR(j["step_time_interval_s"][0].get<double>(), 0.188950, 1e-6);
  EXPECT_NEAR(j["step_time_interval_s"][1].get<double>(), 0.211697, 1e-6);
  EXPECT_EQ(j["step_time_interval_coverage"], 0.9);
  EXPECT_NE(simulation_table(c, r).find("200.00 ms ± 11.37 ms (90.0 % interval 188.95 ms - 211.70 ms)"),
            std::string::npos) << simulation_table(c, r);
}

TEST(SimulationOutput, FormatsUnits) {
  EXPECT_EQ(format_seconds(1.5), "1.500 s");
  EXPECT_EQ(format_seconds(0.0123), "12.30 ms");
  EXPECT_EQ(format_seconds(4.5e-5), "45.0 us");
  EXPECT_EQ(format_gib(1024.0 * 1024 * 1024 * 80), "80.00 GiB");
}

// RFC 4180, Sec. 2: fields with a comma, quote or line break are quoted, quotes doubled.
TEST(SimulationOutput, CsvFieldsAreQuotedPerRfc4180) {
  EXPECT_EQ(csv_field("gpt3-175b"), "gpt3-175b");
  EXPECT_EQ(csv_field("a,b"), "\"a,b\"");
  EXPECT_EQ(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
  EXPECT_EQ(csv_field("two\nlines"), "\"two\nlines\"");
}

// GPT-3 175B, one token: Megatron 96·(24h² + 4sh) + 2hV = 358,814,318,592 FLOPs,
// causal 96·(24h² + 2sh) + 2hV = 353,982,480,384 (h 12288, s 2048, V 51200):
// the fraction is 0.98653; the backward's factor 3 cancels.
TEST(SimulationOutput, CausalMfuScalesByTheCausalFlopsFraction) {
  const double fraction = causal_flops_fraction(sextant::testing::gpt3_175b());
  EXPECT_NEAR(fraction, 353982480384.0 / 358814318592.0, 1e-12);
  sim::SimulationResult r;
  r.mfu = 0.5;
  r.step_time_s = 1;
  SimulationContext c{"gpt3-175b", "dgx-a100", "a100", 8, 80e9};
  c.causal_flops_fraction = fraction;
  EXPECT_DOUBLE_EQ(reported_mfu(c, r), 0.5);
  const nlohmann::json megatron = simulation_json(c, r);
  EXPECT_EQ(megatron["mfu_convention"], "megatron");
  EXPECT_DOUBLE_EQ(megatron["mfu_causal"].get<double>(), 0.5 * fraction);
  c.mfu_convention = MfuConvention::kCausal;
  EXPECT_DOUBLE_EQ(reported_mfu(c, r), 0.5 * fraction);
  EXPECT_DOUBLE_EQ(simulation_json(c, r)["mfu"].get<double>(), 0.5 * fraction);
  EXPECT_DOUBLE_EQ(simulation_json(c, r)["mfu_megatron"].get<double>(), 0.5);
}

// "largest non-compute cost: compute" read as a contradiction.
TEST(SimulationOutput, ComputeBoundStepSaysNoNonComputeCostStandsOut) {
  sim::SimulationResult r;
  r.step_time_s = 2;
  r.time.compute_s = 1.9;
  r.limiter = sim::Limiter::kCompute;
  const std::string table = simulation_table({"m", "c", "g", 8, 80e9}, r);
  EXPECT_NE(table.find("  largest non-compute cost none (compute is 95.0 % of the step)\n"),
            std::string::npos)
      << table;
}

}  // namespace
}  // namespace sextant::tools
