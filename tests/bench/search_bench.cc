// Time of whole layout searches (issue 5 targets on the 2-core development
// machine: GPT-3 175B on 1,024 A100s, global batch 1,536: <= 0.5 s; the
// Narayanan et al. 2021 530B model on 5,120 A100s: <= 2 s; Calculon needs
// about 30 s for 8,112 layouts of a 530B model on 2 cores). Issue 29 item 12:
// DeepSeek-V3 on 2,048 H100s <= 1 s, the largest presets on 16,384 H100s <= 2 s.
//
//   build/tests/search_bench
#include <benchmark/benchmark.h>

#include <algorithm>

#include "search/layout_search.h"
#include "sim/core/preset_catalog.h"

namespace {

using namespace sextant;

// `tp_within_node`: as `sextant search` does by default since issue 29 item 8
// (the older cases keep the whole tp range they were timed with).
void run_search(benchmark::State& state, const char* model_name, long gpus, int global_batch,
                const char* cluster_name = "dgx-a100", bool tp_within_node = false) {
  const sim::PresetCatalog catalog(SEXTANT_BENCH_CONFIG_DIR);
  const sim::ModelConfig model = catalog.model(model_name);
  sim::ClusterConfig cluster = catalog.cluster(cluster_name);
  // Enough nodes for the GPU count, as `--nodes` sizes a preset.
  cluster.num_nodes = std::max<int>(cluster.num_nodes, static_cast<int>(gpus / cluster.gpus_per_node));
  const sim::CostProfile profile = catalog.profile("", cluster.gpu.name);
  sim::PartialLayout partial;
  partial.gbs = global_batch;
  search::SearchOptions options;
  options.threads = static_cast<int>(state.range(0));
  options.constraints.tp_within_node = tp_within_node;
  long evaluated = 0, timed = 0;
  for (auto _ : state) {
    const search::SearchResult r =
        search::search_layouts(model, cluster, profile, gpus, partial, options);
    evaluated = r.evaluated;
    timed = r.feasible - r.bounded;
    benchmark::DoNotOptimize(r.best.data());
  }
  state.counters["layouts"] = static_cast<double>(evaluated);
  state.counters["timed"] = static_cast<double>(timed);
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

// DeepSeek-V3's pre-training batch: 15,360 sequences (DeepSeek-AI 2024, arXiv:2412.19437, Sec. 4.2).
void BM_SearchDeepSeekV3On2048H100(benchmark::State& state) {
  run_search(state, "deepseek-v3", 2048, 15360, "dgx-h100", true);
}
BENCHMARK(BM_SearchDeepSeekV3On2048H100)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

// 16,384 H100s, Llama 3 405B's scale (Llama Team 2024, arXiv:2407.21783, Table 4:
// 16,384 GPUs, 16 M tokens a batch = 2,048 sequences of 8,192 tokens).
void BM_SearchDeepSeekV3On16384H100(benchmark::State& state) {
  run_search(state, "deepseek-v3", 16384, 15360, "dgx-h100", true);
}
BENCHMARK(BM_SearchDeepSeekV3On16384H100)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_SearchLlama3_405bOn16384H100(benchmark::State& state) {
  run_search(state, "llama3-405b", 16384, 2048, "dgx-h100", true);
}
BENCHMARK(BM_SearchLlama3_405bOn16384H100)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

// Narayanan et al. 2021's 1T model (Table 1: batch 3,072 on 3,072 A100s) on 16,384 H100s.
void BM_Search1tOn16384H100(benchmark::State& state) {
  run_search(state, "narayanan21-1t", 16384, 3072, "dgx-h100", true);
}
BENCHMARK(BM_Search1tOn16384H100)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
