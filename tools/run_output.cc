#include "tools/run_output.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "sim/core/gpu_preset_name.h"
#include "sim/core/preset_catalog.h"
#include "sim/core/text_format.h"
#include "sim/flops/model_flops.h"
#include "tools/run_moe_output.h"
#include "tools/simulation_output.h"

namespace sextant::tools {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

std::string fixed(double value, int digits) { return sim::format_fixed(value, digits); }

}  // namespace

RunFacts run_facts(const RunSettings& s, const sim::ModelConfig& trained, int seq, const std::string& device_name,
                   std::size_t device_memory_bytes, bool preset_had_dropout) {
  RunFacts facts;
  facts.device_name = device_name;
  facts.device_memory_bytes = device_memory_bytes;
  const sim::PresetCatalog catalog(s.configs_dir);
  const std::string preset =
      s.gpu.empty() ? sim::gpu_preset_name(device_name, static_cast<std::int64_t>(device_memory_bytes)) : s.gpu;
  if (!preset.empty()) facts.gpu = catalog.gpu(preset);
  // The engine's own arena (sim/memory/engine_arena.h) with its runtime memory.
  facts.predicted = sim::peak_memory_per_gpu(trained, s.layout, sim::Software::kSextantEngine);
  // The whole global batch's FLOPs; each of the layout's GPUs does its share of them.
  facts.model_flops_per_step = sim::step_flops(trained, s.layout).model_flops;
  facts.flops_per_gpu_per_step = facts.model_flops_per_step / static_cast<double>(s.layout.total_gpus());
  facts.tokens_per_step = static_cast<std::size_t>(s.layout.gbs) * static_cast<std::size_t>(seq);
  facts.preset_had_dropout = preset_had_dropout;
  return facts;
}

void print_run_header(std::ostream& progress, const RunSettings& s, const engine::LrSchedule& lr,
                      const RunFacts& facts, const engine::Trainer& trainer_ref,
                      const engine::data::TokenBatches& data_ref) {
  const engine::Trainer* trainer = &trainer_ref;
  const engine::data::TokenBatches* data = &data_ref;
  const engine::TransformerShape& shape = trainer->shape();
  // seq: the whole sequence (shape.seq is a cp rank's S/cp tokens).
  const int dp = s.layout.dp, tp = s.layout.tp, pp = s.layout.pp, seq = shape.seq * shape.cp;
  const bool json = s.format == "json";
  const auto& gpu = facts.gpu;
  const auto& predicted = facts.predicted;
  const bool preset_has_dropout = facts.preset_had_dropout;
  struct {
    const std::string& name;
    std::size_t memory_bytes;
  } device{facts.device_name, facts.device_memory_bytes};
  progress << "model: " << s.model.name << ", " << fixed(trainer->parameter_count() / 1e9, 3)
           << " B parameters" << (pp > 1   ? std::string(" on rank 0 (its pipeline stage") + (tp > 1 ? ", its tp shard)" : ")")
               : tp > 1 ? " on each rank (its tp shard)"
                        : "")
           << "; layout " << (tp > 1 ? "tp=" + std::to_string(tp) + ", " : "")
           << (s.layout.cp > 1 ? "cp=" + std::to_string(s.layout.cp) + ", " : "")
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
  progress << "memory: arena " << sim::format_gib(trainer->arena_bytes(), 2) << "; the simulator predicts "
           << sim::format_gib(predicted.total(), 2) << " (tensors " << sim::format_gib(predicted.tensors(), 2)
           << ", CUDA context and NCCL " << sim::format_gib(predicted.runtime.total(), 2) << ")\n";
  if (dp > 1)
    progress << "data parallel: " << dp << " ranks, " << trainer->local_microbatches()
             << " micro-batches each per step, gradients "
             << (s.layout.zero >= 1 ? "reduce-scattered" : "summed") << " in "
             << trainer->gradient_buckets().size() << (pp > 1 ? " buckets (rank 0's stage) overlapped with the schedule's backward" : " buckets overlapped with backward")
             << (s.layout.zero >= 1 ? "; distributed optimizer: fp32 master weights and Adam "
                                                 "moments sharded, bf16 weights all-gathered"
                                               : "")
             << (s.layout.overlap_param_gather && s.layout.zero >= 1 ? " during the next step's forward (overlap_param_gather)" : "")
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
  if (s.layout.cp > 1)
    progress << "context parallel: " << s.layout.cp << " ranks, each with 2 of the " << 2 * s.layout.cp
             << " chunks of every sequence (" << shape.seq << " of " << seq
             << " tokens; causally load-balanced), "
             << (s.layout.cp_comm_type == sim::CpCommType::kP2p
                     ? "K and V passed around the cp ring in each attention, overlapped with it (cp_comm_type=p2p)"
                     : "K and V all-gathered over cp in each attention (cp_comm_type=all_gather)")
             << "; gradients reduced over dp x cp\n";
  if (pp > 1)
    progress << "pipeline parallel: " << pp << " stages" << (s.layout.vpp > 1 ? " of " + std::to_string(s.layout.vpp) + " model chunks each" : "")
             << " (" << sim::to_string(trainer->plan().shape.schedule) << ", layers "
             << trainer->plan().shape.split.describe() << "); activations sent and received per micro-batch; "
             << "loss from the last stage\n";
  if (!json)
    progress << "  step      loss        lr  grad_norm   step_ms   tokens/s  TFLOP/s    MFU  mem_GiB\n";
  progress.flush();

}

void print_resumed(std::ostream& progress, const sim::ParallelLayout& layout,
                   const engine::checkpoint::OpenedCheckpoint& checkpoint, int batches, bool resharded) {
  const engine::checkpoint::CheckpointLayout& saved = checkpoint.metadata.layout;
  const int pp = layout.pp;
  progress << "resumed from " << checkpoint.folder << ": step " << checkpoint.metadata.step << ", " << batches
           << " batches of the data stream skipped";
  if (resharded)
    progress << "; resharded from tp=" << saved.tp << ", dp=" << saved.dp << ", zero=" << saved.zero
             << (saved.pp > 1 || pp > 1 ? ", pp=" + std::to_string(saved.pp) + ", vpp=" + std::to_string(saved.vpp) : "")
             << (saved.pp == pp && saved.vpp == layout.vpp && pp > 1 ? " (another layer split)" : "");
  progress << "\n";
  progress.flush();
}

void write_timing_file(const std::string& path, const std::vector<engine::TaskTime>& tasks) {
  std::ofstream csv(path);
  if (!csv) throw_option_error("--timing-file", "", "cannot write '" + path + "'");
  csv << "task,seconds\n";
  for (const engine::TaskTime& t : tasks) csv << t.name << "," << t.seconds << "\n";
}

std::string progress_line(const RunFacts& facts, const engine::StepResult& r, std::size_t peak_bytes) {
  const double tflops = facts.flops_per_gpu_per_step / r.seconds / 1e12;
  char line[200];
  std::snprintf(line, sizeof line, "%6d %9.4f %9.3e %10.3f %9.1f %10.0f %8.1f %6s %8.2f%s\n", r.step, r.loss, r.lr,
                r.grad_norm, r.seconds * 1e3, facts.tokens_per_step / r.seconds, tflops,
                facts.gpu ? fixed(100 * tflops * 1e12 / facts.gpu->peak_bf16_flops_per_s, 1).c_str() : "-",
                peak_bytes / kGiB, r.skipped ? "  (skipped: non-finite gradient norm)" : "");
  return line;
}

void print_run_summary(std::ostream& out, const RunSettings& s, const RunFacts& facts, const TrainerSummary& trainer,
                       const engine::training::TrainingRecord& record, int warmup_for_timing,
                       const std::map<std::string, double>& task_seconds, const std::optional<CompareReport>& compare) {
  const int dp = s.layout.dp, tp = s.layout.tp, pp = s.layout.pp;
  const bool json = s.format == "json";
  const auto& gpu = facts.gpu;
  const auto& predicted = facts.predicted;
  const int seq = static_cast<int>(facts.tokens_per_step / static_cast<std::size_t>(s.layout.gbs));
  const bool interrupted = record.interrupted;
  const int done = record.steps();
  const int skipped = record.skipped_steps;
  const std::size_t peak_in_use = record.peak_memory_bytes;
  const int timed_steps = record.timed_task_steps;
  const std::vector<double>& losses = record.losses;
  const std::vector<double>& lrs = record.lrs;
  const std::vector<double>& norms = record.grad_norms;
  const double step_s = record.median_step_s();
  const double tokens_per_s = step_s > 0 ? facts.tokens_per_step / step_s : 0;
  const double tflops = step_s > 0 ? facts.flops_per_gpu_per_step / step_s / 1e12 : 0;
  const double mfu = gpu && step_s > 0 ? tflops * 1e12 / gpu->peak_bf16_flops_per_s : 0;
  const auto& arena = trainer.arena_by_category;
  const std::size_t arena_bytes = trainer.arena_bytes;
  const auto parameter_count = trainer.parameters;
  const double model_flops_per_step = facts.model_flops_per_step;
  struct {
    const std::string& name;
  } device{facts.device_name};
  if (json) {
    nlohmann::ordered_json j;
    j["model"] = s.model.name;
    j["device"] = device.name;
    j["layout"] = {{"tp", tp}, {"sp", s.layout.sp}, {"pp", pp}, {"vpp", s.layout.vpp}, {"dp", dp}, {"cp", s.layout.cp},
                   {"cp_comm_type", std::string(sim::to_string(s.layout.cp_comm_type))}, {"ep", s.layout.ep},
                   {"zero", s.layout.zero}, {"mbs", s.layout.mbs}, {"gbs", s.layout.gbs},
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
                                   {"other", predicted.other},
                                   {"runtime", predicted.runtime.total()},
                                   {"runtime_parts", runtime_parts_json(predicted.runtime)}};
    j["loss"] = losses;
    j["lr"] = lrs;
    j["grad_norm"] = norms;
    if (timed_steps > 0) {
      nlohmann::ordered_json tasks;
      for (const auto& [kind, seconds] : task_seconds) tasks[kind] = seconds / timed_steps;
      j["task_seconds_per_step"] = tasks;
    }
    if (!record.moe.expert_tokens.empty()) j["moe"] = moe_json(record.moe);
    if (compare) j["compare"] = compare_json(*compare);
    out << j.dump() << "\n";
  } else {
    out << "\n" << done << " steps" << (interrupted ? " (interrupted: stopped after the current step)" : "")
        << (skipped ? ", " + std::to_string(skipped) + " skipped" : "") << "; median over steps "
        << warmup_for_timing + 1 << "-" << done << ": " << fixed(step_s * 1e3, 1) << " ms/step, "
        << fixed(tokens_per_s, 0) << " tokens/s, " << fixed(tflops, 1) << " TFLOP/s"
        << (gpu ? ", MFU " + sim::format_percent(mfu) : "") << "\n";
    out << "GPU memory: peak in use " << sim::format_gib(peak_in_use, 2) << " (arena "
        << sim::format_gib(arena_bytes, 2) << ", the rest CUDA context and libraries: "
        << sim::format_gib(static_cast<double>(peak_in_use) - static_cast<double>(arena_bytes), 2)
        << "); the simulator predicts " << sim::format_gib(predicted.total(), 2) << " ("
        << sim::format_percent(static_cast<double>(peak_in_use) / predicted.total() - 1) << "), of which runtime "
        << sim::format_gib(predicted.runtime.total(), 2) << " (CUDA context "
        << sim::format_gib(predicted.runtime.cuda_context, 2) << ", NCCL " << sim::format_gib(predicted.runtime.nccl(), 2)
        << ")\n";
    out << "  engine arena vs simulator (GiB):";
    const double predicted_parts[] = {predicted.parameters, predicted.gradients,
                                      predicted.optimizer_states, predicted.activations, predicted.other};
    for (int c = 0; c < engine::kMemoryCategories; ++c)
      out << " " << engine::to_string(static_cast<engine::MemoryCategory>(c)) << " "
          << fixed(arena[static_cast<std::size_t>(c)] / kGiB, 2) << " vs "
          << fixed(predicted_parts[c] / kGiB, 2) << ";";
    out << " total " << fixed(arena_bytes / kGiB, 2) << " vs "
        << fixed(predicted.tensors() / kGiB, 2) << " ("
        << sim::format_percent(arena_bytes / predicted.tensors() - 1) << ")\n";
    print_moe_summary(out, record.moe);
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
}

}  // namespace sextant::tools
