#include "tools/run_moe_output.h"

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

#include "sim/core/text_format.h"

namespace sextant::tools {
namespace {

using engine::transformer::MoeStatistics;

std::vector<double> loads_of(const MoeStatistics& s) {
  std::vector<double> loads;
  for (const auto& layer : s.expert_tokens) loads.push_back(engine::transformer::busiest_expert_load(layer));
  return loads;
}

// The mean of a router loss's value over layers and passes; < 0 when none was taken.
double mean_loss(double sum, const MoeStatistics& s) {
  return s.layer_passes > 0 ? sum / static_cast<double>(s.layer_passes) : -1.0;
}

// DeepSeek-V3's biases' max - min over experts, mean over layers; < 0 without them.
double mean_bias_spread(const MoeStatistics& s) {
  if (s.expert_bias_spread.empty()) return -1.0;
  return std::accumulate(s.expert_bias_spread.begin(), s.expert_bias_spread.end(), 0.0) /
         static_cast<double>(s.expert_bias_spread.size());
}

// The share of the routed pairs the experts ran (a capacity drops the rest, or
// pads to it: above 1); < 0 without statistics.
double kept_share(const MoeStatistics& s) {
  std::int64_t routed = 0, rows = 0;
  for (const auto& layer : s.expert_tokens) routed = std::accumulate(layer.begin(), layer.end(), routed);
  for (const auto& layer : s.expert_rows) rows = std::accumulate(layer.begin(), layer.end(), rows);
  return routed > 0 ? static_cast<double>(rows) / static_cast<double>(routed) : -1.0;
}

}  // namespace

std::string moe_progress_line(const MoeStatistics& s) {
  if (s.expert_tokens.empty()) return "";
  std::string line = "       moe  busiest expert / mean by layer:";
  for (const double load : loads_of(s)) {
    line += ' ';
    line += sim::format_fixed(load, 2);
  }
  if (s.aux_loss_sum > 0) line += "; Switch loss " + sim::format_fixed(mean_loss(s.aux_loss_sum, s), 4);
  if (s.z_loss_sum > 0) line += "; z-loss " + sim::format_fixed(mean_loss(s.z_loss_sum, s), 3);
  if (!s.expert_bias_spread.empty()) line += "; expert bias spread " + sim::format_fixed(mean_bias_spread(s), 4);
  return line + "\n";
}

nlohmann::ordered_json moe_json(const MoeStatistics& s) {
  nlohmann::ordered_json j;
  j["expert_tokens"] = s.expert_tokens;
  j["expert_rows"] = s.expert_rows;
  j["expert_rows_per_routed_pair"] = kept_share(s) >= 0 ? nlohmann::ordered_json(kept_share(s)) : nullptr;
  j["busiest_expert_load"] = loads_of(s);
  j["switch_loss"] = s.aux_loss_sum > 0 ? nlohmann::ordered_json(mean_loss(s.aux_loss_sum, s)) : nullptr;
  j["z_loss"] = s.z_loss_sum > 0 ? nlohmann::ordered_json(mean_loss(s.z_loss_sum, s)) : nullptr;
  if (!s.expert_bias_spread.empty()) {
    j["expert_bias_spread"] = mean_bias_spread(s);
    j["expert_bias_spread_by_layer"] = s.expert_bias_spread;
  }
  return j;
}

void print_moe_summary(std::ostream& out, const MoeStatistics& s) {
  if (s.expert_tokens.empty()) return;
  const std::vector<double> loads = loads_of(s);
  out << "MoE routing over the run (this rank's tokens): busiest expert / mean by layer";
  for (const double load : loads) out << " " << sim::format_fixed(load, 2);
  out << " (worst " << sim::format_fixed(*std::max_element(loads.begin(), loads.end()), 2) << ")";
  if (s.aux_loss_sum > 0) out << "; Switch loss " << sim::format_fixed(mean_loss(s.aux_loss_sum, s), 4) << " (1: balanced)";
  // A capacity: how much of the routing the experts ran.
  if (const double kept = kept_share(s); kept >= 0 && kept != 1.0)
    out << "; the experts ran " << sim::format_fixed(100 * kept, 1) << " % of the routed pairs (the capacity "
        << (kept < 1 ? "dropped the rest" : "padded them") << ")";
  out << "\n";
}

}  // namespace sextant::tools
