// `sextant run`: train a model on this machine's GPU with the engine — its
// options, and the run from them: launched or not, prepared (run_arguments.h,
// run_settings.h), joined to the other ranks (run_launch.h) and trained
// (run_training.cc).
#include <cstdlib>
#include <iostream>
#include <memory>
#include <ostream>
#include <string>

#include "engine/launch/run_launcher.h"
#include "tools/commands.h"
#include "tools/numeric_option.h"
#include "tools/planning_inputs.h"
#include "tools/run_arguments.h"
#include "tools/run_launch.h"
#include "tools/run_settings.h"
#ifdef SEXTANT_HAVE_NCCL
#include "engine/comm/comm_error.h"
#endif

namespace sextant::tools {

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
      "  sextant run --nproc-per-node 4 --model moe-mixtral-tiny --layout ep=2,zero=1,mbs=2,gbs=32 --steps 50\n"
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
                  "weights during the next forward), cp (each sequence split over cp ranks,\n"
                  "cp_comm_type all_gather|p2p; dense models), ep (MoE models: the experts split\n"
                  "over ep of the dp ranks, which it folds over as Megatron-Core does, etp=1 and\n"
                  "tp=1; with zero=1 the experts' optimizer state is sharded over the dp/ep\n"
                  "ranks holding the same experts); or 'best': the\n"
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
  add_number_option(*cmd, "--moe-aux-loss-coeff", s.moe.aux_loss_coeff,
                    "MoE models: alpha of the Switch load-balancing loss (Fedus et al. 2021, eq. 4;\n"
                    "Megatron's --moe-aux-loss-coeff); 0 turns it off", 0.0, 1.0)
      ->capture_default_str();
  add_number_option(*cmd, "--moe-z-loss-coeff", s.moe.z_loss_coeff,
                    "MoE models: the router z-loss coefficient (ST-MoE; e.g. 1e-3); 0: off", 0.0, 1.0)
      ->capture_default_str();
  add_number_option(*cmd, "--moe-capacity-factor", s.moe.capacity_factor,
                    "MoE models: each expert keeps at most factor x tokens x top-k / experts\n"
                    "(the rest are dropped, the residual carries them); 0: dropless, or the\n"
                    "model file's moe.capacity_factor", 0.0, 1000.0)
      ->capture_default_str();
  cmd->add_option("--moe-router-score-function", s.moe_score_function,
                  "MoE models: the router's scores: softmax (Mixtral, Qwen3-MoE) or sigmoid\n"
                  "(DeepSeek-V3; Megatron's --moe-router-score-function)")
      ->capture_default_str();
  CLI::Option* expert_bias = cmd->add_flag(
      "--moe-router-enable-expert-bias", s.moe_expert_bias,
      "MoE models: DeepSeek-V3's auxiliary-loss-free balancing (Liu et al. 2024,\n"
      "arXiv:2412.19437, Sec. 2.1.2): a per-expert bias added to the router's scores\n"
      "for the top-k choice only, moved after every step by the update rate towards\n"
      "the mean load (up for an expert below it, down above), the loads summed over\n"
      "the step's micro-batches and the data-parallel ranks; the progress line shows\n"
      "the biases' spread; checkpoints keep them. Needs --moe-router-score-function\n"
      "sigmoid");
  add_number_option(*cmd, "--moe-router-bias-update-rate", s.moe_bias_update_rate,
                    "MoE models: how far each expert bias moves per step (DeepSeek-V3's gamma;\n"
                    "Megatron's --moe-router-bias-update-rate); needs --moe-router-enable-expert-bias",
                    0.0, 1.0)
      ->needs(expert_bias)
      ->capture_default_str();
  cmd->add_option("--moe-grouped-gemm", s.moe_grouped_gemm,
                  "MoE models: the experts' GEMMs: auto (by rows per expert), cublas-grouped\n"
                  "(cublasGemmGroupedBatchedEx) or cublaslt-loop (one cuBLASLt product per expert)")
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
    if (a->launch.print_sbatch) checked_batch_job(*a, common.configs_dir);  // nothing written for a job `run` refuses
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

}  // namespace sextant::tools
