// What keeping tensor parallelism inside one NVLink domain costs. Practitioners
// keep every TP group on one node (one NVLink domain: 8 GPUs of a DGX, 72 of a
// GB200 NVL72 rack, as the cluster presets' gpus_per_node say), because its
// per-layer all-reduces run at NVLink bandwidth there and at the NIC's across
// nodes; `sextant search` does so by default. When a TP group spanning nodes
// would still be faster (the model says so), the search says by how much
// instead of silently preferring either.
#pragma once

#include <optional>

#include "search/layout_search.h"

namespace sextant::search {

/// The fastest layout whose tp spans nodes (tp a multiple of gpus_per_node
/// above it, each tried with tp fixed, within `options`' other constraints),
/// when it is faster than `within_node_best`; nullopt when none is, when
/// `partial` fixes tp, or when the cluster's nodes are the whole job.
std::optional<sim::SimulationResult> faster_cross_node_tp(const sim::ModelConfig& model,
                                                          const sim::ClusterConfig& cluster,
                                                          const sim::CostProfile& profile, long gpus,
                                                          const sim::PartialLayout& partial,
                                                          SearchOptions options,
                                                          const sim::SimulationResult& within_node_best);

}  // namespace sextant::search
