// The Plan: for every pipeline stage, the ordered tasks of one training
// iteration with their streams and dependencies (DESIGN.md, "a plan is a
// program"). The event simulator plays it with durations from the cost model;
// the engine executes it with real kernels. Nothing here knows a duration.
//
// Invariants: tasks of one stage are contiguous and in that stage's issue
// order, so the order of the tasks of one (stage, stream) in `tasks` is the
// order that stream runs them. Dependencies point at any task (other stages'
// sends included); the graph of dependencies plus stream order is acyclic.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sim/core/pipeline_split.h"
#include "sim/plan/pipeline_schedule.h"
#include "sim/plan/task.h"

namespace sextant::sim {

/// Gradients reduced (and, with a distributed optimizer, weights gathered) in
/// one data-parallel collective: consecutive layers of one model chunk.
struct GradientBucket {
  int stage = 0;
  int index_in_stage = 0;  // the stage's buckets are numbered in reduction order
  int chunk = 0;
  int first_layer = 0;  // global layer indices, inclusive; last < first when none
  int last_layer = -1;
  bool embedding = false;     // holds the word (and position) embedding
  bool output_layer = false;  // holds the final norm and output layer
  /// Parameters one GPU holds in this bucket: dense ones are reduced over the
  /// dp·cp group, expert ones over the expert-data-parallel group.
  double dense_params = 0;
  double expert_params = 0;
};

struct PlanShape {
  PipelineSchedule schedule = PipelineSchedule::kOneFOneB;
  int pp = 1;
  int vpp = 1;
  int microbatches = 1;
  int num_layers = 0;
  /// Which layers each (stage, chunk) holds (sim/core/pipeline_split.h).
  PipelineSplit split;
  /// Sends block the sender's next compute until the receiver took them
  /// (Megatron's batched send/recv under GPipe and 1F1B).
  bool blocking_p2p = true;
  /// Each receive is a blocking call of its own on the receiving stage, after
  /// or before its own send, never beside it (DeepSpeed's PipelineEngine;
  /// PipelineExchange::kSequential). Only with blocking_p2p.
  bool sequential_p2p = false;
  /// What the collectives are, for their names: SP's all-gather +
  /// reduce-scatter or an all-reduce; ZeRO-0's all-reduce or a reduce-scatter.
  bool sequence_parallel = false;
  int zero = 0;
  /// The context-parallel exchange: the K/V ring or the all-gather (and, in the
  /// backward, the dK/dV reduce-scatter) before the core.
  bool cp_all_gather = false;
};

struct Plan {
  PlanShape shape;
  std::vector<Task> tasks;
  std::vector<std::uint32_t> deps;  // Task::first_dep/dep_count index this
  std::vector<GradientBucket> buckets;
  /// Tasks of stage s are [stage_begin[s], stage_begin[s + 1]).
  std::vector<std::uint32_t> stage_begin;

  std::span<const std::uint32_t> deps_of(std::uint32_t task) const {
    const Task& t = tasks[task];
    return {deps.data() + t.first_dep, t.dep_count};
  }
  int num_stages() const { return static_cast<int>(stage_begin.size()) - 1; }
};

/// Global index of local layer `local` of chunk `chunk` on stage `stage`
/// (Megatron-Core's interleaved layer assignment, evenly split or not).
inline int global_layer(const PlanShape& shape, int stage, int chunk, int local) {
  return shape.split.chunk(stage, chunk).first_layer + local;
}

/// Transformer layers chunk `chunk` of stage `stage` holds.
inline int layers_in_chunk(const PlanShape& shape, int stage, int chunk) {
  return shape.split.chunk(stage, chunk).num_layers;
}

}  // namespace sextant::sim
