// What `sextant run` was asked to do, checked: the model, its layout (one
// GPU, or data-parallel over the ranks a launcher started) and the training
// options. Built by run_command.cc without touching a
// GPU (so bad input is rejected anywhere), executed by run_training.cc.
#pragma once

#include "tools/run_layout.h"  // throw_option_error

#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>
#include <string>

#include "engine/checkpoint/checkpoint_directory.h"
#include "engine/data/token_batches.h"
#include "engine/model/lr_schedule.h"
#include "engine/model/nonfinite_step.h"
#include "engine/transformer/moe_options.h"
#include "engine/model/transformer_shape.h"
#include "sim/core/cost_profile.h"
#include "sim/core/hardware_config.h"
#include "sim/core/model_config.h"
#include "sim/core/parallel_layout.h"

namespace sextant::engine::comm {
class Communicator;
}

namespace sextant::engine::comm {
struct ParallelGroups;
}

namespace sextant::tools {

struct RunSettings {
  sim::ModelConfig model;
  sim::ParallelLayout layout;  // pp = cp = ep = 1; tp·dp = the ranks started
  std::string data = "synthetic";  // or an indexed dataset prefix
  int steps = 100;
  double lr = 3e-4;
  double min_lr = -1;      // < 0: lr / 10
  int warmup_steps = -1;   // < 0: steps / 10 (at most 2000)
  int lr_decay_steps = -1; // < 0: steps
  double weight_decay = 0.1;
  double grad_clip = 1.0;
  double adam_beta1 = 0.9;
  double adam_beta2 = 0.95;
  double adam_eps = 1e-8;
  double init_std = 0.02;
  std::uint64_t seed = 1234;
  int log_interval = 1;
  int device = 0;
  std::string gpu;          // GPU preset for the peak FLOP/s; empty: from the device's name
  std::string format = "table";
  bool time_tasks = false;
  bool tune_gemms = true;      // --no-gemm-tuning turns it off
  bool use_cuda_graph = true;  // --no-cuda-graph turns it off
  std::string timing_file;  // per-task times (CSV) when time_tasks
  std::string configs_dir;
  std::string model_argument;  // --model as given (a preset name or a path), for --compare's JSON
  /// --compare: the event simulator's prediction with `profile` on `cluster`
  /// beside the measured step and task times; --report DIR writes it as files.
  bool compare = false;
  std::string report_dir;
  sim::CostProfile profile;
  sim::ClusterConfig cluster;
  std::string layout_note;  // how --layout best was chosen (empty otherwise)
  std::string cluster_note;  // why the predicted-for cluster may not be this machine (tools/run_cluster.h)
  /// Checkpoints (engine/checkpoint/): --save DIR every --save-interval steps
  /// (0: only at the end), keeping the last --keep; --load DIR (a step folder,
  /// or a checkpoint folder whose `latest` names one) before the first step.
  std::string save_dir;
  int save_interval = 0;
  int keep = 2;
  std::string load_dir;
  /// A step whose loss or gradient norm is not finite: --on-nonfinite stop
  /// (exit code kNonFiniteExitCode, naming the step and the first parameter
  /// whose gradient is not finite) or skip (no update, as Megatron does).
  std::string on_nonfinite_text = "stop";
  engine::NonFinitePolicy on_nonfinite = engine::NonFinitePolicy::kStop;
  /// --comm-timeout-s: the longest a rank waits for a step's collectives
  /// before every group is aborted and the run fails naming the collective.
  double comm_timeout_s = 600;
  /// An MoE model's routing options (--moe-*); --moe-grouped-gemm as given
  /// ("auto", "cublas-grouped", "cublaslt-loop"), parsed into moe.gemm_backend.
  engine::transformer::MoeOptions moe;
  std::string moe_grouped_gemm = "auto";
  /// --moe-router-score-function as given ("softmax", "sigmoid"), parsed into
  /// moe.score_function; --moe-router-enable-expert-bias and
  /// --moe-router-bias-update-rate, checked into moe.expert_bias_update_rate
  /// (the rate when enabled, else 0).
  std::string moe_score_function = "softmax";
  bool moe_expert_bias = false;
  double moe_bias_update_rate = 1e-3;
};

/// `sextant run`'s exit code after a non-finite step under --on-nonfinite stop
/// (1 is an internal error, 2 bad input, 130 an interrupt).
inline constexpr int kNonFiniteExitCode = 3;


/// What the settings imply, derived and checked before any GPU is touched.
struct PreparedRun {
  RunSettings settings;
  engine::TransformerShape shape;  // one rank's shard (heads, groups, ffn / tp)
  engine::LrSchedule lr;
  std::unique_ptr<engine::data::TokenBatches> data;
  /// The rank's parallel groups (owned by the launched job; null: one GPU),
  /// and its rank in the world: only rank 0 prints.
  const engine::comm::ParallelGroups* groups = nullptr;
  int world_rank = 0;
  /// --load: the checkpoint, its metadata checked against the model, layout,
  /// schedule and seed (tools/run_checkpoint.h); the rank's shard is read by
  /// run_training.
  std::optional<engine::checkpoint::OpenedCheckpoint> checkpoint;
};

/// Throws sim::ConfigError (exit code 2) naming the option at fault: a model
/// the kernels cannot run, a bad schedule, a dataset that is missing, damaged
/// or too short.
PreparedRun prepare_run(const RunSettings& settings);

/// Trains as `run` says, printing progress to `out` (and, with --format
/// json, one JSON object at the end); a rank other than 0 prints nothing. Returns the exit code: 0, kNonFiniteExitCode after a non-finite step (--on-nonfinite stop), or 130 when
/// interrupted by Ctrl-C (after printing what was done). Throws sim::ConfigError
/// for bad input found late (no GPU, a dataset that does not fit the model).
int run_training(PreparedRun& run, std::ostream& out);

}  // namespace sextant::tools
