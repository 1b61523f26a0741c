// `sextant run` on the GPU: builds the rank's trainer and the training loop's
// pieces (engine/training/), loads and saves checkpoints, and prints — the
// progress lines, the summary and the JSON. Built only with the CUDA toolkit.
//
// Parallel runs: every rank reads the whole global batch from the same seeded
// data stream and the trainer takes its micro-batches from it; rank 0 prints,
// the others are silent; all ranks stop after the same step (the loop's stop vote).
#include <cuda_runtime_api.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <optional>
#include <vector>

#include "engine/data/data_error.h"
#include "engine/data/token_batches.h"
#include "engine/launch/step_watchdog.h"
#include "engine/model/nonfinite_step.h"
#include "engine/trainer.h"
#include "engine/comm/parallel_groups.h"
#include "engine/training/rank_checkpoints.h"
#include "engine/training/stop_vote.h"
#include "engine/training/trainer_sharding.h"
#include "kernels/cuda_check.h"
#include "sim/core/config_error.h"
#include "sim/core/text_format.h"
#include "tools/run_checkpoint.h"
#include "tools/rank_output_path.h"
#include "tools/run_compare.h"
#include "tools/run_measured_compare.h"
#include "tools/run_moe_output.h"
#include "tools/run_output.h"
#include "tools/run_settings.h"
#include "tools/visible_gpu.h"

namespace sextant::tools {

namespace {

// Set by the SIGINT handler, read between steps. A signal handler can only
// talk to the program through a lock-free atomic with static storage; this is
// the one such variable, private to this file.
std::atomic<bool> g_interrupted{false};
static_assert(std::atomic<bool>::is_always_lock_free);

// Ctrl-C (SIGINT) or a scheduler's SIGTERM: stop after the current step. A
// second signal of the same kind ends the process at once.
extern "C" void on_interrupt(int signal_number) {
  g_interrupted.store(true);
  std::signal(signal_number, SIG_DFL);
}

struct Device {
  std::string name;
  std::size_t memory_bytes = 0;
};

Device open_device(int index) {
  require_visible_gpu("--device", "device", index);
  SEXTANT_CUDA_CHECK(cudaSetDevice(index));
  cudaDeviceProp prop{};
  SEXTANT_CUDA_CHECK(cudaGetDeviceProperties(&prop, index));
  return Device{prop.name, prop.totalGlobalMem};
}

// Steps the --compare pass times task by task (after one untimed warm-up step).
constexpr int kCompareTimedSteps = 3;

}  // namespace

int run_training(PreparedRun& run, std::ostream& rank_out) {
  const RunSettings& s = run.settings;
  std::ostream silent(nullptr);  // ranks other than 0
  std::ostream& out = run.world_rank == 0 ? rank_out : silent;
  const engine::comm::ParallelGroups one_gpu;
  const engine::comm::ParallelGroups& groups = run.groups != nullptr ? *run.groups : one_gpu;
  const engine::TransformerShape& shape = run.shape;
  const engine::LrSchedule& lr = run.lr;
  engine::data::TokenBatches* data = run.data.get();
  const bool json = s.format == "json";
  std::ostream& progress = run.world_rank != 0 ? silent : json ? std::cerr : out;
  const int seq = shape.seq * shape.cp;  // the whole sequence: shape.seq is a cp rank's S/cp tokens
  // The engine has no dropout; the simulator is asked about the model it trains.
  sim::ModelConfig trained = s.model;
  const bool preset_has_dropout = trained.hidden_dropout > 0 || trained.attention_dropout > 0;
  trained.hidden_dropout = 0;
  trained.attention_dropout = 0;
  const Device device = open_device(s.device);
  const RunFacts facts = run_facts(s, trained, seq, device.name, device.memory_bytes, preset_has_dropout);

  engine::TrainerOptions options;
  options.optimizer = {s.adam_beta1, s.adam_beta2, s.adam_eps, s.weight_decay, s.grad_clip};
  options.lr = lr;
  options.seed = s.seed;
  options.init_std = s.init_std;
  options.time_tasks = s.time_tasks;
  options.tune_gemms = s.tune_gemms;
  options.use_cuda_graph = s.use_cuda_graph;
  options.moe = s.moe;
  options.comm_timeout = std::chrono::milliseconds(static_cast<long long>(s.comm_timeout_s * 1000));
  std::unique_ptr<engine::Trainer> trainer;
  try {
    trainer = std::make_unique<engine::Trainer>(trained, s.layout, options, groups);
  } catch (const kernels::CudaError& e) {
    if (e.status_name() == "cudaErrorMemoryAllocation")
      throw_option_error("--layout", "", "the model and layout need more memory than " + device.name + " has (" +
                          sim::format_gib(device.memory_bytes) + "; the simulator predicts " +
                          sim::format_gib(facts.predicted.total()) + "): lower mbs, or use recompute=full. " + e.what());
    throw;
  }

  const std::size_t tokens_per_step = facts.tokens_per_step;
  print_run_header(progress, s, lr, facts, *trainer, *data);

  g_interrupted.store(false);
  auto previous_sigint = std::signal(SIGINT, on_interrupt);
  auto previous_sigterm = std::signal(SIGTERM, on_interrupt);
  const int warmup_for_timing = std::min(3, s.steps - 1);  // the first steps pay one-off costs
  engine::training::StopVote vote(groups, options.comm_timeout);
  // --load: the rank's shard into the trainer, and the data stream advanced past
  // the batches the saved run drew (the same seeded stream: check_checkpoint_fits).
  int first_batch = 0;
  // How the ranks' arrays are cut: a replica's, or each pipeline stage's by
  // the whole model's tensor names (checked against this rank's stage).
  const bool checkpoints = run.checkpoint.has_value() || !s.save_dir.empty();
  const RunSharding sharding =
      checkpoints ? engine::training::trainer_sharding(*trainer, trained, options.bucket_elements) : RunSharding{};
  if (run.checkpoint) {
    try {
      first_batch = engine::training::restore_rank(*trainer, *run.checkpoint, run.world_rank, sharding, *data,
                                                   tokens_per_step);
    } catch (const std::invalid_argument& e) {
      throw sim::ConfigError({{run.checkpoint->folder, 0, 0, "--load", e.what()}});
    } catch (const engine::data::DataError& e) {
      throw sim::ConfigError({{e.file(), 0, 0, "--data", e.reason()}});
    }
    print_resumed(progress, s.layout, *run.checkpoint, first_batch, !same_arrays(*run.checkpoint, run, sharding));
  }
  int saved_after_batch = first_batch;
  auto save = [&](int batches_drawn) {
    const auto start = std::chrono::steady_clock::now();
    const std::string folder = engine::training::save_rank(
        *trainer, checkpoint_metadata_of(run, trainer->steps_done(), batches_drawn, sharding), sharding, s.save_dir,
        s.keep, run.world_rank, [&](bool failed) { return vote.any_rank(failed); });
    saved_after_batch = batches_drawn;
    progress << "saved checkpoint " << folder << " in "
             << sim::format_fixed(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 2)
             << " s\n";
    progress.flush();
  };
  // Several ranks: a step still running a minute past --comm-timeout-s means the
  // host is blocked inside a library call that the communicators' own timeout
  // cannot reach; end the process with one line, so the launcher stops all.
  std::optional<engine::launch::StepWatchdog> watchdog;
  if (vote.spans_ranks())
    watchdog.emplace(options.comm_timeout + std::chrono::minutes(1),
                     [rank = run.world_rank, timeout_s = s.comm_timeout_s](std::int64_t step, std::chrono::milliseconds limit) {
                       std::cerr << "sextant: error: rank " << rank << ": step " << step << " did not return within "
                                 << std::chrono::duration<double>(limit).count() << " s (--comm-timeout-s " << timeout_s
                                 << " plus 60): the host is blocked inside a collective or driver call; ending "
                                    "this rank so that the launcher stops the others\n";
                       std::_Exit(1);
                     });
  engine::training::LoopSettings loop;
  loop.tokens_per_step = tokens_per_step;
  loop.first_batch = first_batch;
  loop.steps = s.steps;
  loop.untimed_steps = warmup_for_timing;
  loop.on_nonfinite = s.on_nonfinite;
  loop.save_interval = s.save_dir.empty() ? 0 : s.save_interval;
  engine::training::LoopHooks hooks;
  hooks.stop_requested = [] { return g_interrupted.load(); };
  hooks.save = save;
  hooks.watchdog = watchdog ? &*watchdog : nullptr;
  engine::transformer::MoeStatistics moe_since_log;  // an MoE model's routing since the last progress line
  hooks.after_step = [&](const engine::StepResult& r, int steps_so_far, std::size_t peak_bytes) {
    engine::transformer::accumulate(moe_since_log, r.moe);
    if (steps_so_far % s.log_interval != 0 && steps_so_far != s.steps) return;
    progress << progress_line(facts, r, peak_bytes) << moe_progress_line(moe_since_log);
    progress.flush();
    moe_since_log = {};
  };
  engine::training::TrainingRecord record;
  try {
    record = engine::training::train(*trainer, *data, vote, loop, hooks);
  } catch (const engine::data::DataError& e) {
    throw sim::ConfigError({{e.file(), 0, 0, "--data", e.reason()}});
  }
  watchdog.reset();
  if (record.nonfinite) {
    const engine::training::NonFiniteStop& n = *record.nonfinite;
    if (run.world_rank == 0)
      std::cerr << "sextant: error: " << engine::nonfinite_step_message(n.step, n.loss, n.grad_norm, n.tensor)
                << "; stopping" << (std::isfinite(n.grad_norm) ? "" : " (this step did not update the weights)")
                << "; --on-nonfinite skip would go on\n";
    std::signal(SIGINT, previous_sigint);
    std::signal(SIGTERM, previous_sigterm);
    return kNonFiniteExitCode;
  }
  if (!s.save_dir.empty() && record.batches_drawn > saved_after_batch) save(record.batches_drawn);
  std::signal(SIGINT, previous_sigint);
  std::signal(SIGTERM, previous_sigterm);
  const bool interrupted = record.interrupted;
  const int timed_steps = record.timed_task_steps;
  const std::vector<engine::TaskTime>& last_tasks = record.last_tasks;
  std::map<std::string, double> task_seconds;  // by kind, summed over timed steps
  for (const auto& [name, seconds] : record.task_seconds) task_seconds[task_kind(name)] += seconds;
  const double step_s = record.median_step_s();
  const TrainerSummary summary{trainer->parameter_count(), trainer->arena_bytes(),
                               trainer->memory_plan().bytes_by_category()};

  // Every rank times its own tasks: one file each (rank_output_path.h).
  if (!s.timing_file.empty() && !last_tasks.empty())
    write_timing_file(rank_output_path(s.timing_file, run.world_rank, static_cast<int>(s.layout.total_gpus())),
                      last_tasks);

  std::optional<CompareReport> compare;
  if (s.compare && !interrupted && step_s > 0) {
    if (timed_steps == 0) {
      progress << "compare: timing each task of " << kCompareTimedSteps
               << " more steps with CUDA events (kernels launched one by one)\n";
      progress.flush();
      trainer.reset();  // its memory, before the timing trainer takes the same again
    }
    compare = measured_compare(s, trained, options, groups, record, *data, device.name, seq, kCompareTimedSteps);
    // Rank 0's view (the first pipeline stage's tasks, the Plan's stage 0), written once.
    if (!s.report_dir.empty() && run.world_rank == 0) write_compare_report(*compare, s.report_dir);
  }

  print_run_summary(out, s, facts, summary, record, warmup_for_timing, task_seconds, compare);
  return interrupted ? 130 : 0;
}

}  // namespace sextant::tools
