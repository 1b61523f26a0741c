// Time of one analytical evaluation (issue 2 target: <= 5 µs on the 2-core
// development machine; Calculon takes about 1.6 ms).
//
//   build/tests/analytic_model_bench
//
// Presets are loaded once before the loop; each iteration is what the search
// does per layout: simulate_analytic on a complete layout.
#include <benchmark/benchmark.h>

#include "sim/analytic/analytic_model.h"
#include "sim/core/layout_check.h"
#include "sim/core/preset_catalog.h"

namespace {

using namespace sextant::sim;

struct Setup {
  ModelConfig model;
  ClusterConfig cluster;
  CostProfile profile;
  ParallelLayout layout;
};

Setup gpt3_on_1536_a100() {
  const PresetCatalog catalog(SEXTANT_BENCH_CONFIG_DIR);
  Setup s{catalog.model("gpt3-175b"), catalog.cluster("dgx-a100"), {}, {}};
  s.profile = catalog.profile("", s.cluster.gpu.name);
  s.layout = ParallelLayout{};
  s.layout.tp = 8;
  s.layout.pp = 16;
  s.layout.dp = 12;
  s.layout.mbs = 1;
  s.layout.gbs = 1536;
  s.layout.sp = true;
  s.layout.recompute = Recompute::kSelective;
  s.layout.zero = 1;
  return s;
}

void BM_AnalyticGpt3On1536A100(benchmark::State& state) {
  const Setup s = gpt3_on_1536_a100();
  for (auto _ : state) {
    SimulationResult r = simulate_analytic(s.model, s.cluster, s.profile, s.layout);
    benchmark::DoNotOptimize(r);
  }
  state.counters["evaluations_per_s"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_AnalyticGpt3On1536A100);

// A MoE model with multi-head latent attention: the grouped-GEMM expert
// times sum a Poisson tail per GEMM (sim/compute/grouped_gemm_time.h), and
// the combined-1F1B all-to-all overlap is on.
void BM_AnalyticDeepSeekV3On1024H100(benchmark::State& state) {
  const PresetCatalog catalog(SEXTANT_BENCH_CONFIG_DIR);
  Setup s{catalog.model("deepseek-v3"), catalog.cluster("dgx-h100"), {}, {}};
  s.profile = catalog.profile("", s.cluster.gpu.name);
  s.layout.tp = 8;
  s.layout.sp = true;
  s.layout.dp = 128;
  s.layout.ep = 64;
  s.layout.mbs = 1;
  s.layout.gbs = 4096;
  s.layout.recompute = Recompute::kSelective;
  s.layout.zero = 1;
  s.layout.moe_a2a_overlap = true;
  for (auto _ : state) {
    SimulationResult r = simulate_analytic(s.model, s.cluster, s.profile, s.layout);
    benchmark::DoNotOptimize(r);
  }
  state.counters["evaluations_per_s"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_AnalyticDeepSeekV3On1024H100);

void BM_ValidityCheckGpt3(benchmark::State& state) {
  const Setup s = gpt3_on_1536_a100();
  for (auto _ : state) {
    bool valid = is_valid_layout(s.model, s.cluster, 1536, s.layout);
    benchmark::DoNotOptimize(valid);
  }
}
BENCHMARK(BM_ValidityCheckGpt3);

// The same evaluation with a measured profile (the engine's kernel list, every
// GEMM, attention and element-wise kernel interpolated from its tables):
// GPT-1.3B, mbs 4, gbs 32 on one H100 with the test fixture profile.
void BM_AnalyticMeasuredProfileGpt13bOn1H100(benchmark::State& state) {
  const PresetCatalog catalog(SEXTANT_BENCH_CONFIG_DIR);
  const ModelConfig model = catalog.model("gpt-1.3b");
  const ClusterConfig cluster = catalog.cluster("dgx-h100");
  const CostProfile profile = catalog.profile(SEXTANT_BENCH_MEASURED_PROFILE, cluster.gpu.name);
  ParallelLayout layout;
  layout.mbs = 4;
  layout.gbs = 32;
  for (auto _ : state) {
    SimulationResult r = simulate_analytic(model, cluster, profile, layout);
    benchmark::DoNotOptimize(r);
  }
  state.counters["evaluations_per_s"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_AnalyticMeasuredProfileGpt13bOn1H100);

}  // namespace

BENCHMARK_MAIN();
