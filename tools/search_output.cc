#include "tools/search_output.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <sstream>

#include "search/explain_layout.h"
#include "search/mechanism_evidence.h"
#include "sim/compute/prediction_interval.h"

namespace sextant::tools {

std::string short_layout(const sim::ParallelLayout& l) {
  std::string out = "tp=" + std::to_string(l.tp) + " pp=" + std::to_string(l.pp);
  if (l.vpp > 1) out += " vpp=" + std::to_string(l.vpp);
  if (l.custom_split()) out += " " + l.split_spec();
  out += " dp=" + std::to_string(l.dp);
  if (l.cp > 1) out += " cp=" + std::to_string(l.cp);
  if (l.ep > 1) out += " ep=" + std::to_string(l.ep);
  if (l.etp > 1) out += " etp=" + std::to_string(l.etp);
  out += " mbs=" + std::to_string(l.mbs);
  if (l.sp) out += " sp";
  out += " rc=" + std::string(sim::to_string(l.recompute));
  out += " zero=" + std::to_string(l.zero);
  if (l.zero >= 3) out += " " + std::string(sim::to_string(l.fsdp));
  if (l.precision != sim::Precision::kBf16) out += " " + std::string(sim::to_string(l.precision));
  std::string overlaps;
  if (l.overlap_grad_reduce) overlaps += "g";
  if (l.overlap_param_gather) overlaps += "p";
  if (l.tp_comm_overlap) overlaps += "t";
  if (l.moe_a2a_overlap) overlaps += "a";
  if (l.moe_shared_expert_overlap) overlaps += "s";
  if (!overlaps.empty()) out += " ovl=" + overlaps;
  return out;
}

std::string cross_node_tp_note(const sim::ClusterConfig& cluster, const sim::SimulationResult& within,
                               const sim::SimulationResult& across) {
  char line[1024];
  std::snprintf(line, sizeof line,
                "\nnote: TP groups are kept inside one node (%d GPUs, one NVLink domain), as practitioners run them.\n"
                "  With tp=%d across nodes the model predicts %.1f %% faster (%s vs %s per step):\n  %s\n"
                "  its tensor-parallel traffic crosses the %.0f GB/s network instead of the %.0f GB/s NVLink;\n"
                "  give --tp-across-nodes to rank such layouts too.\n",
                cluster.gpus_per_node, across.layout.tp, 100 * (within.step_time_s / across.step_time_s - 1),
                format_seconds(across.step_time_s).c_str(), format_seconds(within.step_time_s).c_str(),
                short_layout(across.layout).c_str(), cluster.inter_node_bandwidth_bytes_per_s / 1e9,
                cluster.intra_node_bandwidth_bytes_per_s / 1e9);
  return line;
}

nlohmann::json search_json(const SearchOutput& o, const search::SearchResult& result) {
  nlohmann::json results = nlohmann::json::array();
  for (const sim::SimulationResult& r : result.best) {
    nlohmann::json j = simulation_json(o.context, r);
    j["limited_by"] = search::describe_limiter(r, o.cluster, result.memory_limit_bytes);
    j["ungrounded"] = search::ungrounded_mechanisms(r.layout);
    results.push_back(j);
  }
  return nlohmann::json{{"evaluated", result.evaluated},
                        {"valid", result.valid},
                        {"feasible", result.feasible},
                        {"search_time_s", result.search_time_s},
                        {"profile", profile_json(o.profile)},
                        {"results", results}};
}

std::string search_table(const SearchOutput& o, const search::SearchResult& result) {
  const sim::ClusterConfig& cluster = o.cluster;
  std::ostringstream out;
  char line[1024];
  out << "sextant search: " << o.model.name << " on " << o.gpus << " x " << cluster.gpu.name << " ("
      << cluster.name << "), global batch " << o.global_batch << ", seq " << o.model.seq_length
      << "\nprofile: " << profile_label(o.profile);
  if (const auto unit = sim::step_time_interval_s(1.0, o.profile)) {
    std::snprintf(line, sizeof line, "; step times %+.1f %% / %+.1f %% (%.0f %% interval of its fit)",
                  100 * (unit->first - 1), 100 * (unit->second - 1),
                  100 * sim::kPredictionIntervalCoverage);
    out << line;
  }
  out << "\n\n";
  // The layout column is as wide as its longest entry, so the columns after it line up.
  int width = 6;
  for (const sim::SimulationResult& r : result.best) {
    width = std::max(width, static_cast<int>(short_layout(r.layout).size()));
  }
  std::snprintf(line, sizeof line, "%3s  %-*s %9s %9s %6s %10s %9s  %s\n", "#", width, "layout",
                "step", "tok/s/GPU", "MFU", "mem/GPU", "headroom", "limited by");
  out << line;
  int rank = 1;
  for (const sim::SimulationResult& r : result.best) {
    const double headroom = 1.0 - r.memory.total() / static_cast<double>(cluster.gpu.memory_bytes);
    std::snprintf(line, sizeof line, "%3d  %-*s %9s %9.0f %5.1f%% %10s %8.1f%%  %s\n", rank++,
                  width, short_layout(r.layout).c_str(), format_seconds(r.step_time_s).c_str(),
                  r.tokens_per_s_per_gpu, 100 * reported_mfu(o.context, r),
                  format_gib(r.memory.total()).c_str(), 100 * headroom,
                  search::describe_limiter(r, cluster, result.memory_limit_bytes).c_str());
    out << line;
  }
  out << "\n" << search_table_legend(o.context.mfu_convention);
  std::snprintf(line, sizeof line,
                "\nConsidered %ld layouts: %ld valid, %ld fit in memory (limit %s per GPU after "
                "%.0f %% headroom).\nSearched in %.3f s (%.0f layouts/s). Best layout in full:\n  %s\n",
                result.evaluated, result.valid, result.feasible,
                format_gib(result.memory_limit_bytes).c_str(), 100 * o.memory_headroom,
                result.search_time_s, result.evaluated / std::max(result.search_time_s, 1e-9),
                result.best.front().layout.to_spec().c_str());
  out << line;
  return out.str();
}

std::function<void(double)> progress_bar() {
  if (!isatty(STDERR_FILENO)) return {};
  const auto start = std::chrono::steady_clock::now();
  return [start, shown = false](double fraction) mutable {
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (elapsed < 1.0) return;
    const int width = 40;
    const int filled = static_cast<int>(fraction * width);
    std::fprintf(stderr, "\rsearching [%-*s] %3.0f %%", width, std::string(filled, '#').c_str(),
                 100 * fraction);
    shown = true;
    if (fraction >= 1.0 && shown) std::fprintf(stderr, "\r%*s\r", width + 24, "");
    std::fflush(stderr);
  };
}

}  // namespace sextant::tools
