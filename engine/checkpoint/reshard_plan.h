// Loading a checkpoint into another layout: which pieces of which saved
// rank's arrays make up a loading rank's arrays. Pure arithmetic on the two
// layouts' descriptions (checkpoint_sharding.h), tested on the CPU; the files
// are read by resharded_state.h.
//
// Every tensor is matched by name and addressed in the coordinates of the
// whole tensor (row-major, rows x cols): a tp rank's shard is a set of runs
// of it (shard_runs), so a piece of the loading rank's shard is found in
// whichever saved tp rank holds those elements. The bf16 weights come from
// the saved ranks of one dp rank (dp rank d reads saved dp rank d mod dp:
// all hold the same weights), an expert tensor's rows from the saved ep rank
// that holds them (dp rank e of the saved run holds ep rank e's; ep folds
// over dp), so a checkpoint of one ep loads into another. The fp32 master weights and Adam moments are
// the same pieces, read from the saved dp rank whose optimizer shard holds
// them under ZeRO-1 (an expert's from a dp rank of its ep rank: with ep > 1
// the experts' buckets are sharded over the expert-dp group), and written where the loading rank's own shard (or its
// full arrays) keeps them. Padding between tensors is not saved state: it is
// left zero.
//
// Pipelines: a loading rank of stage s needs the tensors of its own stage's
// sharding; each is read from the saved stage that holds it (by name), so a
// checkpoint loads into another pp, vpp or split. A tensor two saved stages
// hold — wte with tied embeddings, the first stage's embedding and the last
// stage's copy as the output layer — is read from the first: the two copies
// get the same (summed) gradient and the same AdamW update, so their weights,
// master weights and moments are equal.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/checkpoint/checkpoint_metadata.h"
#include "engine/checkpoint/checkpoint_sharding.h"

namespace sextant::engine::checkpoint {

/// Elements [whole, whole + elements) of the whole tensor (row-major) are a
/// shard's elements [local, local + elements).
struct ShardRun {
  std::uint64_t local = 0, whole = 0, elements = 0;
  bool operator==(const ShardRun&) const = default;
};

/// The runs of tp rank `tp_rank`'s shard of `t` in shard order, adjacent runs
/// merged: one run for a replicated tensor; for a row split, one per block
/// (block k's rows [start_k + r·b_k, +b_k)); for a column split, one per block
/// per row. Throws std::invalid_argument when a block is not divisible by tp
/// or the blocks do not add up to the split dimension. An expert tensor
/// (TensorSharding::expert) over `ep` ranks: ep rank `ep_rank`'s rows, one run
/// (std::invalid_argument when ep does not divide its rows, or with tp > 1).
std::vector<ShardRun> shard_runs(const TensorSharding& t, int tp, int tp_rank, int ep = 1, int ep_rank = 0);

/// Elements [source_offset, +elements) of saved rank source_rank's array go to
/// [target_offset, +elements) of the loading rank's.
struct ArrayCopy {
  int source_rank = 0;
  std::uint64_t source_offset = 0, target_offset = 0, elements = 0;
  bool operator==(const ArrayCopy&) const = default;
};

struct ReshardPlan {
  std::vector<ArrayCopy> weights;    // bf16 weights
  std::vector<ArrayCopy> optimizer;  // fp32 master weights, and Adam m and v alike
  /// DeepSeek-V3's expert biases (TrainerState::expert_biases): one row of E per
  /// MoE layer — a layer with a router, "layers.<i>.router_weight" (E x h) — in
  /// the stage's tensor order, each from the first rank (tp 0, dp 0) of the saved
  /// stage holding the layer (every rank of a stage holds the same biases).
  /// A saved shard without biases leaves them zero (read_resharded_state).
  std::vector<ArrayCopy> expert_biases;
  std::uint64_t bias_elements = 0;
  std::uint64_t weight_elements = 0;     // the loading rank's array lengths
  std::uint64_t optimizer_elements = 0;
};

/// The plan for world rank `rank` of the loading run (`run_layout`, and
/// `run`: the sharding of the rank's stage) from a checkpoint saved as
/// (`saved_layout`, `saved`: one sharding per saved stage, one when pp = 1).
/// World ranks are in the rank order tp-cp-dp-pp on both sides
/// (sim::rank_coordinates); a loading rank reads the saved cp rank of its own
/// cp rank mod the saved cp (cp ranks hold the same arrays). Throws
/// sim::ConfigError naming `metadata_file` and the tensor when the two do not
/// describe the same model: a tensor missing on either side (for a
/// pipeline: in every stage), another whole shape, a saved optimizer shard
/// that does not cover a tensor, saved optimizer shards that are not one per
/// dp rank (ZeRO-1 shards over dp; the cp ranks of a dp rank share its shard).
ReshardPlan plan_reshard(const CheckpointLayout& saved_layout, const std::vector<CheckpointSharding>& saved,
                         const CheckpointLayout& run_layout, const CheckpointSharding& run, int rank,
                         const std::string& metadata_file);
/// Throws sim::ConfigError naming `metadata_file` and the tensor when a saved
/// tensor is held by no stage of the run (`run`: every stage's sharding) — the
/// whole-model check that plan_reshard cannot make for one pipeline stage.
void check_run_holds_saved_tensors(const std::vector<CheckpointSharding>& saved,
                                   const std::vector<CheckpointSharding>& run, const std::string& metadata_file);

/// pp = 1 on the saved side: its one sharding.
ReshardPlan plan_reshard(const CheckpointLayout& saved_layout, const CheckpointSharding& saved,
                         const CheckpointLayout& run_layout, const CheckpointSharding& run, int rank,
                         const std::string& metadata_file);

}  // namespace sextant::engine::checkpoint
