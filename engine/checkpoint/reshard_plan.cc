#include "engine/checkpoint/reshard_plan.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>

#include "engine/checkpoint/checkpoint_error.h"
#include "sim/comm/group_placement.h"

namespace sextant::engine::checkpoint {

namespace {

using u64 = std::uint64_t;

void append_run(std::vector<ShardRun>& runs, ShardRun r) {
  if (r.elements == 0) return;
  if (!runs.empty()) {
    ShardRun& last = runs.back();
    if (last.local + last.elements == r.local && last.whole + last.elements == r.whole) {
      last.elements += r.elements;
      return;
    }
  }
  runs.push_back(r);
}

void append_copy(std::vector<ArrayCopy>& copies, ArrayCopy c) {
  if (c.elements == 0) return;
  if (!copies.empty()) {
    ArrayCopy& last = copies.back();
    if (last.source_rank == c.source_rank && last.source_offset + last.elements == c.source_offset &&
        last.target_offset + last.elements == c.target_offset) {
      last.elements += c.elements;
      return;
    }
  }
  copies.push_back(c);
}

// A run of the whole tensor held by saved tp rank `tp_rank`; an expert
// tensor's by saved dp rank `dp_rank` (its ep rank), any other's by every dp
// rank (-1: the one the plan reads replicated arrays from).
struct SourceRun {
  int tp_rank;
  ShardRun run;
  int dp_rank = -1;
};

// Flat elements [begin, +elements) of a tp rank's buffers are at
// [offset, +elements) of dp rank `dp_rank`'s array.
struct Placement {
  u64 begin, elements, offset;
  int dp_rank;
};

// Calls fn(from, to, piece) for each piece of `sorted` (by begin, disjoint)
// overlapping [begin, end); returns the elements covered.
template <typename Piece, typename Begin, typename Length, typename Fn>
u64 for_each_overlap(const std::vector<Piece>& sorted, u64 begin, u64 end, Begin begin_of, Length length_of, Fn fn) {
  auto it = std::upper_bound(sorted.begin(), sorted.end(), begin,
                             [&](u64 value, const Piece& p) { return value < begin_of(p); });
  if (it != sorted.begin()) --it;
  u64 covered = 0;
  for (; it != sorted.end() && begin_of(*it) < end; ++it) {
    const u64 from = std::max(begin, begin_of(*it));
    const u64 to = std::min(end, begin_of(*it) + length_of(*it));
    if (from >= to) continue;
    fn(from, to, *it);
    covered += to - from;
  }
  return covered;
}

// Where a tp rank's flat fp32 elements live over the dp ranks of a layout:
// the ZeRO-1 shards' pieces, or dp rank `whole_dp_rank`'s full arrays. Under
// expert parallelism (`ep` ranks) the expert pieces at a flat offset are
// another expert's on each ep rank: those of ep rank `ep_rank` (dp ranks d
// with d mod ep = ep_rank), with every dp rank's other pieces.
std::vector<Placement> optimizer_placement(const CheckpointSharding& s, int whole_dp_rank, int ep = 1,
                                           int ep_rank = 0) {
  std::vector<Placement> p;
  if (s.optimizer_shards.empty()) {
    p.push_back({0, s.flat_elements, 0, whole_dp_rank});
    return p;
  }
  for (std::size_t d = 0; d < s.optimizer_shards.size(); ++d)
    for (const OptimizerRange& r : s.optimizer_shards[d])
      if (!r.expert || static_cast<int>(d) % ep == ep_rank)
        p.push_back({r.begin, r.elements, r.shard_offset, static_cast<int>(d)});
  std::sort(p.begin(), p.end(), [](const Placement& a, const Placement& b) { return a.begin < b.begin; });
  return p;
}

std::string shape_text(const TensorSharding& t) {
  return std::to_string(t.rows) + " x " + std::to_string(t.cols);
}

}  // namespace

std::vector<ShardRun> shard_runs(const TensorSharding& t, int tp, int tp_rank, int ep, int ep_rank) {
  std::vector<ShardRun> runs;
  const u64 rows = static_cast<u64>(t.rows), cols = static_cast<u64>(t.cols);
  if (t.expert && ep > 1) {
    if (tp > 1 || t.split_dim >= 0)
      throw std::invalid_argument(t.name + ": an expert tensor split over tp too (the engine runs experts at tp = 1)");
    if (rows % static_cast<u64>(ep) != 0)
      throw std::invalid_argument(t.name + ": " + std::to_string(rows) + " rows not divisible by ep = " +
                                  std::to_string(ep));
    const u64 mine = rows / static_cast<u64>(ep) * cols;
    append_run(runs, {0, static_cast<u64>(ep_rank) * mine, mine});
    return runs;
  }
  if (t.split_dim < 0 || tp == 1) {
    append_run(runs, {0, 0, rows * cols});
    return runs;
  }
  if (t.split_dim != 0 && t.split_dim != 1)
    throw std::invalid_argument(t.name + ": split dimension " + std::to_string(t.split_dim) + " (0 or 1)");
  const u64 along = t.split_dim == 0 ? rows : cols;
  u64 sum = 0;
  for (const std::int64_t b : t.blocks) {
    if (b <= 0 || b % tp != 0)
      throw std::invalid_argument(t.name + ": block of " + std::to_string(b) + " not divisible by tp = " +
                                  std::to_string(tp));
    sum += static_cast<u64>(b);
  }
  if (sum != along)
    throw std::invalid_argument(t.name + ": blocks add up to " + std::to_string(sum) + ", the split dimension is " +
                                std::to_string(along));
  const u64 r = static_cast<u64>(tp_rank);
  if (t.split_dim == 0) {  // block k: whole rows [start + r·b, +b)
    u64 local = 0, start = 0;
    for (const std::int64_t whole_block : t.blocks) {
      const u64 b = static_cast<u64>(whole_block) / static_cast<u64>(tp);
      append_run(runs, {local, (start + r * b) * cols, b * cols});
      local += b * cols;
      start += static_cast<u64>(whole_block);
    }
    return runs;
  }
  const u64 local_cols = cols / static_cast<u64>(tp);  // each row: block k's columns [start + r·b, +b)
  for (u64 row = 0; row < rows; ++row) {
    u64 local = 0, start = 0;
    for (const std::int64_t whole_block : t.blocks) {
      const u64 b = static_cast<u64>(whole_block) / static_cast<u64>(tp);
      append_run(runs, {row * local_cols + local, row * cols + start + r * b, b});
      local += b;
      start += static_cast<u64>(whole_block);
    }
  }
  return runs;
}

void check_run_holds_saved_tensors(const std::vector<CheckpointSharding>& saved,
                                   const std::vector<CheckpointSharding>& run, const std::string& metadata_file) {
  std::set<std::string> held;
  for (const CheckpointSharding& stage : run)
    for (const TensorSharding& t : stage.tensors) held.insert(t.name);
  for (const CheckpointSharding& stage : saved)
    for (const TensorSharding& t : stage.tensors)
      if (!held.count(t.name))
        throw_checkpoint_error(metadata_file, "has a tensor '" + t.name + "' (" + shape_text(t) +
                                                  ") that this run's model lacks");
}

ReshardPlan plan_reshard(const CheckpointLayout& saved_layout, const CheckpointSharding& saved,
                         const CheckpointLayout& run_layout, const CheckpointSharding& run, int rank,
                         const std::string& metadata_file) {
  return plan_reshard(saved_layout, std::vector<CheckpointSharding>{saved}, run_layout, run, rank, metadata_file);
}

namespace {

// A router's tensor marks an MoE layer: its biases are one row of its E rows' count.
bool is_router(const TensorSharding& t) {
  constexpr std::string_view kRouter = ".router_weight";
  return t.name.size() > kRouter.size() && t.name.compare(t.name.size() - kRouter.size(), kRouter.size(), kRouter) == 0;
}

// ReshardPlan::expert_biases: each of this rank's MoE layers' rows from the
// saved stage holding the layer, at the layer's row there.
void plan_expert_biases(const std::vector<CheckpointSharding>& saved_stages, const CheckpointSharding& run,
                        const std::function<int(int)>& first_rank_of_stage, ReshardPlan& plan) {
  struct SavedRow {
    int stage;
    std::uint64_t row;
  };
  std::map<std::string, SavedRow> saved_rows;
  for (std::size_t st = 0; st < saved_stages.size(); ++st) {
    std::uint64_t row = 0;
    for (const TensorSharding& t : saved_stages[st].tensors)
      if (is_router(t)) saved_rows.emplace(t.name, SavedRow{static_cast<int>(st), row++});
  }
  for (const TensorSharding& t : run.tensors) {
    if (!is_router(t)) continue;
    // plan_reshard found every run tensor saved, of the same shape: E = rows.
    const SavedRow& from = saved_rows.at(t.name);
    const auto experts = static_cast<std::uint64_t>(t.rows);
    plan.expert_biases.push_back(
        {first_rank_of_stage(from.stage), from.row * experts, plan.bias_elements, experts});
    plan.bias_elements += experts;
  }
}

}  // namespace

ReshardPlan plan_reshard(const CheckpointLayout& saved_layout, const std::vector<CheckpointSharding>& saved_stages,
                         const CheckpointLayout& run_layout, const CheckpointSharding& run, int rank,
                         const std::string& metadata_file) {
  if (static_cast<int>(saved_stages.size()) != saved_layout.pp)
    throw_checkpoint_error(metadata_file, "describes " + std::to_string(saved_stages.size()) +
                                              " pipeline stage(s); its layout has pp=" + std::to_string(saved_layout.pp));
  const sim::RankCoordinates me = sim::rank_coordinates(rank, rank_order_layout(run_layout));
  const int tp_rank = me.tp, dp_rank = me.dp;
  const int source_dp = dp_rank % saved_layout.dp;  // whose copy of the replicated arrays to read
  // The saved rank holding tp rank `tp` and dp rank `dp`'s arrays of saved stage
  // `stage`: of cp rank cp mod saved cp (every cp rank holds the same ones).
  const sim::ParallelLayout saved_order = rank_order_layout(saved_layout);
  auto saved_rank = [&, source_cp = me.cp % saved_layout.cp](int tp, int dp, int stage) {
    return sim::rank_at({.tp = tp, .cp = source_cp, .dp = dp, .pp = stage}, saved_order);
  };
  // ZeRO-1 shards the optimizer state over the dp ranks, one shard each; the
  // cp ranks of a dp rank hold the same shard, as they hold the same weights.
  for (const CheckpointSharding& stage : saved_stages)
    if (!stage.optimizer_shards.empty() && static_cast<int>(stage.optimizer_shards.size()) != saved_layout.dp)
      throw_checkpoint_error(metadata_file, "has " + std::to_string(stage.optimizer_shards.size()) +
                                                " optimizer shards in a stage; its layout has dp=" +
                                                std::to_string(saved_layout.dp) + " (damaged metadata?)");
  if (!run.optimizer_shards.empty() && static_cast<int>(run.optimizer_shards.size()) != run_layout.dp)
    throw std::logic_error("plan_reshard: " + std::to_string(run.optimizer_shards.size()) +
                           " optimizer shards for dp = " + std::to_string(run_layout.dp));
  // Each tensor from the first saved stage that holds it (the tied copy of wte: equal to the first stage's).
  struct SavedTensor {
    const TensorSharding* tensor;
    int stage;
  };
  std::map<std::string, SavedTensor> saved_by_name;
  for (std::size_t st = saved_stages.size(); st-- > 0;)
    for (const TensorSharding& t : saved_stages[st].tensors) saved_by_name[t.name] = {&t, static_cast<int>(st)};
  std::map<std::string, bool> used;
  ReshardPlan plan;
  plan.weight_elements = run.flat_elements;
  const std::vector<OptimizerRange>* mine =
      run.optimizer_shards.empty() ? nullptr : &run.optimizer_shards.at(static_cast<std::size_t>(dp_rank));
  if (mine == nullptr) {
    plan.optimizer_elements = run.flat_elements;
  } else {
    for (const OptimizerRange& r : *mine) plan.optimizer_elements = std::max(plan.optimizer_elements, r.shard_offset + r.elements);
  }
  std::vector<OptimizerRange> mine_sorted = mine ? *mine : std::vector<OptimizerRange>{};
  std::sort(mine_sorted.begin(), mine_sorted.end(),
            [](const OptimizerRange& a, const OptimizerRange& b) { return a.begin < b.begin; });
  // By saved stage, then saved ep rank (one placement at ep = 1).
  std::vector<std::vector<std::vector<Placement>>> saved_fp32;
  for (const CheckpointSharding& stage : saved_stages) {
    std::vector<std::vector<Placement>>& by_ep = saved_fp32.emplace_back();
    for (int e = 0; e < saved_layout.ep; ++e) by_ep.push_back(optimizer_placement(stage, source_dp, saved_layout.ep, e));
  }

  for (const TensorSharding& t : run.tensors) {
    const auto found = saved_by_name.find(t.name);
    if (found == saved_by_name.end())
      throw_checkpoint_error(metadata_file, "has no tensor '" + t.name + "' (this run's model has one of " +
                                                shape_text(t) + ")");
    const TensorSharding& s = *found->second.tensor;
    const int saved_stage = found->second.stage;
    used[t.name] = true;
    if (s.rows != t.rows || s.cols != t.cols)
      throw_checkpoint_error(metadata_file, "tensor '" + t.name + "' is " + shape_text(s) +
                                                " in the checkpoint; this run's is " + shape_text(t));
    std::vector<SourceRun> sources;
    try {
      const bool by_ep = s.expert && saved_layout.ep > 1;
      const int holders = s.split_dim < 0 ? 1 : saved_layout.tp;
      for (int r = 0; r < holders; ++r)
        for (int e = 0; e < (by_ep ? saved_layout.ep : 1); ++e)
          for (const ShardRun& x : shard_runs(s, saved_layout.tp, r, saved_layout.ep, e))
            sources.push_back({r, x, by_ep ? e : -1});
    } catch (const std::invalid_argument& e) {
      throw_checkpoint_error(metadata_file, std::string("tensor ") + e.what());
    }
    std::sort(sources.begin(), sources.end(),
              [](const SourceRun& a, const SourceRun& b) { return a.run.whole < b.run.whole; });
    std::vector<ShardRun> targets;
    try {
      targets = shard_runs(t, run_layout.tp, tp_rank, run_layout.ep, me.ep);
    } catch (const std::invalid_argument& e) {
      throw_checkpoint_error(metadata_file, std::string("this run's tensor ") + e.what());
    }
    for (const ShardRun& target : targets) {
      const u64 covered = for_each_overlap(
          sources, target.whole, target.whole + target.elements, [](const SourceRun& x) { return x.run.whole; },
          [](const SourceRun& x) { return x.run.elements; },
          [&](u64 from, u64 to, const SourceRun& source) {
            // The piece's flat offsets in the saved tp rank's and in this rank's buffers.
            const u64 src = s.offset + source.run.local + (from - source.run.whole);
            const u64 dst = t.offset + target.local + (from - target.whole);
            const u64 n = to - from;
            const int weights_dp = source.dp_rank >= 0 ? source.dp_rank : source_dp;
            append_copy(plan.weights, {saved_rank(source.tp_rank, weights_dp, saved_stage), src, dst, n});
            // fp32: where the saved run kept [src, src + n) of that tp rank, and
            // where this rank keeps [dst, dst + n).
            const std::vector<Placement>& placement =
                saved_fp32[static_cast<std::size_t>(saved_stage)][static_cast<std::size_t>(std::max(source.dp_rank, 0))];
            const u64 saved_covered = for_each_overlap(
                placement, src, src + n, [](const Placement& p) { return p.begin; },
                [](const Placement& p) { return p.elements; },
                [&](u64 a, u64 b, const Placement& p) {
                  const u64 to_flat = dst + (a - src);
                  // Unsharded fp32 arrays are read where the weights are (an
                  // expert's from its ep rank's); ZeRO-1 shards from their dp rank.
                  const bool unsharded = saved_stages[static_cast<std::size_t>(saved_stage)].optimizer_shards.empty();
                  const int source_rank = saved_rank(source.tp_rank, unsharded ? weights_dp : p.dp_rank, saved_stage);
                  const u64 source_offset = p.offset + (a - p.begin);
                  if (mine == nullptr) {
                    append_copy(plan.optimizer, {source_rank, source_offset, to_flat, b - a});
                    return;
                  }
                  for_each_overlap(mine_sorted, to_flat, to_flat + (b - a),
                                   [](const OptimizerRange& o) { return o.begin; },
                                   [](const OptimizerRange& o) { return o.elements; },
                                   [&](u64 x, u64 y, const OptimizerRange& o) {
                                     append_copy(plan.optimizer, {source_rank, source_offset + (x - to_flat),
                                                                  o.shard_offset + (x - o.begin), y - x});
                                   });
                });
            if (saved_covered != n)
              throw_checkpoint_error(metadata_file, "tensor '" + t.name + "': the saved optimizer shards hold " +
                                                        std::to_string(saved_covered) + " of " + std::to_string(n) +
                                                        " elements of a piece (damaged metadata?)");
          });
      if (covered != target.elements)
        throw_checkpoint_error(metadata_file, "tensor '" + t.name + "': the saved shards hold " +
                                                  std::to_string(covered) + " of " + std::to_string(target.elements) +
                                                  " elements this rank needs (damaged metadata?)");
    }
  }
  plan_expert_biases(saved_stages, run, [&](int stage) { return saved_rank(0, 0, stage); }, plan);
  // A pipeline stage needs only its own tensors; the whole model (pp = 1) all of the saved ones.
  if (run.chunks.empty())
    for (const auto& [name, found] : saved_by_name) {
      if (used.count(name)) continue;
      const TensorSharding& s = *found.tensor;
      throw_checkpoint_error(metadata_file, "has a tensor '" + s.name + "' (" + shape_text(s) +
                                                ") that this run's model lacks");
    }
  return plan;
}

}  // namespace sextant::engine::checkpoint
