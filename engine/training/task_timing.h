// The Plan's tasks timed apart: what `run --compare` measures when the
// training steps ran as a CUDA graph (which cannot be timed inside).
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "engine/comm/parallel_groups.h"
#include "engine/data/token_batches.h"
#include "engine/trainer.h"
#include "sim/core/model_config.h"
#include "sim/core/parallel_layout.h"

namespace sextant::engine::training {

/// Seconds per step of every task, by its Plan name: a fresh trainer launching
/// its kernels one by one with CUDA events around each task, over `steps`
/// steps after one untimed warm-up step, drawing its batches from `data`. It
/// joins the rank's groups as the measured trainer did (every rank times its
/// tasks together, so the collectives meet); the caller frees the measured
/// trainer's memory first.
std::map<std::string, double> time_tasks_apart(const sim::ModelConfig& model, const sim::ParallelLayout& layout,
                                               TrainerOptions options, data::TokenBatches& data, std::size_t tokens_per_step,
                                               const comm::ParallelGroups& groups, int steps);

/// Every pipeline stage's `seconds`, gathered over the rank's pp group (on the
/// host, within `timeout`); empty without a pipeline.
std::vector<double> per_stage(const comm::ParallelGroups& groups, double seconds, std::chrono::milliseconds timeout);

/// An MoE run's moe.expert_load_factor (engine/model/expert_load.h) from every
/// rank's routing over the run (`moe`, this rank's): each ep rank's rows summed
/// over the rank's ep group, the busiest rank's over one rank's routed pairs,
/// the largest over the dp ranks' ep groups (gathered on the host within
/// `timeout`; every rank of the stage calls it). 0 without MoE layers here or
/// with nothing routed.
double measured_expert_load_factor(const comm::ParallelGroups& groups, const transformer::MoeStatistics& moe,
                                   std::chrono::milliseconds timeout);

}  // namespace sextant::engine::training
