// Time of whole layout searches (issue 5 targets on the 2-core development
// machine: GPT-3 175B on 1,024 A100s, global batch 1,536: <= 0.5 s; the
// Narayanan et al. 2021 530B model on 5,120 A100s: <= 2 s; Calculon needs
// about 30 s for 8,112 layouts of a 530B model on 2 cores).
//
//   build/tests/search_bench
#include <benchmark/benchmark.h>

#include "search/layout_search.h"
#include "sim/core/preset_catalog.h"

namespace {

using namespace sextant;

void run_search(benchmark::State& state, const char* model_name, long gpus, int global_batch) {
  const sim::PresetCatalog catalog(SEXTANT_BENCH_CONFIG_DIR);
  const sim::ModelConfig model = catalog.model(model_name);
  const sim::ClusterConfig cluster = catalog.cluster("dgx-a100");
  const sim::CostProfile profile = catalog.profile("", cluster.gpu.name);
  sim::PartialLayout partial;
  partial.gbs = global_batch;
  search::SearchOptions options;
  options.threads = static_cast<int>(state.range(0));
  long evaluated = 0;
  for (auto _ : state) {
    const search::SearchResult r =
        search::search_layouts(model, cluster, profile, gpus, partial, options);
    evaluated = r.evaluated;
    benchmark::DoNotOptimize(r.best.data());
  }
  state.counters["layouts"] = static_cast<double>(evaluated);
  state.counters["layouts_per_s"] = benchmark::Counter(
      static_cast<double>(evaluated) * state.iterations(), benchmark::Counter::kIsRate);
}

void BM_SearchGpt3On1024A100(benchmark::State& state) {
  run_search(state, "gpt3-175b", 1024, 1536);
}
BENCHMARK(BM_SearchGpt3On1024A100)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_Search530bOn5120A100(benchmark::State& state) {
  run_search(state, "narayanan21-529.6b", 5120, 2560);
}
BENCHMARK(BM_Search530bOn5120A100)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
