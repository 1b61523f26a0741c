// Whether a layout can run a model on a cluster: Megatron-LM's divisibility
// and compatibility rules, each reported with the values involved.
#pragma once

#include <vector>

#include "sim/core/config_error.h"
#include "sim/core/hardware_config.h"
#include "sim/core/model_config.h"
#include "sim/core/parallel_layout.h"
#include "sim/core/pipeline_split.h"

namespace sextant::sim {

/// Every rule `layout` breaks for `model` on `gpus` GPUs of `cluster`; empty
/// when the layout is valid. Diagnostics name the knob and the values.
std::vector<Diagnostic> check_layout(const ModelConfig& model, const ClusterConfig& cluster,
                                     long gpus, const ParallelLayout& layout);

/// The same rules as a yes/no, without building messages (for the search).
bool is_valid_layout(const ModelConfig& model, const ClusterConfig& cluster, long gpus,
                     const ParallelLayout& layout);

/// The same with check_pipeline_split(model, layout) already known: the
/// search checks each split once, not once per layout (parsing a pp_layout).
bool is_valid_layout(const ModelConfig& model, const ClusterConfig& cluster, long gpus,
                     const ParallelLayout& layout, SplitProblem split);

}  // namespace sextant::sim
