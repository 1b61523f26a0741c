// Time of the event-driven simulation of one training iteration (issue
// targets on the 2-core development machine: GPT-3 175B on 1,024 GPUs with
// pp=8, vpp=3 and 96 micro-batches in at most 20 ms; time about linear in
// micro-batches × stages; a zero-bubble or interleaved schedule of 16 stages
// and 512 micro-batches well under a second).
//
//   build/tests/event_sim_bench
//
// Presets are loaded before the loop; each iteration is what `sextant
// simulate --engine event` does after the search: build the Plan, cost its
// tasks, play it, find the critical path and the breakdown. The counter
// tasks_per_s is plan tasks simulated per second.
#include <benchmark/benchmark.h>

#include "sim/core/preset_catalog.h"
#include "sim/event/event_simulation.h"

namespace {

using namespace sextant::sim;

struct Setup {
  ModelConfig model;
  ClusterConfig cluster;
  CostProfile profile;
};

Setup gpt3_on_h100() {
  const PresetCatalog catalog(SEXTANT_BENCH_CONFIG_DIR);
  Setup s{catalog.model("gpt3-175b"), catalog.cluster("dgx-h100"), {}};
  s.profile = catalog.profile("", s.cluster.gpu.name);
  return s;
}

// tp=8 with SP, selective recomputation, the distributed optimizer with both
// overlaps: the layout the example completes to.
ParallelLayout layout(int pp, int vpp, int dp, int microbatches) {
  ParallelLayout l;
  l.tp = 8;
  l.sp = true;
  l.pp = pp;
  l.vpp = vpp;
  l.schedule = vpp > 1 ? Schedule::kInterleaved : Schedule::kOneFOneB;
  l.dp = dp;
  l.mbs = 1;
  l.gbs = microbatches * dp;
  l.recompute = Recompute::kSelective;
  l.zero = 1;
  l.overlap_param_gather = true;
  return l;
}

void run(benchmark::State& state, const Setup& s, const ParallelLayout& l,
         const EventOptions& options) {
  std::size_t tasks = 0;
  for (auto _ : state) {
    EventSimulation e = simulate_event(s.model, s.cluster, s.profile, l, options);
    tasks = e.plan.tasks.size();
    benchmark::DoNotOptimize(e.result.step_time_s);
  }
  state.counters["tasks"] = static_cast<double>(tasks);
  state.counters["tasks_per_s"] = benchmark::Counter(
      static_cast<double>(tasks) * static_cast<double>(state.iterations()),
      benchmark::Counter::kIsRate);
}

// The example: 1,024 GPUs, tp=8, pp=8, vpp=3, dp=16, 96 micro-batches.
void BM_Gpt3On1024Gpus(benchmark::State& state) {
  EventOptions options;
  options.critical_path = state.range(0) != 0;
  run(state, gpt3_on_h100(), layout(8, 3, 16, 96), options);
}
BENCHMARK(BM_Gpt3On1024Gpus)->Arg(1)->Arg(0)->ArgName("critical_path")->Unit(benchmark::kMillisecond);

// 1F1B over stages × micro-batches with GPT-3's layers, 6 per stage (the
// model grows with the pipeline, as in weak scaling): the plan has about
// 8·6 tasks per stage and micro-batch, and the time should grow about
// linearly in stages × micro-batches (tasks_per_s about constant).
void BM_OneFOneBScaling(benchmark::State& state) {
  const int pp = static_cast<int>(state.range(0));
  const int microbatches = static_cast<int>(state.range(1));
  Setup s = gpt3_on_h100();
  s.model.num_layers = 6 * pp;
  run(state, s, layout(pp, 1, 1, microbatches), EventOptions{});
}
BENCHMARK(BM_OneFOneBScaling)
    ->ArgsProduct({{4, 8, 16}, {32, 128, 512}})
    ->ArgNames({"pp", "m"})
    ->Unit(benchmark::kMillisecond);

// 16 stages, 512 micro-batches: ZB-H1 and interleaved (vpp=2).
void BM_ZeroBubble16Stages512MicroBatches(benchmark::State& state) {
  EventOptions options;
  options.schedule = PipelineSchedule::kZeroBubbleH1;
  run(state, gpt3_on_h100(), layout(16, 1, 1, 512), options);
}
BENCHMARK(BM_ZeroBubble16Stages512MicroBatches)->Unit(benchmark::kMillisecond);

void BM_Interleaved16Stages512MicroBatches(benchmark::State& state) {
  run(state, gpt3_on_h100(), layout(16, 2, 1, 512), EventOptions{});
}
BENCHMARK(BM_Interleaved16Stages512MicroBatches)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
