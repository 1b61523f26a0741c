// Gradient buckets over the flat buffers: they tile the buffer at tensor
// boundaries, and each is reduced after the last backward task that writes
// any of its tensors, found in the Plan's task list of a small GPT.
#include "engine/model/gradient_bucket_plan.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "engine/model/transformer_shape.h"
#include "sim/plan/plan_builder.h"

namespace sextant::engine {
namespace {

// Two GPT layers of hidden 64, 3 micro-batches on one rank.
struct SmallStep {
  sim::ModelConfig model;
  ParameterLayout layout{TransformerShape{}};
  std::vector<sim::Task> tasks;

  explicit SmallStep(bool tie) {
    model.name = "tiny-gpt";
    model.num_layers = 2;
    model.hidden_size = 64;
    model.ffn_hidden_size = 256;
    model.num_attention_heads = 1;
    model.num_query_groups = 1;
    model.kv_channels = 64;
    model.vocab_size = 96;
    model.seq_length = 40;
    model.tie_embeddings = tie;
    layout = ParameterLayout(transformer_shape_of(model, 1, 40));
    sim::ParallelLayout l;
    l.mbs = 1;
    l.gbs = 3;
    l.overlap_grad_reduce = false;
    const sim::Plan plan = sim::build_plan(model, l);
    tasks.assign(plan.tasks.begin() + plan.stage_begin[0], plan.tasks.begin() + plan.stage_begin[1]);
  }

  // The index of micro-batch 2's backward compute task of `block` (and `layer`).
  std::size_t last_backward(sim::Block block, int layer = sim::kNoIndex) const {
    for (std::size_t k = 0; k < tasks.size(); ++k) {
      const sim::Task& t = tasks[k];
      if (t.kind == sim::TaskKind::kCompute && t.pass == sim::Pass::kBackward && t.block == block &&
          t.microbatch == 2 &&
          (layer == sim::kNoIndex || t.layer == layer))
        return k;
    }
    ADD_FAILURE() << "no such task";
    return 0;
  }
};

TEST(GradientBucketPlan, OneTensorPerBucketNamesEachTensorsLastBackward) {
  const SmallStep s(/*tie=*/false);
  const auto buckets = plan_gradient_buckets(s.layout, s.tasks, 1);
  const auto& tensors = s.layout.tensors();
  ASSERT_EQ(buckets.size(), tensors.size());
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    EXPECT_EQ(buckets[i].begin, tensors[i].offset) << tensors[i].name;
    // Tensors are 64-element aligned: a bucket is its tensor and the padding up to the next.
    EXPECT_EQ(buckets[i].elements, (tensors[i].elements() + 63) / 64 * 64) << tensors[i].name;
  }
  auto ready = [&](const std::string& name) {
    for (std::size_t i = 0; i < tensors.size(); ++i)
      if (tensors[i].name == name) return buckets[i].ready_after;
    ADD_FAILURE() << name;
    return std::size_t{0};
  };
  EXPECT_EQ(ready("wte"), s.last_backward(sim::Block::kEmbedding));
  EXPECT_EQ(ready("wpe"), s.last_backward(sim::Block::kEmbedding));
  EXPECT_EQ(ready("lm_head"), s.last_backward(sim::Block::kOutput));
  EXPECT_EQ(ready("final_norm_beta"), s.last_backward(sim::Block::kOutput));
  // fc2_bias of layer 1 is summed in the output block's backward and proj_bias in
  // layer 1's MLP backward; both come before layer 1's attention backward.
  EXPECT_EQ(ready("layers.1.fc2_bias"), s.last_backward(sim::Block::kAttention, 1));
  EXPECT_EQ(ready("layers.1.proj_weight"), s.last_backward(sim::Block::kAttention, 1));
  EXPECT_EQ(ready("layers.0.qkv_weight"), s.last_backward(sim::Block::kAttention, 0));
  // Backward runs the layers last to first, so layer 1's tensors are ready first.
  EXPECT_LT(ready("layers.1.fc1_weight"), ready("layers.0.fc1_weight"));
  EXPECT_LT(ready("layers.0.fc1_weight"), ready("wte"));
}

TEST(GradientBucketPlan, BucketsTileTheBufferAtTensorBoundaries) {
  const SmallStep s(/*tie=*/true);
  // wte is 96·64 = 6144 elements, each layer's matrices 4·64·64 + 2·64·256 = 49152:
  // 20000-element buckets hold wte+wpe (6144 + 2560 < 20000, so also layer 0's
  // qkv of 12288: 20992), then grow tensor by tensor.
  const std::size_t target = 20000;
  const auto buckets = plan_gradient_buckets(s.layout, s.tasks, target);
  ASSERT_GE(buckets.size(), 3u);
  std::size_t next = 0;
  for (std::size_t b = 0; b < buckets.size(); ++b) {
    EXPECT_EQ(buckets[b].begin, next) << "bucket " << b;
    EXPECT_EQ(buckets[b].begin % ParameterLayout::kAlignElements, 0u);
    if (b + 1 < buckets.size()) {
      EXPECT_GE(buckets[b].elements, target) << "bucket " << b;
    }
    next = buckets[b].begin + buckets[b].elements;
  }
  EXPECT_EQ(next, s.layout.total_elements());
  EXPECT_EQ(buckets[0].elements, 6144u + 2560u + 12288u);
  // The first bucket holds the embeddings: ready after the last embedding backward,
  // the last task before the optimizer.
  EXPECT_EQ(buckets[0].ready_after, s.last_backward(sim::Block::kEmbedding));
  EXPECT_EQ(buckets[0].ready_after + 2, s.tasks.size());
  // One bucket for everything: ready after the last backward of all.
  const auto one = plan_gradient_buckets(s.layout, s.tasks, s.layout.total_elements() + 1);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].elements, s.layout.total_elements());
  EXPECT_EQ(one[0].ready_after, s.last_backward(sim::Block::kEmbedding));
}

TEST(GradientBucketPlan, BucketsOfAMultipleCloseOnlyWhereItDivides) {
  // 8·dp = 128 for dp 16 (a distributed optimizer): tensor offsets are multiples
  // of 64 only, so some tensor ends cannot close a bucket; the last bucket ends
  // at total_elements() rounded up to 128.
  const SmallStep s(/*tie=*/false);
  const std::size_t multiple = 128;
  const auto buckets = plan_gradient_buckets(s.layout, s.tasks, 1, multiple);
  std::size_t next = 0;
  for (const GradientBucketRange& b : buckets) {
    EXPECT_EQ(b.begin, next);
    EXPECT_EQ(b.elements % multiple, 0u) << "bucket at " << b.begin;
    next = b.begin + b.elements;
  }
  EXPECT_EQ(next, (s.layout.total_elements() + 127) / 128 * 128);
  EXPECT_GE(next, s.layout.total_elements());
  // wte (96·64 = 6144 = 48·128) closes alone; wpe (40·64 = 2560 = 20·128) too.
  EXPECT_EQ(buckets[0].elements, 6144u);
  EXPECT_EQ(buckets[1].elements, 2560u);
}

// Under tensor parallelism the collective task after a block's backward runs
// its norm's backward (transformer.h), so a layer's norm gains, and the bias
// its norm sums, are final only after that task: with sp, after the block's
// reduce-scatter, the task after the block's compute.
TEST(GradientBucketPlan, UnderTensorParallelismNormsAreReadyAfterTheBlocksCollective) {
  SmallStep s(/*tie=*/false);
  s.model.num_attention_heads = s.model.num_query_groups = 2;  // one head per rank
  sim::ParallelLayout l;
  l.tp = 2;
  l.sp = true;
  l.mbs = 1;
  l.gbs = 3;
  l.overlap_grad_reduce = false;
  const sim::Plan plan = sim::build_plan(s.model, l);
  s.tasks.assign(plan.tasks.begin() + plan.stage_begin[0], plan.tasks.begin() + plan.stage_begin[1]);
  TransformerShape shape = transformer_shape_of(s.model, l);
  s.layout = ParameterLayout(shape);
  const auto buckets = plan_gradient_buckets(s.layout, s.tasks, 1);
  const auto& tensors = s.layout.tensors();
  auto ready = [&](const std::string& name) {
    for (std::size_t i = 0; i < tensors.size(); ++i)
      if (tensors[i].name == name) return buckets[i].ready_after;
    ADD_FAILURE() << name;
    return std::size_t{0};
  };
  const std::size_t attention1 = s.last_backward(sim::Block::kAttention, 1);
  ASSERT_EQ(s.tasks[attention1 + 1].kind, sim::TaskKind::kTensorParallelScatter);
  EXPECT_EQ(ready("layers.1.norm1_gamma"), attention1 + 1);
  EXPECT_EQ(ready("layers.1.qkv_weight"), attention1 + 1);  // the block's tensors are one unit
  EXPECT_EQ(ready("layers.0.fc2_bias"), s.last_backward(sim::Block::kAttention, 0) + 1);
  EXPECT_EQ(ready("final_norm_gamma"), s.last_backward(sim::Block::kOutput));  // no task after the output
}

TEST(GradientBucketPlan, TasksWithoutTheLastBackwardAreRefused) {
  const SmallStep s(/*tie=*/true);
  std::vector<sim::Task> forward_only;
  for (const sim::Task& t : s.tasks)
    if (t.pass != sim::Pass::kBackward) forward_only.push_back(t);
  EXPECT_THROW(plan_gradient_buckets(s.layout, forward_only, 1000), std::logic_error);
}

// --overlap-param-gather: each bucket is waited for before the first forward
// task that reads any of its tensors, and every bucket once.
TEST(FirstParameterReads, EachBucketBeforeItsFirstForwardReader) {
  const SmallStep s(/*tie=*/true);
  auto first_forward = [&](sim::Block block, int layer) {
    for (std::size_t k = 0; k < s.tasks.size(); ++k) {
      const sim::Task& t = s.tasks[k];
      if (t.pass == sim::Pass::kForward && t.block == block && (layer == sim::kNoIndex || t.layer == layer)) return k;
    }
    ADD_FAILURE() << "no such task";
    return std::size_t{0};
  };
  // One tensor per bucket: wte (tied) and wpe at the embedding, a layer's at its attention.
  const auto one = plan_gradient_buckets(s.layout, s.tasks, 1);
  const auto reads = first_parameter_reads(s.layout, s.tasks, one);
  std::vector<int> seen(one.size(), 0);
  std::map<std::string, std::size_t> at;
  for (std::size_t k = 0; k < reads.size(); ++k)
    for (const int b : reads[k]) {
      ++seen[static_cast<std::size_t>(b)];
      at[s.layout.tensors()[static_cast<std::size_t>(b)].name] = k;
    }
  for (std::size_t b = 0; b < one.size(); ++b) EXPECT_EQ(seen[b], 1) << s.layout.tensors()[b].name;
  EXPECT_EQ(at.at("wte"), first_forward(sim::Block::kEmbedding, sim::kNoIndex));
  EXPECT_EQ(at.at("wpe"), first_forward(sim::Block::kEmbedding, sim::kNoIndex));
  EXPECT_EQ(at.at("layers.1.fc2_weight"), first_forward(sim::Block::kAttention, 1));  // the layer's first task
  EXPECT_EQ(at.at("final_norm_gamma"), first_forward(sim::Block::kOutput, sim::kNoIndex));
  EXPECT_LT(first_forward(sim::Block::kAttention, 1), first_forward(sim::Block::kOutput, sim::kNoIndex));

  // One bucket of everything: waited for at the first task (the embedding's forward).
  const auto all = plan_gradient_buckets(s.layout, s.tasks, 1u << 30);
  ASSERT_EQ(all.size(), 1u);
  const auto whole = first_parameter_reads(s.layout, s.tasks, all);
  EXPECT_EQ(whole[first_forward(sim::Block::kEmbedding, sim::kNoIndex)], std::vector<int>{0});

  // Without forward tasks nothing reads the weights: refused.
  std::vector<sim::Task> backward_only;
  for (const sim::Task& t : s.tasks)
    if (t.pass == sim::Pass::kBackward) backward_only.push_back(t);
  EXPECT_THROW(first_parameter_reads(s.layout, backward_only, one), std::logic_error);
}

}  // namespace
}  // namespace sextant::engine
