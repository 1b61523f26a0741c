// The analytical and the event-driven engine model the same thing (one cost
// model, one Plan), so their step times must agree within a stated bound: on
// every dev-case layout (validation/dev_cases.yaml, unpublished knobs completed
// by the search as `sextant validate` completes them; memory fit not required,
// so the FP8 cases refused for memory are compared too) and on a sample of the
// generated grid. A failure names the case and the layout.
//
// The bounds: kDevCaseAgreement, kGridAgreement. What separates the engines: the analytical
// bubble is (Σ stages − slowest)/v, the event engine plays chunks whose first
// and last carry the embedding and output layer (heavier than the rest at large
// v); FSDP's closed form ignores how far a deep prefetch borrows link time across
// the forward/backward boundary (sim/analytic/fsdp_exposure.h).
#include <cmath>

#include <gtest/gtest.h>

#include "reports/validation_cases.h"
#include "search/complete_layout.h"
#include "sim/analytic/analytic_model.h"
#include "sim/comm/fsdp_comm.h"
#include "sim/comm/parallel_comm.h"
#include "sim/memory/parameter_count.h"
#include "sim/core/preset_catalog.h"
#include "sim/event/event_simulation.h"
#include "tests/sim/invariants/invariant_grid.h"

namespace sextant::testing {
namespace {

/// |event / analytic − 1| allowed on the dev-case layouts. Measured when this
/// suite was written: at most 2.9 % (megatron_h100_weak_32B; 33 layouts, the
/// 405B case has no even pipeline split).
constexpr double kDevCaseAgreement = 0.05;
/// The same on the sampled grid: median 1.3 %, p90 10.8 %, at most 16 % (about
/// 80 layouts). Everything above 10 % is a small model at tp=8 with
/// --tp-comm-overlap, whose tiny GEMMs hide little: the analytical model
/// exposes max(c/tp, c − GEMMs) of the TP collectives c, the Plan a fixed
/// tail of c/tp beside a block that is shorter than the rest (task_costs.h).
constexpr double kGridAgreement = 0.20;

double disagreement(const sim::ModelConfig& model, const sim::ClusterConfig& cluster,
                    const sim::CostProfile& profile, const sim::ParallelLayout& l) {
  sim::EventOptions options;
  options.critical_path = false;
  const double analytic = sim::simulate_analytic(model, cluster, profile, l).step_time_s;
  const double event = sim::simulate_event(model, cluster, profile, l, options).result.step_time_s;
  return std::abs(event / analytic - 1.0);
}

TEST(EnginesAgree, OnEveryDevCaseLayout) {
  const sim::PresetCatalog catalog(SEXTANT_TEST_CONFIG_DIR);
  const auto cases = reports::load_validation_cases(std::string(SEXTANT_TEST_SOURCE_DIR) +
                                                    "/validation/dev_cases.yaml");
  int compared = 0;
  for (const reports::ValidationCase& c : cases) {
    const sim::ClusterConfig cluster = catalog.cluster(c.cluster_preset);
    const sim::CostProfile profile = catalog.profile("", cluster.gpu.name);
    const search::Completion completion =
        search::complete_layout(c.model, cluster, profile, c.num_gpus, c.layout, {}, false);
    if (!completion.best) continue;  // no valid layout (e.g. an uneven pipeline split)
    const sim::ParallelLayout& l = completion.best->layout;
    EXPECT_LE(disagreement(c.model, cluster, profile, l), kDevCaseAgreement)
        << c.id << " " << l.to_spec();
    ++compared;
  }
  EXPECT_GE(compared, 30) << "of " << cases.size() << " dev cases";
}

// Issue 17's report: llama3-405b on 16,384 H100s, tp=8 dp=2048 zero=3, analytic
// 9.07 s against event 14.42 s (the analytical model hid every gather). Each
// implementation's ZeRO-3 must now agree, and every gather must be paid for:
// at one micro-batch per rank the exposed DP time is the link's work (126 layers
// gathered twice and reduce-scattered once, over 2,048 nodes) less the compute.
TEST(EnginesAgree, OnLlama405bZeroThreeAt16kGpus) {
  const sim::PresetCatalog catalog(SEXTANT_TEST_CONFIG_DIR);
  const sim::ModelConfig model = catalog.model("llama3-405b");
  sim::ClusterConfig cluster = catalog.cluster("dgx-h100");
  cluster.num_nodes = 2048;
  const sim::CostProfile profile = catalog.profile("", cluster.gpu.name);
  for (sim::FsdpImplementation f :
       {sim::FsdpImplementation::kMegatronFsdp, sim::FsdpImplementation::kFsdp2,
        sim::FsdpImplementation::kDeepSpeedZero3}) {
    sim::ParallelLayout l;
    l.tp = 8;
    l.sp = true;
    l.dp = 2048;
    l.mbs = 1;
    l.gbs = 2048;
    l.recompute = sim::Recompute::kFull;
    l.zero = 3;
    l.overlap_grad_reduce = false;
    l.fsdp = f;
    EXPECT_LE(disagreement(model, cluster, profile, l), kDevCaseAgreement) << l.to_spec();
    // A lower bound on the link's work: all weights gathered twice (the
    // embedding's once) and all gradients reduce-scattered, as single
    // collectives (the per-unit ones pay more latency); the compute hides at
    // most its own length of it.
    const sim::SimulationResult r = sim::simulate_analytic(model, cluster, profile, l);
    const sim::LinkRates links = sim::link_rates(cluster, profile);
    const sim::FsdpBehaviour b = sim::fsdp_behaviour(f, 1.0, l.precision);
    const double params = sim::stage_params_per_gpu(model, l, 0).dense;
    const double embedding = static_cast<double>(model.vocab_size) * model.hidden_size / l.tp;
    const sim::FsdpUnitComm all = sim::fsdp_unit_comm({params, 0.0}, b, l, cluster, links);
    const sim::FsdpUnitComm twice =
        sim::fsdp_unit_comm({params - embedding, 0.0}, b, l, cluster, links);
    EXPECT_GE(r.exposed_dp_s, all.gather_s + twice.gather_s + all.reduce_s - r.time.compute_s)
        << l.to_spec();
  }
}

// Megatron-Core's MoE overlaps (expert_comm_exposure.h): the analytical model's
// closed form for the exposed all-to-all and the Plan's combined
// forward-backward steps and shared-expert tasks must agree, and each overlap
// must hide all-to-all time in both. Mixtral at pp = 1, a 16-layer DeepSeek-V3
// (1 dense layer) under the interleaved schedule and with the shared-expert
// overlap, and DeepSeek-V3 itself. Measured when written: |event/analytic − 1|
// at most 2.2 % (Mixtral with the overlap). Not covered: chunks of unequal
// layer counts (a pp_layout mixing them; DeepSeek-V3 at pp=8 vpp=7 with
// pp_layout E|(t*2|)*7(t|)*47L: event 11.8 % slower, the exposed all-to-all
// agreeing (6.06 s, 5.89 s) and the event's pipeline bubble not: 2.88 s
// against 0.20 s), and ZeRO-3, where the engines already differ for MoE
// models without the overlap.
TEST(EnginesAgree, OnMoeAllToAllOverlaps) {
  const sim::PresetCatalog catalog(SEXTANT_TEST_CONFIG_DIR);
  const sim::ClusterConfig cluster = catalog.cluster("dgx-h100");
  const sim::CostProfile profile = catalog.profile("", cluster.gpu.name);
  sim::ModelConfig deepseek = catalog.model("deepseek-v3");
  deepseek.num_layers = 16;
  deepseek.moe->first_dense_layers = 1;
  struct Case {
    sim::ModelConfig model;
    sim::ParallelLayout layout;
    bool a2a, shared;
  };
  std::vector<Case> cases;
  sim::ParallelLayout l;
  l.tp = 2;
  l.sp = true;
  l.dp = 8;
  l.ep = 8;
  l.mbs = 1;
  l.gbs = 64;  // 8 micro-batches
  l.recompute = sim::Recompute::kSelective;
  l.zero = 1;
  cases.push_back({catalog.model("mixtral-8x7b"), l, true, false});
  sim::ParallelLayout d;
  d.tp = 1;
  d.pp = 4;
  d.vpp = 2;
  d.schedule = sim::Schedule::kInterleaved;
  d.dp = 16;
  d.ep = 16;
  d.mbs = 1;
  d.gbs = 128;  // 8 micro-batches of 4 stages
  d.recompute = sim::Recompute::kSelective;
  d.zero = 1;
  cases.push_back({deepseek, d, true, false});
  d.pp = 1;
  d.vpp = 1;
  d.schedule = sim::Schedule::kOneFOneB;
  d.dp = 64;
  d.ep = 8;     // inside a node: all-to-all over NVLink
  d.gbs = 256;  // 4 micro-batches
  cases.push_back({deepseek, d, false, true});
  // The whole DeepSeek-V3 on 1,024 H100s, experts over 16 nodes (ep = 128):
  // the all-to-all outlasts some blocks, so the closed form's per-block
  // max(0, a2a − block) is tested where it binds. (Measured: analytic 26.38 s,
  // event 26.73 s with the overlap; 42.05 s and 42.63 s without.)
  sim::ParallelLayout v;
  v.tp = 4;
  v.sp = true;
  v.tp_comm_overlap = true;
  v.dp = 256;
  v.ep = 128;
  v.mbs = 2;
  v.gbs = 8192;
  v.zero = 1;
  v.overlap_param_gather = true;
  cases.push_back({catalog.model("deepseek-v3"), v, true, false});
  sim::EventOptions options;
  options.critical_path = false;
  for (const Case& c : cases) {
    sim::ParallelLayout on = c.layout;
    on.moe_a2a_overlap = c.a2a;
    on.moe_shared_expert_overlap = c.shared;
    EXPECT_LE(disagreement(c.model, cluster, profile, c.layout), kDevCaseAgreement)
        << c.model.name << " " << c.layout.to_spec();
    EXPECT_LE(disagreement(c.model, cluster, profile, on), kDevCaseAgreement)
        << c.model.name << " " << on.to_spec();
    const auto analytic = [&](const sim::ParallelLayout& x) {
      return sim::simulate_analytic(c.model, cluster, profile, x);
    };
    const auto event = [&](const sim::ParallelLayout& x) {
      return sim::simulate_event(c.model, cluster, profile, x, options).result.step_time_s;
    };
    // The shared expert is short beside an all-to-all: it hides a little.
    const double hidden = c.a2a ? 0.8 : 0.99;
    EXPECT_LT(analytic(on).exposed_ep_s, hidden * analytic(c.layout).exposed_ep_s) << on.to_spec();
    EXPECT_LT(event(on), event(c.layout)) << on.to_spec();
  }
}

class EnginesAgreeOnGrid : public ::testing::TestWithParam<std::string> {};

TEST_P(EnginesAgreeOnGrid, WithinTheStatedBound) {
  const GridHardware& h = grid_hardware();
  for (const GridCase& c : sampled_cases(GetParam(), 7)) {
    EXPECT_LE(disagreement(c.model, h.cluster, h.profile, c.layout), kGridAgreement)
        << c.describe();
  }
}

INSTANTIATE_TEST_SUITE_P(Sample, EnginesAgreeOnGrid, ::testing::ValuesIn(small_grid_models()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return grid_model_name(info.param);
                         });

}  // namespace
}  // namespace sextant::testing
