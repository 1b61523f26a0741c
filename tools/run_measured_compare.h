// `run --compare` after training: the measured task times (the run's own when
// it timed its tasks, else a trainer timing them apart: engine/training/
// task_timing.h) beside the simulator's prediction of the same layout
// (reports/compare_prediction.h), as one CompareReport.
#pragma once

#include "engine/comm/parallel_groups.h"
#include "engine/data/token_batches.h"
#include "engine/trainer.h"
#include "engine/training/training_loop.h"
#include "tools/run_compare.h"
#include "tools/run_settings.h"

namespace sextant::tools {

/// Every rank calls it together (the timing trainer's collectives, the pp
/// gather of each stage's compute). `record` has no timed tasks: the caller has
/// freed its trainer, and `timed_steps` more steps of `data` are timed apart.
CompareReport measured_compare(const RunSettings& s, const sim::ModelConfig& trained,
                               const engine::TrainerOptions& options, const engine::comm::ParallelGroups& groups,
                               const engine::training::TrainingRecord& record, engine::data::TokenBatches& data,
                               const std::string& device_name, int seq, int timed_steps);

}  // namespace sextant::tools
