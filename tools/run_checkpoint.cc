#include "tools/run_checkpoint.h"

#include <filesystem>
#include <stdexcept>

#include "engine/model/parameter_layout.h"
#include "sim/core/config_error.h"

namespace sextant::tools {

namespace ckpt = engine::checkpoint;

namespace {

ckpt::CheckpointModel model_of(const PreparedRun& run) {
  const sim::ModelConfig& m = run.settings.model;
  ckpt::CheckpointModel c;
  c.name = m.name;
  c.num_layers = m.num_layers;
  c.hidden_size = m.hidden_size;
  c.ffn_hidden_size = m.ffn_hidden_size;
  c.num_attention_heads = m.num_attention_heads;
  c.num_query_groups = m.num_query_groups;
  c.kv_channels = m.kv_channels;
  c.vocab_size = m.vocab_size;
  c.seq_length = run.shape.seq;
  c.parameters_per_rank = engine::ParameterLayout(run.shape).parameter_count();
  return c;
}

ckpt::CheckpointLrSchedule lr_of(const engine::LrSchedule& lr) {
  return {lr.max_lr, lr.min_lr, lr.warmup_steps, lr.decay_steps};
}

ckpt::CheckpointLayout layout_of(const sim::ParallelLayout& l) {
  // zero counts with dp > 1 only, except with a pipeline, where it is refused (layout_mismatch).
  return {l.tp, l.dp, (l.dp > 1 || l.pp > 1) && l.zero >= 1 ? 1 : 0, l.pp, l.pp > 1 ? l.vpp : 1};
}

int stage_of(const PreparedRun& run) {
  return run.world_rank / (run.settings.layout.tp * run.settings.layout.dp);
}

std::string metadata_file(const ckpt::OpenedCheckpoint& c) {
  return (std::filesystem::path(c.folder) / "metadata.json").string();
}

}  // namespace

ckpt::CheckpointMetadata checkpoint_metadata_of(const PreparedRun& run, std::int64_t steps_done,
                                                std::int64_t data_batches, const RunSharding& sharding) {
  ckpt::CheckpointMetadata m;
  m.step = steps_done;
  m.data_batches = data_batches;
  m.seed = run.settings.seed;
  m.model = model_of(run);
  m.layout = layout_of(run.settings.layout);
  m.world_size = run.settings.layout.tp * run.settings.layout.dp * run.settings.layout.pp;
  m.lr_schedule = lr_of(run.lr);
  if (static_cast<int>(sharding.size()) != m.layout.pp)
    throw std::logic_error("checkpoint_metadata_of: " + std::to_string(sharding.size()) + " shardings for pp = " +
                           std::to_string(m.layout.pp));
  if (m.layout.pp > 1)
    m.stages = sharding;
  else
    m.sharding = sharding.front();
  return m;
}

void check_checkpoint_fits(const ckpt::OpenedCheckpoint& c, const PreparedRun& run) {
  const ckpt::CheckpointMetadata& m = c.metadata;
  std::vector<sim::Diagnostic> problems;
  auto add = [&](const std::string& message) { problems.push_back({metadata_file(c), 0, 0, "--load", message}); };
  const ckpt::CheckpointLayout layout = layout_of(run.settings.layout);
  ckpt::CheckpointModel model = model_of(run);
  // A rank's share of the parameters depends on tp; the model fields say whether it is the same model.
  if (m.layout.tp != layout.tp) model.parameters_per_rank = m.model.parameters_per_rank;
  if (const std::string p = ckpt::model_mismatch(m.model, model); !p.empty()) add(p);
  if (const std::string p = ckpt::layout_mismatch(m.layout, layout, ckpt::sharding_known(m)); !p.empty()) add(p);
  if (const std::string p = ckpt::lr_schedule_mismatch(m.lr_schedule, lr_of(run.lr)); !p.empty()) add(p);
  if (m.seed != run.settings.seed)
    add("checkpoint's run used --seed " + std::to_string(m.seed) + "; this run has --seed " +
        std::to_string(run.settings.seed) + " (the data order would not continue)");
  if (m.data_batches >= run.settings.steps)
    add("checkpoint is at step " + std::to_string(m.step) + " (" + std::to_string(m.data_batches) +
        " batches drawn); --steps " + std::to_string(run.settings.steps) +
        " counts from the start of training, so nothing is left to run: give a larger --steps");
  sim::throw_if_any(problems);
}

bool same_arrays(const ckpt::OpenedCheckpoint& c, const PreparedRun& run, const RunSharding& sharding) {
  if (c.metadata.layout != layout_of(run.settings.layout)) return false;
  // The same pp and vpp with other split knobs puts other layers on a stage;
  // a checkpoint of an older sextant may hold the tensors in another order.
  return c.metadata.layout.pp == 1 ? c.metadata.sharding == sharding.front() : c.metadata.stages == sharding;
}

ckpt::TrainerState load_rank_state(const ckpt::OpenedCheckpoint& c, const PreparedRun& run,
                                   const RunSharding& sharding) {
  if (same_arrays(c, run, sharding)) return ckpt::read_rank_state(c, run.world_rank);
  const ckpt::CheckpointMetadata& m = c.metadata;
  ckpt::check_run_holds_saved_tensors(ckpt::saved_stage_shardings(m), sharding, metadata_file(c));
  const ckpt::ReshardPlan plan =
      ckpt::plan_reshard(m.layout, ckpt::saved_stage_shardings(m), layout_of(run.settings.layout),
                         sharding.at(static_cast<std::size_t>(stage_of(run))), run.world_rank, metadata_file(c));
  return ckpt::read_resharded_state(c, plan);
}

std::string save_checkpoint(const PreparedRun& run, const ckpt::CheckpointMetadata& metadata,
                            const ckpt::TrainerState& state, const std::function<bool(bool)>& barrier) {
  const std::string& root = run.settings.save_dir;
  // Every rank takes part in every barrier, also after a failure, so that no
  // rank waits forever for one that gave up; the failing rank rethrows its own
  // error, the others say where to look.
  auto step_all = [&](const std::function<void()>& work) {
    std::exception_ptr error;
    try {
      work();
    } catch (...) {
      error = std::current_exception();
    }
    if (barrier(error != nullptr)) {
      if (error) std::rethrow_exception(error);
      throw sim::ConfigError({{root, 0, 0, "--save",
                               "another rank could not write its part of checkpoint step-" +
                                   std::to_string(metadata.step) + " (its message is in its output)"}});
    }
  };
  step_all([&] {
    if (run.world_rank == 0) ckpt::begin_save(root, metadata.step);
  });
  step_all([&] { ckpt::write_rank_shard(root, metadata.step, run.world_rank, state); });
  std::string folder = (std::filesystem::path(root) / ("step-" + std::to_string(metadata.step))).string();
  step_all([&] {
    if (run.world_rank == 0) folder = ckpt::commit_save(root, metadata, run.settings.keep);
  });
  return folder;
}

}  // namespace sextant::tools
