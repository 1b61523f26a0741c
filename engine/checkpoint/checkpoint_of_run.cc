#include "engine/checkpoint/checkpoint_of_run.h"

#include <filesystem>
#include <stdexcept>
#include <string>

#include "engine/checkpoint/reshard_plan.h"
#include "engine/model/parameter_layout.h"
#include "sim/comm/group_placement.h"
#include "sim/core/config_error.h"

namespace sextant::engine::checkpoint {

namespace {

CheckpointModel model_of(const RunDescription& run) {
  const sim::ModelConfig& m = run.model;
  CheckpointModel c;
  c.name = m.name;
  c.num_layers = m.num_layers;
  c.hidden_size = m.hidden_size;
  c.ffn_hidden_size = m.ffn_hidden_size;
  c.num_attention_heads = m.num_attention_heads;
  c.num_query_groups = m.num_query_groups;
  c.kv_channels = m.kv_channels;
  c.vocab_size = m.vocab_size;
  c.seq_length = m.seq_length;  // the whole sequence (a cp rank's shape holds its share)
  c.parameters_per_rank = ParameterLayout(run.shape).parameter_count();
  return c;
}

CheckpointLrSchedule lr_of(const LrSchedule& lr) { return {lr.max_lr, lr.min_lr, lr.warmup_steps, lr.decay_steps}; }

std::string metadata_file(const OpenedCheckpoint& c) {
  return (std::filesystem::path(c.folder) / "metadata.json").string();
}

}  // namespace

CheckpointLayout checkpoint_layout_of(const sim::ParallelLayout& l) {
  // Context parallelism folds into dp: cp ranks hold the same weights, and the
  // distributed optimizer shards over dp x cp (the trainer's replica group,
  // Megatron-Core's data-and-context-parallel group), so the arrays of a cp x dp
  // layout are those of dp·cp data-parallel ranks. cp sits inside dp in the
  // rank order (tp-cp-ep-dp-pp), so every rank keeps its number: replica rank
  // cp_rank + cp·dp_rank is its dp rank here. A checkpoint is then resharded to
  // any cp as to any dp.
  const int dp = l.dp * l.cp;
  // zero counts with dp > 1 only, except with a pipeline, where it is refused (layout_mismatch).
  CheckpointLayout c{l.tp, dp, (dp > 1 || l.pp > 1) && l.zero >= 1 ? 1 : 0, l.pp, l.pp > 1 ? l.vpp : 1};
  c.ep = l.ep;
  return c;
}

CheckpointMetadata checkpoint_metadata_of(const RunDescription& run, std::int64_t steps_done,
                                          std::int64_t data_batches, const RunSharding& sharding) {
  CheckpointMetadata m;
  m.step = steps_done;
  m.data_batches = data_batches;
  m.seed = run.seed;
  m.model = model_of(run);
  m.layout = checkpoint_layout_of(run.layout);
  m.world_size = static_cast<int>(rank_order_layout(m.layout).total_gpus());
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

void check_checkpoint_fits(const OpenedCheckpoint& c, const RunDescription& run) {
  const CheckpointMetadata& m = c.metadata;
  std::vector<sim::Diagnostic> problems;
  auto add = [&](const std::string& message) { problems.push_back({metadata_file(c), 0, 0, "--load", message}); };
  const CheckpointLayout layout = checkpoint_layout_of(run.layout);
  CheckpointModel model = model_of(run);
  // A rank's share of the parameters depends on tp and ep; the model fields say whether it is the same model.
  if (m.layout.tp != layout.tp || m.layout.ep != layout.ep) model.parameters_per_rank = m.model.parameters_per_rank;
  if (const std::string p = model_mismatch(m.model, model); !p.empty()) add(p);
  if (const std::string p = layout_mismatch(m.layout, layout, sharding_known(m)); !p.empty()) add(p);
  if (const std::string p = lr_schedule_mismatch(m.lr_schedule, lr_of(run.lr)); !p.empty()) add(p);
  if (m.seed != run.seed)
    add("checkpoint's run used --seed " + std::to_string(m.seed) + "; this run has --seed " +
        std::to_string(run.seed) + " (the data order would not continue)");
  if (m.data_batches >= run.steps)
    add("checkpoint is at step " + std::to_string(m.step) + " (" + std::to_string(m.data_batches) +
        " batches drawn); --steps " + std::to_string(run.steps) +
        " counts from the start of training, so nothing is left to run: give a larger --steps");
  sim::throw_if_any(problems);
}

bool same_arrays(const OpenedCheckpoint& c, const sim::ParallelLayout& layout, const RunSharding& sharding) {
  if (c.metadata.layout != checkpoint_layout_of(layout)) return false;
  // The same pp and vpp with other split knobs puts other layers on a stage;
  // a checkpoint of an older sextant may hold the tensors in another order.
  return c.metadata.layout.pp == 1 ? c.metadata.sharding == sharding.front() : c.metadata.stages == sharding;
}

TrainerState load_rank_state(const OpenedCheckpoint& c, const sim::ParallelLayout& layout, int world_rank,
                             const RunSharding& sharding) {
  if (same_arrays(c, layout, sharding)) return read_rank_state(c, world_rank);
  const CheckpointMetadata& m = c.metadata;
  check_run_holds_saved_tensors(saved_stage_shardings(m), sharding, metadata_file(c));
  const int stage = sim::rank_coordinates(world_rank, layout).pp;
  const ReshardPlan plan = plan_reshard(m.layout, saved_stage_shardings(m), checkpoint_layout_of(layout),
                                        sharding.at(static_cast<std::size_t>(stage)), world_rank, metadata_file(c));
  return read_resharded_state(c, plan);
}

}  // namespace sextant::engine::checkpoint
