// `sextant run`: train a model on this machine's GPU with the engine.
#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <vector>
#include <iostream>
#include <optional>
#include <ostream>
#include <string_view>
#include <utility>

#include <filesystem>

#include "engine/data/data_error.h"
#include "engine/launch/run_launcher.h"
#include "search/layout_search.h"
#include "sim/core/config_error.h"
#include "sim/core/layout_check.h"
#include "sim/core/pipeline_split.h"
#include "sim/core/preset_catalog.h"
#include "tools/commands.h"
#include "tools/numeric_option.h"
#include "tools/planning_inputs.h"
#include "tools/run_checkpoint.h"
#include "tools/run_cluster.h"
#include "tools/run_layout.h"
#include "tools/run_settings.h"
#ifdef SEXTANT_HAVE_ENGINE
#include <cuda_runtime_api.h>

#include "engine/calibration/device_info.h"
#include "engine/calibration/gpu_preset_name.h"
#endif
#ifdef SEXTANT_HAVE_NCCL
#include "engine/comm/comm_error.h"
#include "engine/comm/world_setup.h"
#endif

namespace sextant::tools {

namespace {

struct RunArguments {
  std::string model;
  std::string layout;
  int global_batch = 0;
  long seq_length = 0;
  long gpus = 1;             // the GPUs of this node the run uses (one so far)
  std::string cluster;       // empty: the cluster preset of this machine's GPU (tools/run_cluster.h)
  std::string profile;       // empty: configs/profiles/measured/<gpu>.yaml, else <gpu>.yaml
  RunSettings settings;
  engine::launch::LaunchOptions launch;
  int world_size = 1;  // ranks a launcher started (1: none)
};

// The profile --compare and --layout best predict with: --profile, or the
// GPU's measured profile when one is committed, or its datasheet profile.
sim::CostProfile run_profile(const sim::PresetCatalog& catalog, const std::string& configs_dir,
                             const std::string& given, const std::string& gpu) {
  if (!given.empty()) return catalog.profile(given, gpu);
  const std::filesystem::path measured =
      std::filesystem::path(configs_dir) / "profiles" / "measured" / (gpu + ".yaml");
  return catalog.profile(std::filesystem::exists(measured) ? measured.string() : "", gpu);
}



// The GPU this process trains on: its CUDA name and its preset ("" for both
// without the engine or a GPU; the preset "" for a GPU no preset describes).
std::pair<std::string, std::string> this_gpu() {
#ifdef SEXTANT_HAVE_ENGINE
  if (engine::calibration::cuda_device_count() > 0) {
    int device = 0;
    cudaGetDevice(&device);
    const engine::calibration::DeviceInfo d = engine::calibration::device_info(device);
    return {d.name, engine::calibration::gpu_preset_name(d.name, d.memory_bytes)};
  }
#endif
  return {"", ""};
}

RunSettings checked_settings(const RunArguments& a, const std::string& configs_dir) {
  RunSettings s = a.settings;
  s.configs_dir = configs_dir;
  const sim::PresetCatalog catalog(configs_dir);
  s.model = catalog.model(a.model, a.seq_length);
  s.model_argument = a.model;
  // The engine builds full causal attention and Megatron's all-or-nothing biases.
  if (s.model.sliding_window > 0)
    throw_option_error("--model", "sliding_window", "the engine has no sliding-window attention; "
                                                    "simulate this model instead of running it");
  if (s.model.mla)
    throw_option_error("--model", "mla", "the engine has no multi-head latent attention; "
                                         "simulate this model instead of running it");
  if (s.model.add_qkv_bias && !s.model.add_bias_linear)
    throw_option_error("--model", "add_qkv_bias", "the engine has no q/k/v-only biases; "
                                                  "simulate this model instead of running it");
  if (a.gpus != 1)
    throw_option_error("--gpus", "", std::to_string(a.gpus) + ": `sextant run` trains on one GPU so far; accepted: 1");
  const bool best = a.layout == "best";
  if (s.compare || best || !s.report_dir.empty()) {
    const auto [device_name, gpu_preset] = this_gpu();
    const RunCluster chosen = run_cluster(catalog, a.cluster, device_name, gpu_preset);
    s.cluster = catalog.cluster(chosen.name);
    s.cluster_note = chosen.note;
    s.profile = run_profile(catalog, configs_dir, a.profile, s.cluster.gpu.name);
  }
  if (!s.report_dir.empty()) s.compare = true;
  s.layout = run_layout(best ? best_layout(s.model, s.cluster, s.profile, a.world_size, a.global_batch, s.layout_note)
                                : a.layout,
                           a.world_size, a.global_batch);
  if (const sim::SplitProblem problem = sim::check_pipeline_split(s.model, s.layout); problem != sim::SplitProblem::kNone)
    throw_option_error("--layout", sim::split_problem_knob(problem), sim::split_problem_message(problem, s.model, s.layout));
  // A pipeline's --compare reads the task times of the run itself: the timing
  // pass without CUDA graphs (time_tasks_apart) trains one GPU.
  if (s.layout.pp > 1 && s.compare) s.time_tasks = true;
  // Tensor parallelism splits heads, query groups and the MLP (Shoeybi et al. 2019).
  const int tp = s.layout.tp;
  for (const auto& [count, key] : {std::pair{static_cast<std::int64_t>(s.model.num_attention_heads), "num_attention_heads"},
                                   std::pair{static_cast<std::int64_t>(s.model.num_query_groups), "num_query_groups"},
                                   std::pair{s.model.ffn_hidden_size, "ffn_hidden_size"}})
    if (count % tp != 0)
      throw_option_error("--layout", "tp", std::to_string(tp) + ": " + key + " (" + std::to_string(count) +
                                               ") of model '" + s.model.name + "' must be a multiple of tp");
  if (s.steps < 1) throw_option_error("--steps", "", std::to_string(s.steps) + ": at least 1");
  if (s.log_interval < 1) throw_option_error("--log-interval", "", "at least 1");
  if (s.format != "table" && s.format != "json")
    throw_option_error("--format", "", "'" + s.format + "': accepted: table, json");
  if (!s.timing_file.empty()) s.time_tasks = true;
  if (s.save_interval > 0 && s.save_dir.empty())
    throw_option_error("--save-interval", "", std::to_string(s.save_interval) + ": needs --save DIR");
  const auto policy = engine::parse_nonfinite_policy(s.on_nonfinite_text);
  if (!policy) throw_option_error("--on-nonfinite", "", "'" + s.on_nonfinite_text + "': accepted: stop, skip");
  s.on_nonfinite = *policy;
  return s;
}

engine::LrSchedule lr_schedule_of(const RunSettings& s) {
  engine::LrSchedule lr;
  lr.max_lr = s.lr;
  lr.min_lr = s.min_lr >= 0 ? s.min_lr : s.lr / 10;
  lr.warmup_steps = s.warmup_steps >= 0 ? s.warmup_steps : std::min(s.steps / 10, 2000);
  lr.decay_steps = s.lr_decay_steps >= 0 ? s.lr_decay_steps : std::max(s.steps, lr.warmup_steps);
  if (const std::string problem = engine::lr_schedule_problem(lr); !problem.empty())
    throw_option_error("--lr", "", problem);
  return lr;
}

std::unique_ptr<engine::data::TokenBatches> open_data(const RunSettings& s, int vocab, int seq) {
  if (s.data == "synthetic") return std::make_unique<engine::data::SyntheticTokens>(vocab, seq, s.seed);
  try {
    return std::make_unique<engine::data::DatasetTokens>(s.data, vocab, seq, s.seed);
  } catch (const engine::data::DataError& e) {
    throw sim::ConfigError({{e.file(), static_cast<int>(e.line()), 0, "--data", e.reason()}});
  }
}

// A process a launcher started (--nproc-per-node, Slurm, Open MPI): meet the
// other ranks, join NCCL and split the parallel groups (rank 0 prints the rank
// map), train on the rank's GPU, data-parallel over the world. Layouts with
// model parallelism stop every rank before they meet.
struct LaunchedJob {
#ifdef SEXTANT_HAVE_NCCL
  std::unique_ptr<engine::comm::JobCommunicators> communicators;
#endif
  int world_rank = 0;
};

// The rank's place, and the job's layout checked before any GPU is touched:
// every rank refuses a layout the same way, before they meet (and before a
// build without NCCL says it cannot run several ranks).
std::optional<engine::launch::RankEnvironment> launched_rank(RunArguments& a) {
  auto rank = engine::launch::rank_environment(engine::launch::process_environment());
  if (!rank) return rank;
  if (a.layout != "best") {  // `best` is searched for this world later, on every rank alike
    const sim::PartialLayout spec = sim::parse_layout(a.layout);
    engine::launch::layout_for_world(spec, rank->world_size);  // tp·cp·dp·pp must be the world
    refuse_model_parallel(spec);
  }
  a.settings.device = rank->local_rank;
  a.world_size = rank->world_size;
  return rank;
}

LaunchedJob join_launched_job(const std::optional<engine::launch::RankEnvironment>& rank,
                              const sim::ParallelLayout& layout) {
  LaunchedJob job;
  if (!rank) return job;
  job.world_rank = rank->rank;
#ifdef SEXTANT_HAVE_NCCL
  job.communicators = engine::comm::join_job(*rank, layout, std::cerr);
#else
  (void)layout;
  if (rank->world_size > 1)
    throw_option_error("WORLD_SIZE", "",
        std::to_string(rank->world_size) + " ranks: this sextant was built without NCCL "
        "(libnccl and nccl.h), so it runs one rank only");
#endif
  return job;
}

void add_launch_options(CLI::App& cmd, engine::launch::LaunchOptions& launch) {
  cmd.add_option("--nproc-per-node", launch.nproc_per_node,
                 "start N processes on this node, one per GPU, and supervise them (one fails:\n"
                 "all stop; Ctrl-C: all stop); under Slurm or mpirun leave it out")
      ->check(CLI::PositiveNumber);
  cmd.add_flag("--print-sbatch", launch.print_sbatch,
               "print a Slurm batch script that runs this command on --nodes nodes of\n"
               "--gpus-per-node GPUs (one task per GPU), instead of running it");
  cmd.add_option("--nodes", launch.nodes, "with --print-sbatch: nodes")
      ->check(CLI::PositiveNumber)->capture_default_str();
  cmd.add_option("--gpus-per-node", launch.gpus_per_node, "with --print-sbatch: GPUs (tasks) per node")
      ->check(CLI::PositiveNumber)->capture_default_str();
  cmd.add_option("--time", launch.time_limit, "with --print-sbatch: the job's time limit, HH:MM:SS");
}

}  // namespace

CommandRunner add_run_command(CLI::App& app, const CommonOptions& common) {
  auto a = std::make_shared<RunArguments>();
  RunSettings& s = a->settings;
  CLI::App* cmd = app.add_subcommand(
      "run",
      "Train a model on this machine's GPU with sextant's engine (bf16 weights, fp32 master\n"
      "weights, AdamW, flash attention), printing loss, learning rate, gradient norm, step\n"
      "time, tokens/s, TFLOP/s, MFU and GPU memory, and at the end the memory the simulator\n"
      "predicts for the same model and layout. Ctrl-C (or SIGTERM) stops after the\n"
      "current step, prints the summary and exits with code 130. With --nproc-per-node N\n"
      "(or under Slurm / mpirun) it trains data-parallel over the N ranks through NCCL.\n\n"
      "Examples:\n"
      "  sextant run --model gpt-1.3b --layout mbs=4,gbs=32 --data synthetic --steps 50\n"
      "  sextant run --model gpt-1.3b --layout mbs=4,gbs=8 --steps 12 --compare --report out/calib\n"
      "  sextant run --model gpt-1.3b --layout best --global-batch 64 --steps 20\n"
      "  sextant run --nproc-per-node 8 --model gpt-1.3b --layout dp=8,mbs=4,gbs=64 --steps 50\n"
      "  sextant run --model gpt-350m --layout mbs=2,gbs=8 --steps 200 --save ckpt --save-interval 50\n"
      "    (interrupted?) then the same with --load ckpt: continues from ckpt/latest's step\n"
      "  sextant run --model gpt-350m --layout mbs=2,gbs=8 --steps 200 --save ckpt --save-interval 50 --load ckpt\n"
      "  sextant preprocess --input corpus.jsonl --output-prefix data/corpus\n"
      "  sextant run --model gpt-350m --layout mbs=8,gbs=32 --data data/corpus_text_document \\\n"
      "      --steps 200 --lr 3e-4");
  cmd->add_option("--model", a->model, "model preset name (configs/models) or a model YAML")->required();
  cmd->add_option("--layout", a->layout,
                  "mbs (default 1), gbs (default mbs·dp), recompute (none|selective|full), dp (the\n"
                  "ranks started, e.g. by --nproc-per-node, over tp·pp; default all), tp (tensor\n"
                  "parallel, sp=0), pp (pipeline stages; vpp > 1 interleaves, schedule 1f1b|\n"
                  "interleaved|gpipe, split knobs first_stage_layers, last_stage_layers,\n"
                  "embedding_in_split, loss_in_split, pp_layout), zero (0, or 1: the distributed\n"
                  "optimizer, with dp > 1, beside tp and pp too; overlap_param_gather=1 gathers its\n"
                  "weights during the next forward); cp, ep must be 1; or 'best': the\n"
                  "search's fastest layout that the engine runs on the ranks started (one GPU\n"
                  "without a launcher) for --global-batch");
  add_whole_number_option(*cmd, "--global-batch", a->global_batch,
                          "global batch in sequences (same as gbs=)", 1, kLargestBatch);
  add_whole_number_option(*cmd, "--seq-length", a->seq_length,
                          "training sequence length (default: the model's)", 1, kLongestSequence);
  cmd->add_option("--data", s.data,
                  "'synthetic' (random tokens, no files) or the prefix of a Megatron indexed\n"
                  "dataset (<prefix>.bin/.idx, e.g. from `sextant preprocess`)")
      ->capture_default_str();
  constexpr std::int64_t kMostSteps = 1'000'000'000;
  add_whole_number_option(*cmd, "--steps", s.steps, "optimizer steps to run (with --load: the total, counted from the start)", 1, kMostSteps)
      ->capture_default_str();
  add_number_option(*cmd, "--lr", s.lr, "peak learning rate", 0.0, 1.0)->capture_default_str();
  add_number_option(*cmd, "--min-lr", s.min_lr,
                    "learning rate at the end of the cosine (default lr / 10)", 0.0, 1.0);
  add_whole_number_option(*cmd, "--warmup-steps", s.warmup_steps,
                          "linear warmup steps (default steps / 10, at most 2000)", 0, kMostSteps);
  add_whole_number_option(*cmd, "--lr-decay-steps", s.lr_decay_steps,
                          "step where the cosine ends (default --steps)", 1, kMostSteps);
  add_number_option(*cmd, "--weight-decay", s.weight_decay, "AdamW weight decay of matrices", 0.0,
                    1.0)
      ->capture_default_str();
  add_number_option(*cmd, "--clip-grad", s.grad_clip,
                    "clip the global gradient norm to this (0: off)", 0.0, 1e6)
      ->capture_default_str();
  add_number_option(*cmd, "--adam-beta1", s.adam_beta1, "AdamW beta1", 0.0, 0.999999)
      ->capture_default_str();
  add_number_option(*cmd, "--adam-beta2", s.adam_beta2, "AdamW beta2", 0.0, 0.999999)
      ->capture_default_str();
  add_number_option(*cmd, "--adam-eps", s.adam_eps, "AdamW epsilon", 1e-30, 1.0)
      ->capture_default_str();
  add_number_option(*cmd, "--init-method-std", s.init_std,
                    "std of the normal weight initialisation", 0.0, 1.0)
      ->capture_default_str();
  add_whole_number_option(*cmd, "--seed", s.seed, "seed of the weights and of the data order", 0,
                          INT64_MAX)
      ->capture_default_str();
  add_whole_number_option(*cmd, "--log-interval", s.log_interval, "print every N steps", 1,
                          kMostSteps)
      ->capture_default_str();
  add_whole_number_option(*cmd, "--device", s.device, "CUDA device index", 0, 1023)
      ->capture_default_str();
  cmd->add_option("--gpu", s.gpu, "GPU preset for the peak FLOP/s of MFU (default: from the device name)");
  cmd->add_option("--format", s.format, "table (progress lines) or json (one object at the end;\n"
                                        "progress goes to stderr)")
      ->capture_default_str();
  cmd->add_flag("--timing", s.time_tasks,
                "time every task with CUDA events and print the slowest kinds (launches the "
                "kernels one by one instead of replaying the step's CUDA graph)");
  cmd->add_flag("!--no-gemm-tuning", s.tune_gemms,
                "use cuBLASLt's first-choice algorithms instead of timing its first 16 candidates "
                "for each matrix product at start-up (the choice can differ between runs)");
  cmd->add_flag("!--no-cuda-graph", s.use_cuda_graph,
                "launch every kernel of every step from the host instead of replaying one "
                "CUDA graph of the forward and backward");
  cmd->add_option("--timing-file", s.timing_file,
                  "write per-task times of the last step as CSV (implies --timing); with several\n"
                  "ranks each writes its own, the rank before the extension (t.csv: t.rank0.csv, ...)");
  add_launch_options(*cmd, a->launch);
  cmd->add_option("--save", s.save_dir,
                  "save checkpoints into DIR: DIR/step-<N>/ holds one shard per rank (bf16 weights,\n"
                  "fp32 master weights, Adam moments) and metadata.json (model, layout, step, data\n"
                  "position, a CRC-32 per file); DIR/latest names the newest. Each is written to\n"
                  "DIR/tmp-<N>/, fsynced and renamed, so an interrupted save never replaces the\n"
                  "last good one. Several ranks: DIR must be visible to all of them");
  add_whole_number_option(*cmd, "--save-interval", s.save_interval,
                          "with --save: also every N steps (default: only at the end, Ctrl-C included)", 1,
                          kMostSteps);
  add_whole_number_option(*cmd, "--keep", s.keep, "with --save: keep the newest N checkpoints", 1, 1'000'000)
      ->capture_default_str();
  cmd->add_option("--load", s.load_dir,
                  "resume from a checkpoint: DIR/step-<N>, or DIR (follows DIR/latest). The model,\n"
                  "learning-rate schedule and --seed must be the saved run's; another tp, dp or zero\n"
                  "is resharded on load (each rank reads its pieces of the saved shards), and so\n"
                  "are another pp, vpp or layer split (tensors found by name); the same layout\n"
                  "resumes bit for bit; --steps counts from the start of training, so\n"
                  "`--steps 100 --load DIR` after 50 runs steps 51-100. The\n"
                  "data stream continues where it stopped; with --no-gemm-tuning the resumed run\n"
                  "repeats the uninterrupted one's forward bit for bit. To train on past the saved\n"
                  "run's --steps, give both runs the same --warmup-steps and --lr-decay-steps");
  cmd->add_option("--on-nonfinite", s.on_nonfinite_text,
                  "a step whose loss or gradient norm is NaN or Inf never updates the weights; then\n"
                  "'stop' ends the run with exit code 3, naming the step and the first parameter\n"
                  "whose gradient is not finite; 'skip' goes on with the next batch (Megatron's\n"
                  "behaviour with a loss scaler; the summary counts the skipped steps)")
      ->capture_default_str();
  add_number_option(*cmd, "--comm-timeout-s", s.comm_timeout_s,
                    "several ranks: the longest a rank waits for a step's collectives through NCCL;\n"
                    "past it the rank aborts its communicators and fails naming the\n"
                    "collective, its group and rank, and the launcher stops every rank, instead of\n"
                    "hanging on a peer that died or hangs (PyTorch's default process-group timeout); a\n"
                    "step still blocked on the host 60 s past it ends the rank (a watchdog thread)",
                    1.0, 7.0 * 24 * 3600)
      ->capture_default_str();
  cmd->add_flag("--compare", s.compare,
                "after training, time every task of a few more steps with CUDA events and print,\n"
                "per Plan task kind and for the whole step, the event simulator's prediction\n"
                "(same model, layout and --profile) beside the measurement and the error; the\n"
                "task kinds are rank 0's (the first pipeline stage's); with pp > 1 also each\n"
                "stage's compute (stage<s>.compute, gathered from every stage), and a pipeline\n"
                "send's time holds the wait for its peer (no error given)");
  cmd->add_option("--report", s.report_dir,
                  "with --compare (implied): write compare.md/.csv/.json and the report (report.html\n"
                  "with the predicted-vs-measured scatter and per-task bars, report.md, report.csv) into DIR;\n"
                  "with several ranks rank 0 writes it (its tasks: the first pipeline stage's)");
  cmd->add_option("--profile", a->profile,
                  "cost profile for --compare and --layout best (default: "
                  "configs/profiles/measured/<gpu>.yaml if committed, else configs/profiles/<gpu>.yaml)");
  cmd->add_option("--cluster", a->cluster,
                  "cluster preset whose GPU --compare and --layout best predict for (default: the preset\n"
                  "of the GPU this run trains on, e.g. dgx-h200 on an H200; dgx-h100 when none has it)");
  add_whole_number_option(*cmd, "--gpus", a->gpus, "GPUs of this node to train on (one so far)", 1,
                          kMostGpus);
  return [a, &common](std::ostream& out) {
    if (const auto code = engine::launch::launch_or_continue(
            a->launch, engine::launch::process_environment(),
            engine::launch::this_process_arguments(), engine::launch::this_executable(), out,
            std::cerr))
      return *code;
    const auto rank = launched_rank(*a);
    PreparedRun run = prepare_run(checked_settings(*a, common.configs_dir));
    // Said before the engine starts (and where there is none): what `best` chose;
    // by rank 0 only (every rank chose alike).
    if (!rank || rank->rank == 0)
      for (const std::string* note : {&run.settings.cluster_note, &run.settings.layout_note})
        if (!note->empty()) (run.settings.format == "json" ? std::cerr : out) << *note << "\n";
    const LaunchedJob job = join_launched_job(rank, run.settings.layout);
    run.world_rank = job.world_rank;
#ifdef SEXTANT_HAVE_NCCL
    if (job.communicators) {
      run.groups = &job.communicators->groups;
    }
#endif
#ifdef SEXTANT_HAVE_NCCL
    try {
      return run_training(run, out);
    } catch (const engine::comm::CommError& e) {
      // A peer that died or hangs, not a bug here: said once, with the world
      // rank (the launcher prefixes the line with it too) and the collective.
      // Then out at once: tearing down the other communicators could wait on
      // that peer (NCCL's finalize), and the launcher stops the rest.
      out.flush();
      std::cerr << "sextant: error: rank " << run.world_rank << ": " << e.what() << "\n";
      std::_Exit(1);
    }
#else
    return run_training(run, out);
#endif
  };
}

PreparedRun prepare_run(const RunSettings& s) {
  PreparedRun run;
  run.settings = s;
  const int seq = static_cast<int>(s.model.seq_length);
  run.shape = engine::transformer_shape_of(s.model, s.layout);  // the rank's shard under tp
  if (const auto problems = engine::transformer_shape_problems(run.shape, s.model); !problems.empty()) {
    std::vector<sim::Diagnostic> d;
    for (const std::string& p : problems) d.push_back({"--model", 0, 0, s.model.name, p});
    throw sim::ConfigError(d);
  }
  run.lr = lr_schedule_of(s);
  run.data = open_data(s, static_cast<int>(s.model.vocab_size), seq);  // tokens of the whole vocabulary
  if (!s.load_dir.empty()) {
    try {
      run.checkpoint = engine::checkpoint::open_checkpoint(s.load_dir);
    } catch (const sim::ConfigError& e) {  // said as --load's problem
      std::vector<sim::Diagnostic> d = e.diagnostics();
      for (sim::Diagnostic& x : d) x.key = "--load";
      throw sim::ConfigError(d);
    }
    check_checkpoint_fits(*run.checkpoint, run);
  }
  return run;
}

#ifndef SEXTANT_HAVE_ENGINE
int run_training(PreparedRun&, std::ostream&) {
  throw sim::ConfigError({{"sextant run", 0, 0, "",
                           "this sextant was built without the CUDA toolkit, so it has no "
                           "engine; rebuild where nvcc is installed (see README)"}});
}
#endif

}  // namespace sextant::tools
