// What `sextant run` prints: the header before training, one progress line
// per logged step, and the summary (text, or one JSON object with
// --format json) after it. Printing only; run_training.cc trains.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "engine/checkpoint/checkpoint_directory.h"
#include "engine/data/token_batches.h"
#include "engine/trainer.h"
#include "engine/training/training_loop.h"
#include "sim/core/hardware_config.h"
#include "sim/memory/memory_model.h"
#include "tools/run_compare.h"
#include "tools/run_settings.h"

namespace sextant::tools {

/// What the run knows before it trains, for every line it prints.
struct RunFacts {
  std::string device_name;
  std::size_t device_memory_bytes = 0;
  std::optional<sim::GpuConfig> gpu;  // MFU's peak; none when no preset matches the device
  sim::MemoryBreakdown predicted;     // the simulator's memory of one rank
  double model_flops_per_step = 0;    // the whole global batch's
  double flops_per_gpu_per_step = 0;
  std::size_t tokens_per_step = 0;
  bool preset_had_dropout = false;
};

/// The facts of `s`'s run of `trained` (the model as the engine trains it) at
/// sequence `seq` on the device: the GPU preset whose peak MFU divides by
/// (--gpu, or the device's name and memory: sim::gpu_preset_name), the
/// simulator's memory of a rank, the FLOPs.
RunFacts run_facts(const RunSettings& s, const sim::ModelConfig& trained, int seq, const std::string& device_name,
                   std::size_t device_memory_bytes, bool preset_had_dropout);

/// Model, device, data, schedule, memory and the layout's parallelism, then the
/// progress table's heading (text format).
void print_run_header(std::ostream& out, const RunSettings& s, const engine::LrSchedule& lr, const RunFacts& facts,
                      const engine::Trainer& trainer, const engine::data::TokenBatches& data);

/// One step's progress line.
std::string progress_line(const RunFacts& facts, const engine::StepResult& r, std::size_t peak_bytes);

/// The line saying where a --load resumed, after how many batches, and from
/// which layout when the arrays were resharded.
void print_resumed(std::ostream& out, const sim::ParallelLayout& layout,
                   const engine::checkpoint::OpenedCheckpoint& checkpoint, int batches, bool resharded);

/// --timing-file: the last timed step's tasks as CSV (task,seconds) into `path`;
/// a path that cannot be written is bad input (exit code 2).
void write_timing_file(const std::string& path, const std::vector<engine::TaskTime>& tasks);

/// What the summary reports of the trainer, read before --compare frees it.
struct TrainerSummary {
  std::int64_t parameters = 0;
  std::size_t arena_bytes = 0;
  std::array<std::size_t, engine::kMemoryCategories> arena_by_category{};
};

/// The summary after training: steps, step time, tokens/s, MFU, memory against
/// the simulator's, the slowest task kinds when timed, --compare's table.
/// `task_seconds`: by kind, summed over the record's timed steps.
void print_run_summary(std::ostream& out, const RunSettings& s, const RunFacts& facts, const TrainerSummary& trainer,
                       const engine::training::TrainingRecord& record, int untimed_steps,
                       const std::map<std::string, double>& task_seconds, const std::optional<CompareReport>& compare);

}  // namespace sextant::tools
