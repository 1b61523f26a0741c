// Test support for moving checkpoints between layouts on the CPU: every
// rank's arrays built from each element's identity, so that a piece copied
// from the wrong rank, tensor or offset shows as a wrong number.
//
// Tensor i's whole element e holds 10000·i + e + 0.5 as its fp32 master
// (exact in fp32 while i < 1600 and e < 10000: below 2^24), minus that in
// Adam m, twice it in v, and the low 16 bits of 7·i + e in its bf16 word.
// Padding holds `pad`. Which i a tensor has is the caller's (`tensor_id`):
// its index in the sharding, or in the whole model's layout when stages hold
// different tensors.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <vector>

#include "engine/checkpoint/checkpoint_directory.h"
#include "engine/checkpoint/checkpoint_sharding.h"
#include "engine/checkpoint/reshard_plan.h"
#include "engine/checkpoint/trainer_state.h"
#include "sim/comm/group_placement.h"

namespace sextant::engine::checkpoint::testing {

/// The sharding of `layout` (one tp rank's) over tp·dp ranks; with ZeRO-1
/// (`zero`) two buckets that do not end at tensor boundaries, each a multiple
/// of 8·dp (the flat buffers padded to one).
inline CheckpointSharding sharding_with_buckets(const ParameterLayout& layout, int tp, int dp, bool zero) {
  const std::uint64_t multiple = 8 * static_cast<std::uint64_t>(dp);
  auto round_up = [&](std::uint64_t n) { return (n + multiple - 1) / multiple * multiple; };
  std::vector<GradientBucketRange> buckets;
  std::uint64_t flat = layout.total_elements();
  if (zero) {
    const std::uint64_t first = round_up(flat / 2);
    flat = round_up(flat);
    buckets = {{0, first, 0}, {first, flat - first, 0}};
  }
  return sharding_of(layout, tp, flat, buckets, dp, zero);
}

inline float identity_master(std::size_t tensor, std::uint64_t whole) {
  return 10000.0f * static_cast<float>(tensor) + static_cast<float>(whole) + 0.5f;
}

/// Every rank's state, by world rank in the rank order tp-cp-dp-pp
/// (sim::rank_coordinates), stage s's ranks cut as stages[s] says (one
/// sharding when pp = 1); the `cp` ranks of a tp, dp and stage hold the same;
/// with `ep` > 1 dp rank d holds ep rank d mod ep's rows of the expert tensors.
inline std::vector<TrainerState> identity_states(int tp, int dp, const std::vector<CheckpointSharding>& stages,
                                                 const std::function<std::size_t(const TensorSharding&)>& tensor_id,
                                                 float pad, std::int64_t step, int cp = 1, int ep = 1) {
  std::vector<TrainerState> states;
  CheckpointLayout layout;
  layout.tp = tp;
  layout.cp = cp;
  layout.dp = dp;
  layout.ep = ep;
  layout.pp = static_cast<int>(stages.size());
  const sim::ParallelLayout order = rank_order_layout(layout);
  for (int w = 0; w < order.total_gpus(); ++w) {
    const sim::RankCoordinates c = sim::rank_coordinates(w, order);
    const int t = c.tp, d = c.dp, stage = c.pp;
    const CheckpointSharding& sh = stages[static_cast<std::size_t>(stage)];
    std::vector<std::uint16_t> weights(sh.flat_elements, static_cast<std::uint16_t>(pad));
    std::vector<float> full(sh.flat_elements, pad);
    for (const TensorSharding& tensor : sh.tensors) {
      const std::size_t i = tensor_id(tensor);
      for (const ShardRun& r : shard_runs(tensor, tp, t, ep, c.ep))
        for (std::uint64_t e = 0; e < r.elements; ++e) {
          weights[tensor.offset + r.local + e] = static_cast<std::uint16_t>(7 * i + r.whole + e);
          full[tensor.offset + r.local + e] = identity_master(i, r.whole + e);
        }
    }
    TrainerState s;
    s.steps_done = step;
    s.weights_bf16 = weights;
    if (sh.optimizer_shards.empty()) {
      s.master = full;
    } else {
      for (const OptimizerRange& r : sh.optimizer_shards[static_cast<std::size_t>(d)]) {
        s.master.resize(std::max<std::size_t>(s.master.size(), r.shard_offset + r.elements));
        for (std::uint64_t e = 0; e < r.elements; ++e) s.master[r.shard_offset + e] = full[r.begin + e];
      }
    }
    for (const float x : s.master) {
      s.adam_m.push_back(x == pad ? pad : -x);
      s.adam_v.push_back(x == pad ? pad : 2 * x);
    }
    states.push_back(std::move(s));
  }
  return states;
}

/// Plans and reads every rank of the layout `run` (stage s cut as
/// run_stages[s]) from `opened` (its stages `saved`), and expects each rank's
/// arrays to be `want`'s element for element.
inline void expect_resharded_states(const OpenedCheckpoint& opened, const std::vector<CheckpointSharding>& saved,
                                    const CheckpointLayout& run, const std::vector<CheckpointSharding>& run_stages,
                                    const std::vector<TrainerState>& want) {
  const sim::ParallelLayout order = rank_order_layout(run);
  for (int w = 0; w < order.total_gpus(); ++w) {
    const CheckpointSharding& mine = run_stages.at(static_cast<std::size_t>(sim::rank_coordinates(w, order).pp));
    const ReshardPlan plan = plan_reshard(opened.metadata.layout, saved, run, mine, w, "m.json");
    const TrainerState got = read_resharded_state(opened, plan);
    const TrainerState& expected = want.at(static_cast<std::size_t>(w));
    EXPECT_EQ(got.steps_done, opened.metadata.step);
    EXPECT_EQ(got.weights_bf16, expected.weights_bf16) << "rank " << w;
    EXPECT_EQ(got.master, expected.master) << "rank " << w;
    EXPECT_EQ(got.adam_m, expected.adam_m) << "rank " << w;
    EXPECT_EQ(got.adam_v, expected.adam_v) << "rank " << w;
    EXPECT_EQ(got.expert_biases, expected.expert_biases) << "rank " << w;
  }
}

}  // namespace sextant::engine::checkpoint::testing
