#include "sim/event/event_engine.h"

#include <gtest/gtest.h>

#include <map>

#include "sim/plan/plan_builder.h"
#include "sim/plan/task_name.h"
#include "tests/support/test_models.h"

namespace sextant::sim {
namespace {

PlanOptions with_schedule(PipelineSchedule schedule) {
  PlanOptions options;
  options.schedule = schedule;
  return options;
}

// A plan of `layers` layers over `pp` stages, tp = dp = 1: only compute and sends.
Plan small_plan(int layers, int pp, int microbatches, PipelineSchedule schedule, int vpp = 1) {
  ModelConfig m = testing::gpt3_175b();
  m.num_layers = layers;
  ParallelLayout l;
  l.pp = pp;
  l.vpp = vpp;
  l.schedule = vpp > 1 ? Schedule::kInterleaved : Schedule::kOneFOneB;
  l.gbs = microbatches;
  return build_plan(m, l, with_schedule(schedule));
}

// Hand-set durations: each layer's attention and MLP forward take
// `forward_s`/2, backward `backward_s`/2 (B and W halves for zero bubble);
// everything else is free.
std::vector<TaskCost> block_costs(const Plan& plan, double forward_s, double backward_s,
                                  double weight_s = 0) {
  std::vector<TaskCost> out(plan.tasks.size());
  for (std::size_t i = 0; i < plan.tasks.size(); ++i) {
    const Task& t = plan.tasks[i];
    if (t.kind != TaskKind::kCompute || (t.block != Block::kAttention && t.block != Block::kMlp)) {
      continue;
    }
    switch (t.pass) {
      case Pass::kForward: out[i].duration_s = forward_s / 2; break;
      case Pass::kBackward: out[i].duration_s = (backward_s + weight_s) / 2; break;
      case Pass::kBackwardInput: out[i].duration_s = backward_s / 2; break;
      case Pass::kBackwardWeight: out[i].duration_s = weight_s / 2; break;
      default: break;
    }
  }
  return out;
}

// When each op (all of one stage's blocks of one pass and micro-batch) ran.
std::map<std::string, std::pair<double, double>> op_times(const Plan& plan, const Timeline& tl) {
  std::map<std::string, std::pair<double, double>> out;
  for (std::size_t i = 0; i < plan.tasks.size(); ++i) {
    const Task& t = plan.tasks[i];
    if (t.kind != TaskKind::kCompute || t.microbatch < 0) continue;
    if (t.block != Block::kAttention && t.block != Block::kMlp) continue;
    const char pass = t.pass == Pass::kForward ? 'F' : t.pass == Pass::kBackwardWeight ? 'W' : 'B';
    const std::string key = "s" + std::to_string(t.stage) + "." + pass + std::to_string(t.microbatch);
    auto [it, fresh] = out.try_emplace(key, tl.start_s[i], tl.end_s[i]);
    if (!fresh) {
      it->second.first = std::min(it->second.first, tl.start_s[i]);
      it->second.second = std::max(it->second.second, tl.end_s[i]);
    }
  }
  return out;
}

// 1F1B on 2 stages and 4 micro-batches, forward 1, backward 2, free sends,
// worked by hand (Narayanan et al. 2021, Fig. 4 with p = 2):
//   stage 0: F0 [0,1] F1 [1,2] .. B0 [4,6] F2 [6,7] B1 [7,9] F3 [9,10] B2 [10,12] .. B3 [13,15]
//   stage 1:   F0 [1,2] B0 [2,4] F1 [4,5] B1 [5,7] F2 [7,8] B2 [8,10] F3 [10,11] B3 [11,13]
// Stage 0 waits 2 after F1 (for stage 1's B0) and 1 after B2: with stage 1's
// waits of 1 at the start and 2 at the end, each stage idles (p−1)(F+B) = 3.
// Step (m + p − 1)(F + B) = 5·3 = 15.
TEST(EventEngine, ReproducesHandComputedOneFOneBTimeline) {
  const Plan plan = small_plan(2, 2, 4, PipelineSchedule::kOneFOneB);
  const Timeline tl = play(plan, block_costs(plan, 1.0, 2.0), {});
  const std::map<std::string, std::pair<double, double>> expected = {
      {"s0.F0", {0, 1}},  {"s0.F1", {1, 2}},   {"s0.B0", {4, 6}},   {"s0.F2", {6, 7}},
      {"s0.B1", {7, 9}},  {"s0.F3", {9, 10}},  {"s0.B2", {10, 12}}, {"s0.B3", {13, 15}},
      {"s1.F0", {1, 2}},  {"s1.B0", {2, 4}},   {"s1.F1", {4, 5}},   {"s1.B1", {5, 7}},
      {"s1.F2", {7, 8}},  {"s1.B2", {8, 10}},  {"s1.F3", {10, 11}}, {"s1.B3", {11, 13}}};
  EXPECT_EQ(op_times(plan, tl), expected);
  // Task for task: forward runs attention then MLP (0.5 each), backward MLP
  // then attention (1 each); sends and the embedding and output layers take no time.
  for (std::size_t i = 0; i < plan.tasks.size(); ++i) {
    const Task& t = plan.tasks[i];
    if (t.kind != TaskKind::kCompute || t.layer < 0) continue;
    const bool forward = t.pass == Pass::kForward;
    const auto [op_start, op_end] = expected.at("s" + std::to_string(t.stage) + "." +
                                                (forward ? "F" : "B") + std::to_string(t.microbatch));
    const bool first_block = (t.block == Block::kAttention) == forward;
    const double middle = (op_start + op_end) / 2;
    EXPECT_EQ(tl.start_s[i], first_block ? op_start : middle) << task_name(plan, t);
    EXPECT_EQ(tl.end_s[i], first_block ? middle : op_end) << task_name(plan, t);
  }
  EXPECT_DOUBLE_EQ(tl.step_time_s, 15.0);
  EXPECT_DOUBLE_EQ(tl.stages[0].busy_s[0], 12.0);  // 4·(1 + 2)
}

// The same with sends of 0.25: a blocking send starts when the receiver has
// finished the compute before its receiving op, and holds the sender's next
// compute. Stage 1 is the bottleneck: after each backward its gradient send
// and the next micro-batch's activations travel together (Megatron's batched
// send_backward_recv_forward), so it waits one send, not two:
//   0.25 after stage 0's F0, then F0 B0 | F1 B1 | F2 B2 | F3 B3 with a wait of
//   0.25 at each bar, the last gradient send, and stage 0's B3:
//   1 + 0.25 + 4·3 + 3·0.25 + 0.25 + 2 = 16.25.
TEST(EventEngine, BlockingSendsHoldBothSides) {
  const Plan plan = small_plan(2, 2, 4, PipelineSchedule::kOneFOneB);
  std::vector<TaskCost> costs = block_costs(plan, 1.0, 2.0);
  for (std::size_t i = 0; i < plan.tasks.size(); ++i) {
    if (plan.tasks[i].kind == TaskKind::kPipelineSend) costs[i].duration_s = 0.25;
  }
  const Timeline tl = play(plan, costs, {});
  const auto ops = op_times(plan, tl);
  EXPECT_EQ(ops.at("s0.F1"), std::make_pair(1.25, 2.25));  // after F0's send
  EXPECT_EQ(ops.at("s1.F0"), std::make_pair(1.25, 2.25));
  EXPECT_EQ(ops.at("s1.B0"), std::make_pair(2.25, 4.25));
  // F1's activations leave stage 0 once stage 1 is done with B0 (4.25), at the
  // same time as B0's gradient leaves stage 1: both sends end at 4.5.
  EXPECT_EQ(ops.at("s0.B0"), std::make_pair(4.5, 6.5));
  EXPECT_EQ(ops.at("s1.F1"), std::make_pair(4.5, 5.5));
  EXPECT_EQ(ops.at("s1.B3"), std::make_pair(12.0, 14.0));
  EXPECT_EQ(ops.at("s0.B3"), std::make_pair(14.25, 16.25));
  EXPECT_DOUBLE_EQ(tl.step_time_s, 16.25);
}

// Transfers on the same link of a rank share it equally; a compute task
// overlapped by communication slows by (1 + slowdown).
TEST(EventEngine, SharesLinksAndSlowsOverlappedCompute) {
  // A hand-made plan: one compute task beside two transfers on one link.
  Plan overlap;
  overlap.shape.pp = 1;
  overlap.stage_begin = {0, 3};
  Task compute;
  Task dp = compute;
  dp.kind = TaskKind::kGradientReduce;
  dp.stream = StreamKind::kDataParallel;
  Task pp = dp;
  pp.kind = TaskKind::kPipelineSend;
  pp.stream = StreamKind::kPipelineForward;
  overlap.tasks = {compute, dp, pp};
  const std::vector<TaskCost> overlap_costs = {
      {1.0, LinkKind::kNone, 0}, {0.5, LinkKind::kNetwork, 0}, {1.0, LinkKind::kNetwork, 0}};
  const Timeline tl = play(overlap, overlap_costs, {0.5, true});
  // The two transfers share the NIC: the DP one's 0.5 takes 1.0; then the
  // send has 0.5 left alone: ends at 1.5.
  EXPECT_DOUBLE_EQ(tl.end_s[1], 1.0);
  EXPECT_DOUBLE_EQ(tl.end_s[2], 1.5);
  // Compute runs at 1/1.5 while either transfer runs, i.e. all its time: 1.5.
  EXPECT_NEAR(tl.end_s[0], 1.5, 1e-12);
  const Timeline no_sharing = play(overlap, overlap_costs, {0.0, false});
  EXPECT_DOUBLE_EQ(no_sharing.end_s[1], 0.5);
  EXPECT_DOUBLE_EQ(no_sharing.end_s[2], 1.0);
  EXPECT_DOUBLE_EQ(no_sharing.end_s[0], 1.0);
}

TEST(EventEngine, ReportsADeadlockedPlan) {
  Plan plan;
  plan.shape.pp = 1;
  plan.stage_begin = {0, 2};
  Task a, b;
  b.stream = StreamKind::kDataParallel;
  b.kind = TaskKind::kGradientReduce;
  a.first_dep = 0;
  a.dep_count = 1;  // a waits for b
  b.first_dep = 1;
  b.dep_count = 1;  // b waits for a
  plan.tasks = {a, b};
  plan.deps = {1, 0};
  EXPECT_THROW(play(plan, std::vector<TaskCost>(2), {}), std::logic_error);
}

// Peak activations: one unit per layer's forward, freed by its backward.
// 1F1B stage s holds p − s micro-batches (Narayanan et al. 2021, Sec. 2.2.1).
TEST(EventEngine, TracksInFlightActivations) {
  const Plan plan = small_plan(4, 4, 8, PipelineSchedule::kOneFOneB);
  std::vector<TaskCost> costs = block_costs(plan, 1.0, 2.0);
  for (std::size_t i = 0; i < plan.tasks.size(); ++i) {
    const Task& t = plan.tasks[i];
    if (t.kind != TaskKind::kCompute) continue;
    if (t.block == Block::kMlp && t.pass == Pass::kForward) costs[i].activation_bytes = 1;
    if (t.block == Block::kAttention && t.pass == Pass::kBackward) costs[i].activation_bytes = -1;
  }
  const Timeline tl = play(plan, costs, {});
  for (int s = 0; s < 4; ++s) EXPECT_DOUBLE_EQ(tl.stages[s].peak_activation_bytes, 4 - s);
}

// Qi et al. 2023, Sec. 3.1: with F = B = W, 1F1B idles (p−1)(F + B + W) per
// stage and ZB-H1 (p−1)(F + B − W), a third. 4 stages, 8 micro-batches, each
// pass 1: 1F1B 8·3 + 3·3 = 33, ZB-H1 8·3 + 3·1 = 27 (with its sends
// non-blocking, as the plan makes them; blocking exchanges would lock the
// stages into 1F1B's 33).
TEST(EventEngine, ZeroBubbleH1CutsTheBubbleToAThird) {
  const Plan one_f_one_b = small_plan(4, 4, 8, PipelineSchedule::kOneFOneB);
  EXPECT_DOUBLE_EQ(play(one_f_one_b, block_costs(one_f_one_b, 1.0, 1.0, 1.0), {}).step_time_s,
                   33.0);
  const Plan zb = small_plan(4, 4, 8, PipelineSchedule::kZeroBubbleH1);
  EXPECT_DOUBLE_EQ(play(zb, block_costs(zb, 1.0, 1.0, 1.0), {}).step_time_s, 27.0);
}

}  // namespace
}  // namespace sextant::sim
