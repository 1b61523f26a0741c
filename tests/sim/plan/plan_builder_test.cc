#include "sim/plan/plan_builder.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "sim/event/critical_path.h"
#include "sim/memory/parameter_count.h"
#include "sim/plan/task_name.h"
#include "tests/support/test_models.h"

namespace sextant::sim {
namespace {

PlanOptions with_schedule(PipelineSchedule schedule) {
  PlanOptions options;
  options.schedule = schedule;
  return options;
}

ParallelLayout gpt3_layout() {
  ParallelLayout l;
  l.tp = 8;
  l.sp = true;
  l.pp = 8;
  l.vpp = 3;
  l.schedule = Schedule::kInterleaved;
  l.dp = 16;
  l.mbs = 1;
  l.gbs = 1536;
  l.zero = 1;
  l.recompute = Recompute::kSelective;
  l.overlap_param_gather = true;
  return l;
}

std::map<std::string, int> count_by_kind(const Plan& plan, int stage) {
  std::map<std::string, int> out;
  for (std::uint32_t t = plan.stage_begin[stage]; t < plan.stage_begin[stage + 1]; ++t) {
    out[std::string(to_string(plan.tasks[t].stream))]++;
  }
  return out;
}

// GPT-3 175B, pp=8, vpp=3, m = 1536/16 = 96: each middle stage holds 12
// layers, 4 per chunk. Per layer and micro-batch: attention and MLP, forward
// and backward (selective recomputation runs inside the attention backward),
// each between its sequence-parallel all-gather and reduce-scatter: 4 compute
// + 8 TP tasks. Sends: one
// forward and one backward per chunk and micro-batch (3·96 each).
TEST(PlanBuilder, CountsTasksOfAnInterleavedStage) {
  const Plan plan = build_plan(testing::gpt3_175b(), gpt3_layout());
  EXPECT_EQ(layers_in_chunk(plan.shape, 0, 0), 4);
  EXPECT_EQ(plan.shape.microbatches, 96);
  EXPECT_FALSE(plan.shape.blocking_p2p);
  const std::map<std::string, int> middle = count_by_kind(plan, 3);
  EXPECT_EQ(middle.at("compute"), 12 * 96 * 4 + 1);  // + the optimizer step
  EXPECT_EQ(middle.at("tp"), 12 * 96 * 8);
  EXPECT_EQ(middle.at("pp_fwd"), 3 * 96);
  EXPECT_EQ(middle.at("pp_bwd"), 3 * 96);
  // DP: one reduce-scatter per bucket, and one all-gather on its own stream.
  const int buckets = static_cast<int>(std::count_if(
      plan.buckets.begin(), plan.buckets.end(), [](const GradientBucket& b) { return b.stage == 3; }));
  EXPECT_EQ(middle.at("dp"), buckets);
  EXPECT_EQ(middle.at("dp_gather"), buckets);
  // The first stage adds the embedding, the last the output layer, forward and backward.
  EXPECT_EQ(count_by_kind(plan, 0).at("compute"), 12 * 96 * 4 + 1 + 2 * 96);
  EXPECT_EQ(count_by_kind(plan, 7).at("compute"), 12 * 96 * 4 + 1 + 2 * 96);
  EXPECT_EQ(count_by_kind(plan, 0).at("pp_bwd"), 2 * 96);  // chunk 0 sends no gradient back
}

TEST(PlanBuilder, NamesTasksAsTheEngineDoes) {
  const Plan plan = build_plan(testing::gpt3_175b(), gpt3_layout());
  std::set<std::string> names;
  for (const Task& t : plan.tasks) names.insert(task_name(plan, t));
  EXPECT_EQ(names.size(), plan.tasks.size());  // every name is unique
  // Stage 2 holds layers 8-11 (chunk 0), 40-43 (chunk 1) and 72-75 (chunk 2).
  for (const char* name :
       {"stage2.mb5.layer41.attn.fwd", "stage2.mb5.layer41.attn.fwd.tp.all_gather",
        "stage2.mb5.layer41.attn.fwd.tp.reduce_scatter", "stage2.mb5.layer41.mlp.bwd.tp.all_gather",
        "stage2.mb5.layer41.mlp.bwd", "stage2.mb5.chunk1.pp.send_fwd",
        "stage2.mb5.chunk1.pp.send_bwd", "stage2.dp.reduce_scatter.bucket0",
        "stage2.dp.all_gather.bucket0", "stage2.optimizer.step", "stage0.mb0.embedding.fwd",
        "stage7.mb95.output.bwd"}) {
    EXPECT_TRUE(names.count(name)) << name;
  }
}

// One GPU's plan of a 2-layer model at tp = 2: its tasks in issue order, by
// name. Sequence parallelism puts each block between its all-gather and its
// reduce-scatter, forward and backward (Korthikanti et al. 2022, Fig. 5 and
// Sec. 4.2.2); without it an all-reduce follows each block (Shoeybi et al.
// 2019, Fig. 4); with --tp-comm-overlap the collectives stay one task beside
// the block and its tail.
std::vector<std::string> stage_task_names(const ParallelLayout& l) {
  ModelConfig m = testing::gpt3_175b();
  m.num_layers = 2;
  const Plan plan = build_plan(m, l);
  std::vector<std::string> names;
  for (const Task& t : plan.tasks) {
    std::string name = task_name(plan, t);
    names.push_back(name.substr(name.find('.') + 1));  // without "stage0."
  }
  return names;
}

TEST(PlanBuilder, SequenceParallelCollectivesSurroundEachBlock) {
  ParallelLayout l;
  l.tp = 2;
  l.sp = true;
  l.mbs = 1;
  l.gbs = 1;
  const std::vector<std::string> layer1_forward = {
      "mb0.layer1.attn.fwd.tp.all_gather", "mb0.layer1.attn.fwd", "mb0.layer1.attn.fwd.tp.reduce_scatter",
      "mb0.layer1.mlp.fwd.tp.all_gather",  "mb0.layer1.mlp.fwd",  "mb0.layer1.mlp.fwd.tp.reduce_scatter"};
  const std::vector<std::string> layer1_backward = {
      "mb0.layer1.mlp.bwd.tp.all_gather",  "mb0.layer1.mlp.bwd",  "mb0.layer1.mlp.bwd.tp.reduce_scatter",
      "mb0.layer1.attn.bwd.tp.all_gather", "mb0.layer1.attn.bwd", "mb0.layer1.attn.bwd.tp.reduce_scatter"};
  const std::vector<std::string> names = stage_task_names(l);
  // embedding, 2 layers x 6, output, output bwd, 2 layers x 6, embedding bwd, optimizer.
  ASSERT_EQ(names.size(), 1u + 12 + 2 + 12 + 1 + 1);
  EXPECT_EQ(names[0], "mb0.embedding.fwd");
  EXPECT_EQ(std::vector<std::string>(names.begin() + 7, names.begin() + 13), layer1_forward);
  EXPECT_EQ(names[13], "mb0.output.fwd");
  EXPECT_EQ(std::vector<std::string>(names.begin() + 15, names.begin() + 21), layer1_backward);
  EXPECT_EQ(names[27], "mb0.embedding.bwd");

  l.sp = false;
  const std::vector<std::string> plain = stage_task_names(l);
  ASSERT_EQ(plain.size(), 1u + 8 + 2 + 8 + 1 + 1);
  EXPECT_EQ(std::vector<std::string>(plain.begin() + 5, plain.begin() + 9),
            (std::vector<std::string>{"mb0.layer1.attn.fwd", "mb0.layer1.attn.fwd.tp.all_reduce",
                                      "mb0.layer1.mlp.fwd", "mb0.layer1.mlp.fwd.tp.all_reduce"}));

  l.sp = true;
  l.tp_comm_overlap = true;
  const std::vector<std::string> overlapped = stage_task_names(l);
  EXPECT_EQ(std::vector<std::string>(overlapped.begin() + 7, overlapped.begin() + 10),
            (std::vector<std::string>{"mb0.layer1.attn.fwd", "mb0.layer1.attn.fwd.tp.all_gather+reduce_scatter",
                                      "mb0.layer1.attn.fwd.tp.all_gather+reduce_scatter.tail"}));
}

// moe_a2a_overlap (Megatron-Core's combined 1F1B): with pp = 1 and 3
// micro-batches the program F0 B0 F1 B1 F2 B2 runs F0 alone, then (F1, B0)
// and (F2, B1) combined, then B2 alone. In a combined step the compute stream
// alternates F.attn, B.mlp, F.mlp, B.attn layer by layer (forward layers up,
// backward layers down), and each all-to-all runs beside the other pass's block.
TEST(PlanBuilder, CombinedStepsInterleaveTwoMicroBatchesLayerByLayer) {
  ModelConfig m = testing::gpt3_175b();
  m.num_layers = 2;
  m.moe = MoeConfig{8, 2, 4096, 0, 0};
  ParallelLayout l;
  l.dp = 8;
  l.ep = 8;
  l.mbs = 1;
  l.gbs = 24;  // 3 micro-batches
  l.moe_a2a_overlap = true;
  const Plan plan = build_plan(m, l);
  EXPECT_EQ(topological_order(plan).size(), plan.tasks.size());
  std::vector<std::string> compute, expert;
  for (const Task& t : plan.tasks) {
    if (t.microbatch != 1 && !(t.microbatch == 0 && t.pass == Pass::kBackward)) continue;
    if (t.stream == StreamKind::kCompute && t.kind == TaskKind::kCompute) {
      compute.push_back(task_name(plan, t));
    }
    if (t.stream == StreamKind::kExpertParallel) expert.push_back(task_name(plan, t));
  }
  const std::vector<std::string> want_compute = {
      "stage0.mb1.embedding.fwd",  "stage0.mb0.output.bwd",      "stage0.mb1.layer0.attn.fwd",
      "stage0.mb0.layer1.mlp.bwd", "stage0.mb1.layer0.mlp.fwd",  "stage0.mb0.layer1.attn.bwd",
      "stage0.mb1.layer1.attn.fwd", "stage0.mb0.layer0.mlp.bwd", "stage0.mb1.layer1.mlp.fwd",
      "stage0.mb0.layer0.attn.bwd", "stage0.mb1.output.fwd",     "stage0.mb0.embedding.bwd"};
  // mb1's backward comes after, in the (F2, B1) step: only its first tasks here.
  ASSERT_GE(compute.size(), want_compute.size());
  EXPECT_EQ(std::vector<std::string>(compute.begin(), compute.begin() + 12), want_compute);
  const std::vector<std::string> want_expert = {
      "stage0.mb0.layer1.mlp.bwd.ep.dispatch", "stage0.mb1.layer0.mlp.fwd.ep.dispatch",
      "stage0.mb0.layer1.mlp.bwd.ep.combine",  "stage0.mb1.layer0.mlp.fwd.ep.combine",
      "stage0.mb0.layer0.mlp.bwd.ep.dispatch", "stage0.mb1.layer1.mlp.fwd.ep.dispatch",
      "stage0.mb0.layer0.mlp.bwd.ep.combine",  "stage0.mb1.layer1.mlp.fwd.ep.combine"};
  ASSERT_GE(expert.size(), want_expert.size());
  EXPECT_EQ(std::vector<std::string>(expert.begin(), expert.begin() + 8), want_expert);
}

TEST(PlanBuilder, IsAcyclicForEverySchedule) {
  ModelConfig m = testing::gpt3_175b();
  for (const PipelineSchedule schedule :
       {PipelineSchedule::kGpipe, PipelineSchedule::kOneFOneB, PipelineSchedule::kZeroBubbleH1}) {
    ParallelLayout l = gpt3_layout();
    l.vpp = 1;
    l.schedule = Schedule::kOneFOneB;
    l.gbs = 16 * 24;
    const Plan plan = build_plan(m, l, with_schedule(schedule));
    EXPECT_EQ(topological_order(plan).size(), plan.tasks.size()) << to_string(schedule);
    // DeepSpeed's sequential exchange adds blocking receives; still no cycle.
    PlanOptions sequential = with_schedule(schedule);
    sequential.pipeline_exchange = PipelineExchange::kSequential;
    const Plan blocking = build_plan(m, l, sequential);
    EXPECT_EQ(topological_order(blocking).size(), blocking.tasks.size()) << to_string(schedule);
  }
  const Plan interleaved = build_plan(m, gpt3_layout());
  EXPECT_EQ(topological_order(interleaved).size(), interleaved.tasks.size());
}

// Buckets hold what stage_params_per_gpu counts, none much above 40M
// parameters: GPT-3's layer on one of tp=8 GPUs has 12h²/8 + 13h/8 + 4h
// ≈ 226.5M parameters, so each layer is a bucket of its own.
TEST(GradientBuckets, SplitTheStageParametersInReductionOrder) {
  const ModelConfig m = testing::gpt3_175b();
  ParallelLayout l = gpt3_layout();
  const Plan plan = build_plan(m, l);
  for (int stage : {0, 3, 7}) {
    double total = 0;
    int last_chunk = l.vpp;
    for (const GradientBucket& b : plan.buckets) {
      if (b.stage != stage) continue;
      total += b.dense_params + b.expert_params;
      EXPECT_LE(b.chunk, last_chunk);  // the last chunk's gradients first
      last_chunk = b.chunk;
    }
    EXPECT_NEAR(total, stage_params_per_gpu(m, l, stage).total(), 1.0);
  }
  const GradientBucket& first = plan.buckets.front();  // stage 0, chunk 2, layers 64-67
  EXPECT_EQ(first.chunk, 2);
  EXPECT_EQ(first.first_layer, 64);  // later chunks are not split (Megatron)
  EXPECT_EQ(first.last_layer, 67);
  std::vector<GradientBucket> chunk0;
  for (const GradientBucket& b : plan.buckets) {
    if (b.stage == 0 && b.chunk == 0) chunk0.push_back(b);
  }
  // Layers 3, 2, 1, 0, then the embedding (V·h/tp + s·h = 78.6M + 25.2M) on its own.
  ASSERT_EQ(chunk0.size(), 5u);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(chunk0[i].first_layer, 3 - i);
    EXPECT_EQ(chunk0[i].last_layer, 3 - i);
  }
  EXPECT_TRUE(chunk0[4].embedding);
  EXPECT_NEAR(chunk0[4].dense_params, 51200.0 * 12288 / 8 + 2048.0 * 12288, 1.0);
}

// Outside the interleaved schedule a send waits for the receiver to post its
// receive (its compute before the receiving op), and the sender's next
// compute waits for the send.
TEST(PlanBuilder, BlockingSendsRendezvousWithTheReceiver) {
  ModelConfig m = testing::gpt3_175b();
  m.num_layers = 2;
  ParallelLayout l;
  l.pp = 2;
  l.gbs = 4;
  const Plan plan = build_plan(m, l);
  std::map<std::string, std::uint32_t> id;
  for (std::uint32_t t = 0; t < plan.tasks.size(); ++t) id[task_name(plan, plan.tasks[t])] = t;
  auto deps = [&](const std::string& name) {
    std::set<std::string> out;
    for (std::uint32_t d : plan.deps_of(id.at(name))) out.insert(task_name(plan, plan.tasks[d]));
    return out;
  };
  // Stage 1 posts the receive of micro-batch 1 after its backward of micro-batch 0.
  EXPECT_EQ(deps("stage0.mb1.chunk0.pp.send_fwd"),
            (std::set<std::string>{"stage0.mb1.layer0.mlp.fwd", "stage1.mb0.layer1.attn.bwd"}));
  // Stage 0's next compute (backward of micro-batch 0) waits for that send
  // and for stage 1's gradient.
  EXPECT_EQ(deps("stage0.mb0.layer0.mlp.bwd"),
            (std::set<std::string>{"stage0.mb1.layer0.mlp.fwd", "stage0.mb1.chunk0.pp.send_fwd",
                                   "stage1.mb0.chunk0.pp.send_bwd"}));
}

TEST(PlanBuilder, RejectsZeroBubbleWithVirtualStages) {
  EXPECT_THROW(build_plan(testing::gpt3_175b(), gpt3_layout(),
                          with_schedule(PipelineSchedule::kZeroBubbleH1)),
               std::invalid_argument);
}

}  // namespace
}  // namespace sextant::sim

namespace sextant::sim {
namespace {

// An uneven split: 94 layers, pp=8, vpp=3 is no even split, first/last stages
// of 10 leave 74 = 6·12 + 2 — not whole either; the explicit layout below
// gives rank 0 E+3t/4t/4t, rank 7 4t/4t/3t+L and the others 4t per chunk:
// 11 + 6·12 + 11 = 94. Every layer's forward runs once per micro-batch on the
// rank the split names, and the buckets hold what stage_params_per_gpu counts.
TEST(PlanBuilder, UnevenSplitPlacesEveryLayerOnce) {
  ModelConfig m = testing::gpt3_175b();
  m.num_layers = 94;
  ParallelLayout l = gpt3_layout();
  l.pp_layout = "Et*3|(t*4|)*22t*3L";
  const Plan plan = build_plan(m, l);
  const PipelineSplit& split = plan.shape.split;
  ASSERT_EQ(split.stage(0).num_layers, 11);
  ASSERT_EQ(split.stage(7).num_layers, 11);
  std::vector<int> forwards(94, 0);
  for (const Task& t : plan.tasks) {
    if (t.kind != TaskKind::kCompute || t.block != Block::kAttention || t.pass != Pass::kForward) {
      continue;
    }
    ++forwards[t.layer];
    const ChunkLayers& c = split.chunk(t.stage, t.chunk);
    EXPECT_GE(t.layer, c.first_layer);
    EXPECT_LT(t.layer, c.first_layer + c.num_layers);
  }
  for (int layer = 0; layer < 94; ++layer) EXPECT_EQ(forwards[layer], 96) << "layer " << layer;
  for (int stage : {0, 3, 7}) {
    double total = 0;
    for (const GradientBucket& b : plan.buckets) {
      if (b.stage == stage) total += b.dense_params + b.expert_params;
    }
    EXPECT_NEAR(total, stage_params_per_gpu(m, l, stage).total(), 1.0) << "stage " << stage;
  }
}

// ZeRO-3 on one stage: GPT-3 175B, tp=8, dp=8, 2 micro-batches. Each
// micro-batch gathers the embedding, 96 layers and the output layer forward and
// the output layer and 96 layers backward: 2 · (1 + 96 + 1 + 1 + 96) = 390
// gathers, and reduce-scatters 98 units per micro-batch: 196.
ParallelLayout zero3_layout(FsdpImplementation implementation) {
  ParallelLayout l;
  l.tp = 8;
  l.sp = true;
  l.dp = 8;
  l.mbs = 1;
  l.gbs = 16;
  l.zero = 3;
  l.overlap_grad_reduce = false;
  l.recompute = Recompute::kFull;
  l.fsdp = implementation;
  return l;
}

struct Zero3Shape {
  std::vector<std::uint32_t> gathers, reduces;
};
Zero3Shape zero3_tasks(const Plan& plan) {
  Zero3Shape out;
  for (std::uint32_t t = 0; t < plan.tasks.size(); ++t) {
    if (plan.tasks[t].kind == TaskKind::kParameterGather) out.gathers.push_back(t);
    if (plan.tasks[t].kind == TaskKind::kGradientReduce) out.reduces.push_back(t);
  }
  return out;
}

TEST(PlanBuilder, ZeroThreeGathersRunAheadByThePrefetchDepth) {
  const ModelConfig m = testing::gpt3_175b();
  // Megatron-FSDP: a layer holds 12h²/8 + norms ≈ 226M parameters per GPU, so
  // its 5e8-parameter prefetch covers ceil(5e8 / 2.26e8) = 3 units: gather k
  // waits for the compute before use k − 3 (none before use 0: gathers 0-3
  // wait for nothing).
  // FSDP2: one unit ahead. DeepSpeed 2021: none, each waits for the compute chain.
  for (const auto& [implementation, depth] :
       std::vector<std::pair<FsdpImplementation, std::size_t>>{
           {FsdpImplementation::kMegatronFsdp, 3}, {FsdpImplementation::kFsdp2, 1}}) {
    const Plan plan = build_plan(m, zero3_layout(implementation));
    const Zero3Shape s = zero3_tasks(plan);
    ASSERT_EQ(s.gathers.size(), 390u);
    EXPECT_EQ(s.reduces.size(), 196u);
    for (std::size_t k = 0; k < s.gathers.size(); ++k) {
      const auto deps = plan.deps_of(s.gathers[k]);
      if (k <= depth) {
        EXPECT_TRUE(deps.empty()) << "gather " << k;
        continue;
      }
      ASSERT_EQ(deps.size(), 1u) << "gather " << k;
      EXPECT_EQ(plan.tasks[deps[0]].kind, TaskKind::kCompute) << "gather " << k;
      // The compute it waits for comes before the gather `depth` back is used.
      EXPECT_LT(deps[0], s.gathers[k - depth]) << "gather " << k;
    }
  }
  const Plan deepspeed = build_plan(m, zero3_layout(FsdpImplementation::kDeepSpeedZero3));
  const Zero3Shape s = zero3_tasks(deepspeed);
  for (std::size_t k = 1; k < s.gathers.size(); ++k) {
    EXPECT_FALSE(deepspeed.deps_of(s.gathers[k]).empty()) << "gather " << k;
  }
}

TEST(PlanBuilder, ZeroThreeComputeWaitsWhenTooManyReductionsAreInFlight) {
  // FSDP2 keeps one reduce-scatter in flight: after issuing reduction j the
  // compute waits for reduction j − 1: every reduction but the last two is
  // waited for by a block's first task: its compute, or under sequence
  // parallelism the all-gather before it (the optimizer step waits for those two).
  const Plan plan = build_plan(testing::gpt3_175b(), zero3_layout(FsdpImplementation::kFsdp2));
  std::set<std::uint32_t> waited;
  for (std::uint32_t t = 0; t < plan.tasks.size(); ++t) {
    if (plan.tasks[t].kind != TaskKind::kCompute && plan.tasks[t].kind != TaskKind::kTensorParallelGather) continue;
    for (std::uint32_t d : plan.deps_of(t)) {
      if (plan.tasks[d].kind == TaskKind::kGradientReduce) waited.insert(d);
    }
  }
  EXPECT_EQ(waited.size(), zero3_tasks(plan).reduces.size() - 2);
}

// cp_comm_type: the ring runs beside the core (the core does not wait for
// it); the all-gather runs before it (the core waits), and is named so.
TEST(PlanBuilder, ContextParallelAllGatherPrecedesTheCore) {
  ModelConfig m = testing::gpt3_175b();
  m.num_layers = 2;
  for (const CpCommType type : {CpCommType::kP2p, CpCommType::kAllGather}) {
    ParallelLayout l;
    l.cp = 2;
    l.cp_comm_type = type;
    l.gbs = 1;
    const Plan plan = build_plan(m, l);
    std::map<std::string, std::uint32_t> by_name;
    for (std::uint32_t i = 0; i < plan.tasks.size(); ++i) by_name[task_name(plan, plan.tasks[i])] = i;
    const bool gather = type == CpCommType::kAllGather;
    const std::string core = "stage0.mb0.layer1.attn.core.fwd";
    const std::string exchange = core + (gather ? ".cp.all_gather" : ".cp.ring");
    ASSERT_TRUE(by_name.count(core)) << core;
    ASSERT_TRUE(by_name.count(exchange)) << exchange;
    const auto deps = plan.deps_of(by_name[core]);
    const bool waits = std::find(deps.begin(), deps.end(), by_name[exchange]) != deps.end();
    EXPECT_EQ(waits, gather) << to_string(type);
    if (gather) EXPECT_TRUE(by_name.count("stage0.mb0.layer1.attn.core.bwd.cp.all_gather+reduce_scatter"));
  }
}

}  // namespace
}  // namespace sextant::sim
