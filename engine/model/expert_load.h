// The simulator's moe.expert_load_factor measured from a run (`run --compare`):
// the rows the busiest expert-parallel rank's experts run over the pairs one
// rank routes (sim/compute/engine_moe_kernels.h: that rank's Q = T·k·factor
// rows; sim/comm/parallel_comm.cc: its share of the all-to-all). Under ep each
// rank holds experts [k·E/ep, (k+1)·E/ep) of every MoE layer and receives
// every source's rows for them, so the busiest rank is the one whose block
// the ep group's sources sent the most rows, summed over the layers (the
// layers run one after another: their GEMM times add). A capacity that drops
// pairs makes the factor less than 1, one padded to capacity E·C/(T·k).
//
// Plain C++: tested on the CPU.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace sextant::engine {

/// The rows one source rank gives each ep rank's experts, summed over its MoE
/// layers: `expert_rows` [layer][expert] (transformer::MoeStatistics::expert_rows),
/// ep rank k's the sum over experts [k·E/ep, (k+1)·E/ep). Throws
/// std::invalid_argument unless ep divides every layer's experts.
std::vector<double> rows_by_ep_rank(const std::vector<std::vector<std::int64_t>>& expert_rows, int ep);

/// The factor from every ep rank's rows summed over the ep group's sources
/// (`group_rows`, one per ep rank) and the pairs one rank routed over the same
/// layers and passes (`routed_pairs`): the busiest rank's rows over them; 0
/// when nothing was routed.
double expert_load_factor(std::span<const double> group_rows, double routed_pairs);

}  // namespace sextant::engine
