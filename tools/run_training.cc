// `sextant run` on the GPU: builds the rank's trainer and the training loop's
// pieces (engine/training/), loads and saves checkpoints, and prints — the
// progress lines, the summary and the JSON. Built only with the CUDA toolkit.
//
// Parallel runs: every rank reads the whole global batch from the same seeded
// data stream and the trainer takes its micro-batches from it; rank 0 prints,
// the others are silent; all ranks stop after the same step (the loop's stop vote).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string_view>
#include <vector>

#include "engine/checkpoint/checkpoint_directory.h"
#include "engine/checkpoint/checkpoint_sharding.h"
#include "engine/comm/communicator.h"
#include "engine/data/data_error.h"
#include "engine/data/token_batches.h"
#include "engine/launch/step_watchdog.h"
#include "engine/model/lr_schedule.h"
#include "engine/model/nonfinite_step.h"
#include "engine/model/transformer_shape.h"
#include "engine/trainer.h"
#include "engine/comm/host_gather.h"
#include "engine/training/rank_trainer.h"
#include "engine/training/stop_vote.h"
#include "engine/training/training_loop.h"
#include "kernels/cuda_check.h"
#include "sim/core/config_error.h"
#include "sim/core/gpu_preset_name.h"
#include "sim/core/preset_catalog.h"
#include "sim/core/text_format.h"
#include "sim/flops/model_flops.h"
#include "sim/memory/memory_model.h"
#include "tools/run_checkpoint.h"
#include "tools/rank_output_path.h"
#include "tools/run_compare.h"
#include "tools/run_settings.h"

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

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

struct Device {
  int index = 0;
  std::string name;
  std::size_t memory_bytes = 0;
};

Device open_device(int index) {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess || count == 0)
    throw_option_error("--device", "", std::string("no CUDA GPU is visible (") +
                        (status != cudaSuccess ? cudaGetErrorString(status) : "0 devices") +
                        "); `sextant run` needs one");
  if (index < 0 || index >= count)
    throw_option_error("--device", "", std::to_string(index) + ": this machine has " + std::to_string(count) +
                        " GPU(s), indices 0-" + std::to_string(count - 1));
  SEXTANT_CUDA_CHECK(cudaSetDevice(index));
  cudaDeviceProp prop{};
  SEXTANT_CUDA_CHECK(cudaGetDeviceProperties(&prop, index));
  return Device{index, prop.name, prop.totalGlobalMem};
}

// The GPU preset whose peak FLOP/s MFU divides by: --gpu, or the device's name.
std::optional<sim::GpuConfig> gpu_preset(const RunSettings& s, const Device& device) {
  const sim::PresetCatalog catalog(s.configs_dir);
  if (!s.gpu.empty()) return catalog.gpu(s.gpu);
  const std::string preset = sim::gpu_preset_name(device.name, static_cast<std::int64_t>(device.memory_bytes));
  if (!preset.empty()) return catalog.gpu(preset);
  return std::nullopt;
}

std::string fixed(double value, int decimals) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", decimals, value);
  return text;
}

// Steps the --compare pass times task by task (after one untimed warm-up step).
constexpr int kCompareTimedSteps = 3;

// Per task kind, seconds per step: a fresh trainer launching its kernels one by
// one with CUDA events around each task (the measured step itself replays the
// CUDA graph, which cannot be timed inside), over kCompareTimedSteps steps. It
// joins the rank's dp and tp groups as the measured trainer did (every rank
// times its tasks together, so the collectives meet).
std::map<std::string, double> time_tasks_apart(const sim::ModelConfig& model,
                                               const engine::TransformerShape& shape,
                                               engine::TrainerOptions options,
                                               engine::data::TokenBatches& data,
                                               std::vector<std::int32_t>& inputs,
                                               std::vector<std::int32_t>& targets,
                                               engine::comm::Communicator* data_parallel,
                                               engine::comm::Communicator* tensor_parallel) {
  options.time_tasks = true;
  engine::Trainer trainer(model, shape, options, data_parallel, tensor_parallel);
  std::map<std::string, double> seconds;
  for (int i = 0; i <= kCompareTimedSteps; ++i) {
    data.next(inputs, targets);
    engine::StepResult r = trainer.step(inputs, targets);
    if (i == 0) continue;
    for (const engine::TaskTime& t : r.tasks) seconds[task_kind(t.name)] += t.seconds / kCompareTimedSteps;
  }
  return seconds;
}

// The sharding of every stage's ranks (one for pp = 1): the replica's from
// its trainer; a pipeline's from the layout (engine/checkpoint/
// checkpoint_sharding.h), which must name this rank's stage's tensors in its
// trainer's order — the same ParameterLayouts back to back.
RunSharding run_sharding(const engine::training::RankTrainer& trainer, const sim::ModelConfig& model,
                         const sim::ParallelLayout& layout, int world_rank, std::size_t bucket_elements) {
  if (const engine::Trainer* replica = trainer.replica())
    return {engine::checkpoint::sharding_of(replica->layout(), layout.tp, replica->flat_elements(),
                                            replica->gradient_buckets(), layout.dp, layout.zero >= 1)};
  RunSharding stages = engine::checkpoint::pipeline_sharding(model, layout, bucket_elements);
  const int stage = world_rank / (layout.tp * layout.dp);
  const engine::checkpoint::CheckpointSharding& mine = stages.at(static_cast<std::size_t>(stage));
  std::vector<std::string> described;
  for (const engine::checkpoint::TensorSharding& t : mine.tensors) described.push_back(t.name);
  if (described != trainer.stage()->tensor_names())
    throw std::logic_error("checkpoint: pipeline stage " + std::to_string(stage) +
                           "'s tensors are not the ones engine::checkpoint::pipeline_stage_sharding describes");
  // The distributed optimizer's shards: the trainer's own buckets.
  if (!mine.optimizer_shards.empty() &&
      mine.optimizer_shards != engine::checkpoint::optimizer_shards_of(trainer.stage()->gradient_buckets(), layout.dp))
    throw std::logic_error("checkpoint: pipeline stage " + std::to_string(stage) +
                           "'s gradient buckets are not the ones engine::checkpoint::pipeline_stage_sharding describes");
  return stages;
}

}  // namespace

int run_training(PreparedRun& run, std::ostream& rank_out) {
  const RunSettings& s = run.settings;
  std::ostream silent(nullptr);  // ranks other than 0
  std::ostream& out = run.world_rank == 0 ? rank_out : silent;
  const int dp = s.layout.dp;
  engine::comm::Communicator* const data_parallel = dp > 1 ? run.data_parallel : nullptr;
  if (dp > 1 && data_parallel == nullptr)
    throw std::logic_error("run_training: dp = " + std::to_string(dp) + " without a data-parallel group");
  const int tp = s.layout.tp;
  engine::comm::Communicator* const tensor_parallel = tp > 1 ? run.tensor_parallel : nullptr;
  if (tp > 1 && tensor_parallel == nullptr)
    throw std::logic_error("run_training: tp = " + std::to_string(tp) + " without a tensor-parallel group");
  const int pp = s.layout.pp;
  engine::comm::Communicator* const pipeline = pp > 1 ? run.pipeline : nullptr;
  if (pp > 1 && pipeline == nullptr)
    throw std::logic_error("run_training: pp = " + std::to_string(pp) + " without a pipeline group");
  const engine::TransformerShape& shape = run.shape;
  const engine::LrSchedule& lr = run.lr;
  engine::data::TokenBatches* data = run.data.get();
  const bool json = s.format == "json";
  std::ostream& progress = run.world_rank != 0 ? silent : json ? std::cerr : out;
  const int seq = shape.seq;
  // The engine has no dropout; the simulator is asked about the model it trains.
  sim::ModelConfig trained = s.model;
  const bool preset_has_dropout = trained.hidden_dropout > 0 || trained.attention_dropout > 0;
  trained.hidden_dropout = 0;
  trained.attention_dropout = 0;
  const sim::MemoryBreakdown predicted = sim::peak_memory_per_gpu(trained, s.layout);
  // The whole global batch's FLOPs; each of the dp·tp·pp GPUs does 1/(dp·tp·pp) of them.
  const double model_flops_per_step = sim::step_flops(trained, s.layout).model_flops;
  const double flops_per_gpu_per_step = model_flops_per_step / (static_cast<double>(dp) * tp * pp);
  const Device device = open_device(s.device);
  const std::optional<sim::GpuConfig> gpu = gpu_preset(s, device);

  engine::TrainerOptions options;
  options.micro_batch = s.layout.mbs;
  options.global_batch = s.layout.gbs;
  options.recompute = s.layout.recompute;
  options.optimizer = {s.adam_beta1, s.adam_beta2, s.adam_eps, s.weight_decay, s.grad_clip};
  options.lr = lr;
  options.seed = s.seed;
  options.init_std = s.init_std;
  options.time_tasks = s.time_tasks;
  options.tune_gemms = s.tune_gemms;
  options.use_cuda_graph = s.use_cuda_graph;
  options.distributed_optimizer = s.layout.zero >= 1;
  options.overlap_param_gather = s.layout.overlap_param_gather;
  options.comm_timeout = std::chrono::milliseconds(static_cast<long long>(s.comm_timeout_s * 1000));
  std::unique_ptr<engine::training::RankTrainer> trainer;
  try {
    trainer = engine::training::make_rank_trainer(trained, s.layout, options,
                                                  {data_parallel, tensor_parallel, pipeline});
  } catch (const kernels::CudaError& e) {
    if (e.status_name() == "cudaErrorMemoryAllocation")
      throw_option_error("--layout", "", "the model and layout need more memory than " + device.name + " has (" +
                          sim::format_gib(device.memory_bytes) + "; the simulator predicts " +
                          sim::format_gib(predicted.total()) + "): lower mbs, or use recompute=full. " + e.what());
    throw;
  }

  const std::size_t tokens_per_step = static_cast<std::size_t>(s.layout.gbs) * seq;
  progress << "model: " << s.model.name << ", " << fixed(trainer->parameter_count() / 1e9, 3)
           << " B parameters" << (pp > 1   ? std::string(" on rank 0 (its pipeline stage") + (tp > 1 ? ", its tp shard)" : ")")
               : tp > 1 ? " on each rank (its tp shard)"
                        : "")
           << "; layout " << (tp > 1 ? "tp=" + std::to_string(tp) + ", " : "")
           << (pp > 1 ? "pp=" + std::to_string(pp) + ", " : "")
           << (s.layout.vpp > 1 ? "vpp=" + std::to_string(s.layout.vpp) + ", " : "") << (dp > 1 ? "dp=" + std::to_string(dp) + ", " : "")
           << "mbs=" << s.layout.mbs << ", gbs=" << s.layout.gbs
           << ", recompute=" << sim::to_string(s.layout.recompute) << "; seq " << seq << "\n"
           << "device: " << device.name << " (" << sim::format_gib(device.memory_bytes) << ")"
           << (gpu ? ", peak bf16 " + fixed(gpu->peak_bf16_flops_per_s / 1e12, 1) + " TFLOP/s (" +
                         gpu->name + ")"
                   : ", no GPU preset matches: MFU not computed (give --gpu)")
           << "\n"
           << "data: " << data->describe()
           << (dp > 1 ? " (each rank reads the global batch and trains micro-batches rank, rank+dp, ...)" : "")
           << "\n"
           << "schedule: lr " << lr.max_lr << " -> " << lr.min_lr << ", warmup " << lr.warmup_steps
           << ", cosine to step " << lr.decay_steps << "; " << trainer->tasks_per_step()
           << " tasks per step\n";
  if (preset_has_dropout) progress << "note: the engine has no dropout; training with dropout 0\n";
  progress << "memory: arena " << sim::format_gib(trainer->arena_bytes(), 2)
           << "; the simulator predicts " << sim::format_gib(predicted.total(), 2) << "\n";
  if (dp > 1)
    progress << "data parallel: " << dp << " ranks, " << trainer->local_microbatches()
             << " micro-batches each per step, gradients "
             << (options.distributed_optimizer ? "reduce-scattered" : "summed") << " in "
             << trainer->gradient_buckets() << (pp > 1 ? " buckets (rank 0's stage) overlapped with the schedule's backward" : " buckets overlapped with backward")
             << (options.distributed_optimizer ? "; distributed optimizer: fp32 master weights and Adam "
                                                 "moments sharded, bf16 weights all-gathered"
                                               : "")
             << (options.overlap_param_gather ? " during the next step's forward (overlap_param_gather)" : "")
             << "; TFLOP/s, MFU and memory are rank 0's GPU's\n";
  if (tp > 1)
    progress << "tensor parallel: " << tp << " ranks, each with 1/" << tp
             << " of the heads, the MLP (QKV and fc1 column-, proj and fc2 row-parallel) and the vocabulary "
                "(embedding and cross entropy vocabulary-parallel, "
             << shape.vocab << " rows each)"
             << (shape.sequence_parallel ? "; sequence parallel: the residual stream and norms on 1/" +
                                               std::to_string(tp) + " of the tokens each"
                                         : "; norms replicated")
             << "\n";
  if (pp > 1)
    progress << "pipeline parallel: " << pp << " stages" << (s.layout.vpp > 1 ? " of " + std::to_string(s.layout.vpp) + " model chunks each" : "")
             << " (" << sim::to_string(trainer->stage()->plan().shape.schedule) << ", layers "
             << trainer->stage()->plan().shape.split.describe() << "); activations sent and received per micro-batch; "
             << "loss from the last stage\n";
  if (!json)
    progress << "  step      loss        lr  grad_norm   step_ms   tokens/s  TFLOP/s    MFU  mem_GiB\n";
  progress.flush();

  g_interrupted.store(false);
  auto previous_sigint = std::signal(SIGINT, on_interrupt);
  auto previous_sigterm = std::signal(SIGTERM, on_interrupt);
  const int warmup_for_timing = std::min(3, s.steps - 1);  // the first steps pay one-off costs
  engine::training::StopVote vote(data_parallel, tensor_parallel, pipeline, options.comm_timeout);
  // --load: the rank's shard into the trainer, and the data stream advanced past
  // the batches the saved run drew (the same seeded stream: check_checkpoint_fits).
  int first_batch = 0;
  // How the ranks' arrays are cut: a replica's, or each pipeline stage's by
  // the whole model's tensor names (checked against this rank's stage).
  const bool checkpoints = run.checkpoint.has_value() || !s.save_dir.empty();
  const RunSharding sharding = checkpoints ? run_sharding(*trainer, trained, s.layout, run.world_rank, options.bucket_elements) : RunSharding{};
  if (run.checkpoint) {
    const engine::checkpoint::TrainerState state = load_rank_state(*run.checkpoint, run, sharding);
    try {
      trainer->restore(state);
    } catch (const std::invalid_argument& e) {
      throw sim::ConfigError({{run.checkpoint->folder, 0, 0, "--load", e.what()}});
    }
    first_batch = static_cast<int>(run.checkpoint->metadata.data_batches);
    try {
      std::vector<std::int32_t> inputs(tokens_per_step), targets(tokens_per_step);
      for (int i = 0; i < first_batch; ++i) data->next(inputs, targets);
    } catch (const engine::data::DataError& e) {
      throw sim::ConfigError({{e.file(), 0, 0, "--data", e.reason()}});
    }
    const engine::checkpoint::CheckpointLayout& saved = run.checkpoint->metadata.layout;
    progress << "resumed from " << run.checkpoint->folder << ": step " << run.checkpoint->metadata.step << ", "
             << first_batch << " batches of the data stream skipped";
    if (!same_arrays(*run.checkpoint, run, sharding))
      progress << "; resharded from tp=" << saved.tp << ", dp=" << saved.dp << ", zero=" << saved.zero
               << (saved.pp > 1 || pp > 1 ? ", pp=" + std::to_string(saved.pp) + ", vpp=" + std::to_string(saved.vpp) : "")
               << (saved.pp == pp && saved.vpp == s.layout.vpp && pp > 1 ? " (another layer split)" : "");
    progress << "\n";
    progress.flush();
  }
  int saved_after_batch = first_batch;
  auto save = [&](int batches_drawn) {
    const auto start = std::chrono::steady_clock::now();
    const engine::checkpoint::TrainerState state = trainer->state();
    const std::uint64_t described = sharding.at(static_cast<std::size_t>(run.world_rank / (tp * dp))).flat_elements;
    if (state.weights_bf16.size() != described)
      throw std::logic_error("checkpoint: rank " + std::to_string(run.world_rank) + " holds " +
                             std::to_string(state.weights_bf16.size()) + " weights; its stage's sharding describes " +
                             std::to_string(described));
    const std::string folder = save_checkpoint(
        run, checkpoint_metadata_of(run, trainer->steps_done(), batches_drawn, sharding), state,
        [&](bool failed) { return vote.any_rank(failed); });
    saved_after_batch = batches_drawn;
    progress << "saved checkpoint " << folder << " in "
             << fixed(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 2) << " s\n";
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
  hooks.after_step = [&](const engine::StepResult& r, int steps_so_far, std::size_t peak_bytes) {
    if (steps_so_far % s.log_interval != 0 && steps_so_far != s.steps) return;
    const double tflops = flops_per_gpu_per_step / r.seconds / 1e12;
    char line[200];
    std::snprintf(line, sizeof line, "%6d %9.4f %9.3e %10.3f %9.1f %10.0f %8.1f %6s %8.2f%s\n",
                  r.step, r.loss, r.lr, r.grad_norm, r.seconds * 1e3,
                  tokens_per_step / r.seconds, tflops,
                  gpu ? fixed(100 * tflops * 1e12 / gpu->peak_bf16_flops_per_s, 1).c_str() : "-",
                  peak_bytes / kGiB, r.skipped ? "  (skipped: non-finite gradient norm)" : "");
    progress << line;
    progress.flush();
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
  const int done = record.steps();
  const int skipped = record.skipped_steps;
  const std::size_t peak_in_use = record.peak_memory_bytes;
  const int timed_steps = record.timed_task_steps;
  const std::vector<double>& losses = record.losses;
  const std::vector<double>& lrs = record.lrs;
  const std::vector<double>& norms = record.grad_norms;
  const std::vector<engine::TaskTime>& last_tasks = record.last_tasks;
  std::map<std::string, double> task_seconds;  // by kind, summed over timed steps
  for (const auto& [name, seconds] : record.task_seconds) task_seconds[task_kind(name)] += seconds;

  const double step_s = record.median_step_s();
  const double tokens_per_s = step_s > 0 ? tokens_per_step / step_s : 0;
  const double tflops = step_s > 0 ? flops_per_gpu_per_step / step_s / 1e12 : 0;
  const double mfu = gpu && step_s > 0 ? tflops * 1e12 / gpu->peak_bf16_flops_per_s : 0;
  const auto arena = trainer->memory_plan().bytes_by_category();
  const std::size_t arena_bytes = trainer->arena_bytes();
  const auto parameter_count = trainer->parameter_count();

  if (!s.timing_file.empty() && !last_tasks.empty()) {
    // Every rank times its own tasks: one file each (rank_output_path.h).
    const std::string timing_file = rank_output_path(s.timing_file, run.world_rank, static_cast<int>(s.layout.total_gpus()));
    std::ofstream csv(timing_file);
    if (!csv) throw_option_error("--timing-file", "", "cannot write '" + timing_file + "'");
    csv << "task,seconds\n";
    for (const engine::TaskTime& t : last_tasks) csv << t.name << "," << t.seconds << "\n";
  }

  std::optional<CompareReport> compare;
  if (s.compare && !interrupted && step_s > 0) {
    std::map<std::string, double> measured;
    if (timed_steps > 0) {
      for (const auto& [kind, seconds] : task_seconds) measured[kind] = seconds / timed_steps;
    } else {
      progress << "compare: timing each task of " << kCompareTimedSteps
               << " more steps with CUDA events (kernels launched one by one)\n";
      progress.flush();
      trainer.reset();  // its memory, before the timing trainer takes the same again
      std::vector<std::int32_t> inputs(tokens_per_step), targets(tokens_per_step);
      measured = time_tasks_apart(trained, shape, options, *data, inputs, targets, data_parallel, tensor_parallel);
    }
    const ComparePrediction predicted =
        predict_for_compare(trained, s.cluster, s.profile, s.layout);
    // A pipeline: every stage's measured compute, gathered over the rank's pp group.
    std::vector<double> stage_compute_s;
    if (pipeline != nullptr)
      for (const float each : engine::comm::all_gather_on_host(*pipeline,
                                                               static_cast<float>(measured_compute_s(predicted, measured)),
                                                               options.comm_timeout))
        stage_compute_s.push_back(each);
    compare = make_compare_report(predicted, step_s, measured, stage_compute_s);
    compare->model = s.model_argument;
    compare->parallel_layout = s.layout;
    compare->layout = compare_layout_text(s.layout);
    compare->profile_name = s.profile.name;
    compare->software = s.profile.software;
    compare->device = device.name;
    compare->seq_length = seq;
    // Rank 0's view (the first pipeline stage's tasks, the Plan's stage 0), written once.
    if (!s.report_dir.empty() && run.world_rank == 0) write_compare_report(*compare, s.report_dir);
  }

  if (json) {
    nlohmann::ordered_json j;
    j["model"] = s.model.name;
    j["device"] = device.name;
    j["layout"] = {{"tp", tp}, {"sp", s.layout.sp}, {"pp", pp}, {"vpp", s.layout.vpp}, {"dp", dp}, {"zero", s.layout.zero},
                   {"mbs", s.layout.mbs}, {"gbs", s.layout.gbs},
                   {"recompute", std::string(sim::to_string(s.layout.recompute))},
                   {"tp_comm_overlap", s.layout.tp_comm_overlap}, {"overlap_param_gather", s.layout.overlap_param_gather}};
    j["seq_length"] = seq;
    j["parameters"] = parameter_count;
    j["data"] = s.data;
    j["steps"] = done;
    j["interrupted"] = interrupted;
    j["skipped_steps"] = skipped;
    j["step_time_s"] = step_s;
    j["tokens_per_s"] = tokens_per_s;
    j["model_flops_per_step"] = model_flops_per_step;
    j["tflops_per_s"] = tflops;
    j["mfu"] = gpu ? nlohmann::ordered_json(mfu) : nlohmann::ordered_json(nullptr);
    j["peak_memory_bytes"] = peak_in_use;
    j["arena_bytes"] = arena_bytes;
    nlohmann::ordered_json by_category;
    for (int c = 0; c < engine::kMemoryCategories; ++c)
      by_category[engine::to_string(static_cast<engine::MemoryCategory>(c))] = arena[static_cast<std::size_t>(c)];
    j["memory_bytes"] = by_category;
    j["predicted_memory_bytes"] = {{"total", predicted.total()},
                                   {"parameters", predicted.parameters},
                                   {"gradients", predicted.gradients},
                                   {"optimizer_states", predicted.optimizer_states},
                                   {"activations", predicted.activations},
                                   {"other", predicted.other}};
    j["loss"] = losses;
    j["lr"] = lrs;
    j["grad_norm"] = norms;
    if (timed_steps > 0) {
      nlohmann::ordered_json tasks;
      for (const auto& [kind, seconds] : task_seconds) tasks[kind] = seconds / timed_steps;
      j["task_seconds_per_step"] = tasks;
    }
    if (compare) j["compare"] = compare_json(*compare);
    out << j.dump() << "\n";
  } else {
    out << "\n" << done << " steps" << (interrupted ? " (interrupted: stopped after the current step)" : "")
        << (skipped ? ", " + std::to_string(skipped) + " skipped" : "") << "; median over steps "
        << warmup_for_timing + 1 << "-" << done << ": " << fixed(step_s * 1e3, 1) << " ms/step, "
        << fixed(tokens_per_s, 0) << " tokens/s, " << fixed(tflops, 1) << " TFLOP/s"
        << (gpu ? ", MFU " + sim::format_percent(mfu) : "") << "\n";
    out << "GPU memory: peak in use " << sim::format_gib(peak_in_use, 2) << " (arena "
        << sim::format_gib(arena_bytes, 2) << ", the rest CUDA context and libraries)\n";
    out << "  engine arena vs simulator (GiB):";
    const double predicted_parts[] = {predicted.parameters, predicted.gradients,
                                      predicted.optimizer_states, predicted.activations, predicted.other};
    for (int c = 0; c < engine::kMemoryCategories; ++c)
      out << " " << engine::to_string(static_cast<engine::MemoryCategory>(c)) << " "
          << fixed(arena[static_cast<std::size_t>(c)] / kGiB, 2) << " vs "
          << fixed(predicted_parts[c] / kGiB, 2) << ";";
    out << " total " << fixed(arena_bytes / kGiB, 2) << " vs "
        << fixed(predicted.total() / kGiB, 2) << " ("
        << sim::format_percent(arena_bytes / predicted.total() - 1) << ")\n";
    if (timed_steps > 0) {
      std::vector<std::pair<double, std::string>> rows;
      double total = 0;
      for (const auto& [kind, seconds] : task_seconds) {
        rows.emplace_back(seconds / timed_steps, kind);
        total += seconds / timed_steps;
      }
      std::sort(rows.rbegin(), rows.rend());
      out << "task time per step (CUDA events, " << timed_steps << " steps), slowest kinds:\n";
      for (std::size_t i = 0; i < rows.size() && i < 12; ++i)
        out << "  " << rows[i].second << std::string(rows[i].second.size() < 28 ? 28 - rows[i].second.size() : 1, ' ')
            << fixed(rows[i].first * 1e3, 2) << " ms  " << sim::format_percent(rows[i].first / total) << "\n";
    }
  }
  if (compare && !json) out << "\n" << compare_table(*compare);
  out.flush();
  return interrupted ? 130 : 0;
}

}  // namespace sextant::tools
