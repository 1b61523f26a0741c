// What `sextant run` says about an MoE model's routing (issue 25): per MoE
// layer, the busiest expert's tokens over the mean, and the router losses' mean values —
// on a progress line per log interval, in the summary, and in --format json.
// This rank's tokens (with dp > 1, each rank routes its own). Not the
// simulator's moe.expert_load_factor, which is the busiest expert-parallel
// rank's share over the mean: 1 while every expert is on each GPU (ep = 1).
#pragma once

#include <nlohmann/json.hpp>

#include <ostream>
#include <string>

#include "engine/transformer/moe_layer.h"

namespace sextant::tools {

/// "  moe  busiest expert / mean by layer: 1.31 1.12; Switch loss 1.004\n", or
/// "" when the statistics hold no MoE layer; with DeepSeek-V3's expert bias,
/// "; expert bias spread 0.0120" (max - min over experts, mean over layers) too.
std::string moe_progress_line(const engine::transformer::MoeStatistics& statistics);

/// {"expert_tokens": [[per expert] per layer], "expert_rows": [[per expert] per layer]
///  (the rows the experts ran: MoeStatistics::expert_rows), "expert_rows_per_routed_pair":
///  their sum over the routed pairs' (1 dropless; below 1 when a capacity dropped pairs),
///  "busiest_expert_load": [per layer], "switch_loss": mean over layers and passes (null when off), "z_loss": ...,
///  with DeepSeek-V3's expert bias "expert_bias_spread": max - min over experts, mean
///  over layers, and "expert_bias_spread_by_layer": [per layer] }
nlohmann::ordered_json moe_json(const engine::transformer::MoeStatistics& statistics);

/// The summary's lines (nothing without MoE layers); under a capacity the share
/// of the routed pairs the experts ran.
void print_moe_summary(std::ostream& out, const engine::transformer::MoeStatistics& statistics);

}  // namespace sextant::tools
