// Time of whole scaling reports, rows evaluated and every file written
// (issue 14 targets: a 9-row report under 1 s; a 10-point strong-scaling
// sweep with a layout search at each point under 5 s).
//
//   build/tests/report_bench
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "reports/report_spec.h"
#include "reports/scaling_report.h"
#include "reports/scaling_rows.h"
#include "sim/core/preset_catalog.h"

namespace {

using namespace sextant;

std::string scratch_folder() {
  return (std::filesystem::temp_directory_path() / "sextant-report-bench").string();
}

void run_report(benchmark::State& state, const reports::ReportSpec& spec,
                reports::ScalingKind kind) {
  const sim::PresetCatalog catalog(SEXTANT_BENCH_CONFIG_DIR);
  long layouts = 0;
  for (auto _ : state) {
    const std::vector<reports::ReportRow> rows = reports::evaluate_rows(spec, catalog);
    reports::write_scaling_report(rows, {spec.title, spec.notes, spec.source, "analytic", kind},
                                  scratch_folder());
    layouts = 0;
    for (const reports::ReportRow& r : rows) layouts += r.evaluated_layouts;
  }
  state.counters["rows"] = static_cast<double>(spec.rows.size());
  state.counters["layouts"] = static_cast<double>(layouts);
  std::filesystem::remove_all(scratch_folder());
}

// The nine Megatron-LM H100 weak-scaling rows (TP, PP, DP given; the rest searched).
void BM_WeakScalingMegatronH100NineRows(benchmark::State& state) {
  run_report(state,
             reports::load_report_spec(std::string(SEXTANT_BENCH_CONFIG_DIR) +
                                       "/reports/megatron-weak-h100.yaml"),
             reports::ScalingKind::kWeak);
}
BENCHMARK(BM_WeakScalingMegatronH100NineRows)->Unit(benchmark::kMillisecond)->UseRealTime();

// GPT-3 175B on 96 to 4,608 H100s, 10 points, every knob but the overlaps searched.
void BM_StrongScalingGpt3TenPoints(benchmark::State& state) {
  run_report(state,
             reports::load_report_spec(std::string(SEXTANT_BENCH_CONFIG_DIR) +
                                       "/reports/gpt3-175b-strong-h100.yaml"),
             reports::ScalingKind::kStrong);
}
BENCHMARK(BM_StrongScalingGpt3TenPoints)->Unit(benchmark::kMillisecond)->UseRealTime();

// The flag form's sweep with a full search at each of 10 points: Llama 3 70B on
// 64 to 1,536 H100s at global batch 1,536, no knob fixed.
void BM_StrongScalingLlama70bTenPointsFullSearch(benchmark::State& state) {
  run_report(state,
             reports::sweep_spec("llama3-70b", "dgx-h100",
                                 {64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536}, 1536, "", {}),
             reports::ScalingKind::kStrong);
}
BENCHMARK(BM_StrongScalingLlama70bTenPointsFullSearch)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
