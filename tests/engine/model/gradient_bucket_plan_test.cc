// Gradient buckets over the flat buffers: they tile the buffer at tensor
// boundaries, and each is reduced after the last backward task that writes
// any of its tensors, found in the Plan's task list of a small GPT.
#include "engine/model/gradient_bucket_plan.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "engine/model/transformer_shape.h"
#include "sim/core/preset_catalog.h"
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

// The index of the bucket holding tensor `name`'s first element.
std::size_t bucket_of(const ParameterLayout& layout, const std::vector<GradientBucketRange>& buckets,
                      const std::string& name) {
  const std::size_t at = layout.find(name).offset;
  for (std::size_t b = 0; b < buckets.size(); ++b)
    if (at >= buckets[b].begin && at < buckets[b].begin + buckets[b].elements) return b;
  ADD_FAILURE() << name << " in no bucket";
  return 0;
}

// Buckets tile [0, end) in order.
void expect_tiling(const std::vector<GradientBucketRange>& buckets, std::size_t end) {
  std::size_t next = 0;
  for (std::size_t b = 0; b < buckets.size(); ++b) {
    EXPECT_EQ(buckets[b].begin, next) << "bucket " << b;
    EXPECT_GT(buckets[b].elements, 0u) << "bucket " << b;
    next = buckets[b].begin + buckets[b].elements;
  }
  EXPECT_EQ(next, end);
}

TEST(GradientBucketPlan, EachUnitIsABucketWhenEveryUnitFillsOne) {
  // Untied: the embeddings (wte, wpe), layer 0, layer 1, the output (final
  // norm and lm_head), each a contiguous range, in buffer order.
  const SmallStep s(/*tie=*/false);
  const auto buckets = plan_gradient_buckets(s.layout, s.tasks, 1);
  ASSERT_EQ(buckets.size(), 4u);
  expect_tiling(buckets, s.layout.total_elements());
  const ParameterLayout& l = s.layout;
  EXPECT_EQ(bucket_of(l, buckets, "wte"), 0u);
  EXPECT_EQ(bucket_of(l, buckets, "wpe"), 0u);
  for (const char* name : {"norm1_gamma", "qkv_bias", "proj_weight", "fc2_bias", "fc2_weight"}) {
    EXPECT_EQ(bucket_of(l, buckets, std::string("layers.0.") + name), 1u) << name;
    EXPECT_EQ(bucket_of(l, buckets, std::string("layers.1.") + name), 2u) << name;
  }
  EXPECT_EQ(bucket_of(l, buckets, "final_norm_gamma"), 3u);
  EXPECT_EQ(bucket_of(l, buckets, "lm_head"), 3u);
  // Each is reduced after its unit's last backward: the output's, a layer's
  // attention backward (its first block: fc2_bias and proj_bias are written
  // before it), the embedding's (the last task before the optimizer).
  EXPECT_EQ(buckets[3].ready_after, s.last_backward(sim::Block::kOutput));
  EXPECT_EQ(buckets[2].ready_after, s.last_backward(sim::Block::kAttention, 1));
  EXPECT_EQ(buckets[1].ready_after, s.last_backward(sim::Block::kAttention, 0));
  EXPECT_EQ(buckets[0].ready_after, s.last_backward(sim::Block::kEmbedding));
  EXPECT_EQ(buckets[0].ready_after + 2, s.tasks.size());
  // Backward runs the layers last to first: the higher buckets are ready first.
  EXPECT_LT(buckets[3].ready_after, buckets[2].ready_after);
  EXPECT_LT(buckets[2].ready_after, buckets[1].ready_after);
}

TEST(GradientBucketPlan, BucketsFillFromTheOutputDownAndNeverSplitALayer) {
  // Tied: the output unit is the final norm (64); each layer 4·64·64 +
  // 2·64·256 matrices + vectors, about 49.7k elements; the embeddings 6144 + 2560.
  const SmallStep s(/*tie=*/true);
  const ParameterLayout& l = s.layout;
  const std::size_t layer0 = l.tensor(l.layer(0).norm1_gamma).offset;
  const std::size_t layer1 = l.tensor(l.layer(1).norm1_gamma).offset;
  const std::size_t output = l.tensor(l.final_norm_gamma()).offset;
  // 20000: the output and layer 1 close one bucket (the output alone is too
  // small), layer 0 another, and the embeddings, with nothing open, their own.
  auto buckets = plan_gradient_buckets(l, s.tasks, 20000);
  ASSERT_EQ(buckets.size(), 3u);
  expect_tiling(buckets, l.total_elements());
  EXPECT_EQ(buckets[1].begin, layer0);
  EXPECT_EQ(buckets[2].begin, layer1);
  EXPECT_GT(output, layer1);
  // 60000: the output and layer 1 (about 50k) stay open, take layer 0 and close;
  // the embeddings make the last bucket.
  buckets = plan_gradient_buckets(l, s.tasks, 60000);
  ASSERT_EQ(buckets.size(), 2u);
  EXPECT_EQ(buckets[1].begin, layer0);
  // 200000: nothing closes: one bucket, reduced after the last backward of all.
  buckets = plan_gradient_buckets(l, s.tasks, 200000);
  ASSERT_EQ(buckets.size(), 1u);
  EXPECT_EQ(buckets[0].elements, l.total_elements());
  EXPECT_EQ(buckets[0].ready_after, s.last_backward(sim::Block::kEmbedding));
}

TEST(GradientBucketPlan, BucketsOfAMultipleEndRoundedUpIntoTheNextLayer) {
  // 8·dp = 384 for dp 48: a layer's first offset is a multiple of 64 only, so
  // a bucket's end moves up into the next unit's first tensor; the last ends
  // at total_elements() rounded up to 384.
  const SmallStep s(/*tie=*/false);
  const std::size_t multiple = 384;
  const auto buckets = plan_gradient_buckets(s.layout, s.tasks, 1, multiple);
  ASSERT_EQ(buckets.size(), 4u);
  expect_tiling(buckets, (s.layout.total_elements() + multiple - 1) / multiple * multiple);
  const ParameterLayout& l = s.layout;
  const std::size_t unit_begin[] = {l.tensor(l.layer(0).norm1_gamma).offset, l.tensor(l.layer(1).norm1_gamma).offset,
                                    l.tensor(l.final_norm_gamma()).offset};
  for (std::size_t b = 0; b < 3; ++b) {
    const std::size_t end = buckets[b].begin + buckets[b].elements;
    EXPECT_EQ(end % multiple, 0u) << "bucket " << b;
    EXPECT_GE(end, unit_begin[b]) << "bucket " << b;
    EXPECT_LT(end, unit_begin[b] + multiple) << "bucket " << b;
  }
  // Rounding up gives a bucket a head of the next unit, reduced earlier: the ready times stand.
  const auto plain = plan_gradient_buckets(l, s.tasks, 1);
  for (std::size_t b = 0; b < 4; ++b) EXPECT_EQ(buckets[b].ready_after, plain[b].ready_after) << "bucket " << b;
}

// A pipeline stage's buckets (the trainer's, and the checkpoints that
// describe its ZeRO-1 shards): the first stage's first chunk cut by size as
// the whole model is, every other chunk one bucket; rounded as a whole.
TEST(StageGradientBucketRanges, FirstStagesFirstChunkByLayerOtherChunksWhole) {
  const SmallStep s(/*tie=*/false);
  TransformerShape shape = transformer_shape_of(s.model, 1, 40);
  shape.num_layers = 2;
  const ParameterLayout first(shape, StageParts{0, true, false});    // E + layers 0-1
  const ParameterLayout second(shape, StageParts{2, false, false});  // layers 2-3
  const std::vector<ParameterLayout> chunks = {first, second};
  const std::size_t total = first.total_elements() + second.total_elements();
  // Stage 0: layer 1, layer 0, the embeddings (each over 1 element), then chunk 1 whole.
  auto ranges = stage_gradient_bucket_ranges(chunks, true, 1, 1);
  ASSERT_EQ(ranges.size(), 4u);
  EXPECT_EQ(ranges[0], (ElementRange{0, first.tensor(first.layer(0).norm1_gamma).offset}));
  EXPECT_EQ(ranges[1].first, first.tensor(first.layer(0).norm1_gamma).offset);
  EXPECT_EQ(ranges[2].first, first.tensor(first.layer(1).norm1_gamma).offset);
  EXPECT_EQ(ranges[3], (ElementRange{first.total_elements(), total}));
  // Another stage: each chunk one bucket, whatever the size.
  ranges = stage_gradient_bucket_ranges(chunks, false, 1, 1);
  EXPECT_EQ(ranges, (std::vector<ElementRange>{{0, first.total_elements()}, {first.total_elements(), total}}));
  // Rounded to 8·dp = 48: ends move up, the last to the total rounded up.
  ranges = stage_gradient_bucket_ranges(chunks, false, 1, 48);
  ASSERT_EQ(ranges.size(), 2u);
  EXPECT_EQ(ranges[0].second % 48, 0u);
  EXPECT_GE(ranges[0].second, first.total_elements());
  EXPECT_EQ(ranges[1].second, (total + 47) / 48 * 48);
}

// The Plan's buckets (sim/plan/gradient_buckets.h) and the engine's are the
// same layers: GPT-1.3B's shape, 24 layers of ~50M parameters, buckets of
// 120M (three layers; the untied output layer's 105M with the last layer).
TEST(GradientBucketPlan, HoldTheLayersOfThePlansBuckets) {
  sim::ModelConfig m = sim::PresetCatalog(SEXTANT_TEST_CONFIG_DIR).model("gpt-1.3b");
  ASSERT_EQ(m.num_layers, 24);
  ASSERT_EQ(m.seq_length, 2048);
  m.tie_embeddings = false;  // an output layer of its own: the Plan's first bucket
  sim::ParallelLayout l;
  l.dp = 8;
  l.mbs = 1;
  l.gbs = 8;
  l.overlap_grad_reduce = true;
  sim::PlanOptions options;
  options.bucket_params = 120e6;
  const sim::Plan plan = sim::build_plan(m, l, options);
  sim::ParallelLayout one = l;
  one.dp = 1;
  one.gbs = 1;
  one.overlap_grad_reduce = false;
  const sim::Plan single = sim::build_plan(m, one);
  const std::vector<sim::Task> tasks(single.tasks.begin() + single.stage_begin[0],
                                     single.tasks.begin() + single.stage_begin[1]);
  const ParameterLayout layout(transformer_shape_of(m, 1, 2048));
  const auto buckets = plan_gradient_buckets(layout, tasks, 120'000'000);
  ASSERT_EQ(buckets.size(), plan.buckets.size());
  // The Plan's are in reduction order (the output's first); the engine's in buffer order.
  for (std::size_t k = 0; k < buckets.size(); ++k) {
    const sim::GradientBucket& want = plan.buckets[plan.buckets.size() - 1 - k];
    const GradientBucketRange& got = buckets[k];
    for (int layer = 0; layer < m.num_layers; ++layer) {
      const std::size_t at = layout.tensor(layout.layer(layer).qkv_weight).offset;
      const bool inside = at >= got.begin && at < got.begin + got.elements;
      EXPECT_EQ(inside, layer >= want.first_layer && layer <= want.last_layer) << "bucket " << k << ", layer " << layer;
    }
    const std::size_t wte = layout.tensor(layout.wte()).offset, lm_head = layout.tensor(layout.lm_head()).offset;
    EXPECT_EQ(wte >= got.begin && wte < got.begin + got.elements, want.embedding) << "bucket " << k;
    EXPECT_EQ(lm_head >= got.begin && lm_head < got.begin + got.elements, want.output_layer) << "bucket " << k;
  }
}

// Under tensor parallelism the collective task after a block's backward runs
// the block's norm backward (transformer.h): a layer's bucket is ready after it.
TEST(GradientBucketPlan, UnderTensorParallelismALayerIsReadyAfterItsBlocksCollective) {
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
  s.layout = ParameterLayout(transformer_shape_of(s.model, l));
  const auto buckets = plan_gradient_buckets(s.layout, s.tasks, 1);
  auto ready = [&](const std::string& name) { return buckets[bucket_of(s.layout, buckets, name)].ready_after; };
  const std::size_t attention1 = s.last_backward(sim::Block::kAttention, 1);
  ASSERT_EQ(s.tasks[attention1 + 1].kind, sim::TaskKind::kTensorParallelScatter);
  EXPECT_EQ(ready("layers.1.norm1_gamma"), attention1 + 1);
  EXPECT_EQ(ready("layers.1.qkv_weight"), attention1 + 1);
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
  // A bucket per unit: the embeddings, layer 0, layer 1, the final norm.
  const auto units = plan_gradient_buckets(s.layout, s.tasks, 1);
  ASSERT_EQ(units.size(), 4u);
  const auto reads = first_parameter_reads(s.layout, s.tasks, units);
  std::vector<std::size_t> at(units.size(), s.tasks.size());
  for (std::size_t k = 0; k < reads.size(); ++k)
    for (const int b : reads[k]) {
      EXPECT_EQ(at[static_cast<std::size_t>(b)], s.tasks.size()) << "bucket " << b << " twice";
      at[static_cast<std::size_t>(b)] = k;
    }
  EXPECT_EQ(at[bucket_of(s.layout, units, "wte")], first_forward(sim::Block::kEmbedding, sim::kNoIndex));
  EXPECT_EQ(at[bucket_of(s.layout, units, "layers.0.fc2_weight")], first_forward(sim::Block::kAttention, 0));
  EXPECT_EQ(at[bucket_of(s.layout, units, "layers.1.norm1_gamma")], first_forward(sim::Block::kAttention, 1));
  EXPECT_EQ(at[bucket_of(s.layout, units, "final_norm_gamma")], first_forward(sim::Block::kOutput, sim::kNoIndex));

  // Rounded to a multiple, layer 0's bucket holds the head of layer 1's first
  // tensor: it is read first by layer 0, and layer 1's bucket still by layer 1.
  const auto rounded = plan_gradient_buckets(s.layout, s.tasks, 1, 384);
  const auto rounded_reads = first_parameter_reads(s.layout, s.tasks, rounded);
  EXPECT_EQ(rounded_reads[first_forward(sim::Block::kAttention, 1)], std::vector<int>{2});

  // One bucket of everything: waited for at the first task (the embedding's forward).
  const auto all = plan_gradient_buckets(s.layout, s.tasks, 1u << 30);
  ASSERT_EQ(all.size(), 1u);
  const auto whole = first_parameter_reads(s.layout, s.tasks, all);
  EXPECT_EQ(whole[first_forward(sim::Block::kEmbedding, sim::kNoIndex)], std::vector<int>{0});

  // Without forward tasks nothing reads the weights: refused.
  std::vector<sim::Task> backward_only;
  for (const sim::Task& t : s.tasks)
    if (t.pass == sim::Pass::kBackward) backward_only.push_back(t);
  EXPECT_THROW(first_parameter_reads(s.layout, backward_only, units), std::logic_error);
}


// ZeRO-1 beside expert parallelism shards the expert weights' buckets over the
// expert-dp group and the rest over dp, each in 8-element blocks per rank: so
// after the stage's buckets are cut where the tensors change kind, every piece
// must still be a multiple of 8·dp. The shape of such a layout aligns each
// kind's run to it (TransformerShape::expert_run_align_elements); dp 6 (8·6 =
// 48, not a divisor of the 64-element tensor alignment), ep 2, a first dense
// layer, two pipeline chunks and buckets of about one layer.
TEST(SplitAtExpertTensors, EveryPieceIsAMultipleOf8DpWhenTheShapeAlignsTheRuns) {
  sim::ModelConfig m;
  m.name = "tiny-moe";
  m.num_layers = 4;
  m.hidden_size = 72;
  m.ffn_hidden_size = 200;
  m.num_attention_heads = 1;
  m.num_query_groups = 1;
  m.kv_channels = 72;
  m.vocab_size = 97;
  m.seq_length = 40;
  m.add_bias_linear = false;
  m.moe = sim::MoeConfig{};
  m.moe->num_experts = 4;
  m.moe->router_topk = 2;
  m.moe->ffn_hidden_size = 40;
  m.moe->first_dense_layers = 1;
  sim::ParallelLayout l;
  l.dp = 6;
  l.ep = 2;
  l.zero = 1;
  l.mbs = 1;
  l.gbs = 6;
  TransformerShape shape = transformer_shape_of(m, l);
  ASSERT_EQ(shape.expert_run_align_elements, 48u);
  shape.num_layers = 2;
  const std::vector<ParameterLayout> chunks = {ParameterLayout(shape, StageParts{0, true, false}),
                                               ParameterLayout(shape, StageParts{2, false, true})};
  for (const ParameterLayout& c : chunks) EXPECT_EQ(c.total_elements() % 192, 0u) << "lcm(64, 48)";
  const ExpertSplitRanges split =
      split_at_expert_tensors(stage_gradient_bucket_ranges(chunks, true, 20'000, 48), chunks);
  int experts = 0;
  for (std::size_t i = 0; i < split.ranges.size(); ++i) {
    const auto& [begin, end] = split.ranges[i];
    EXPECT_EQ(begin % 48, 0u) << "piece " << i;
    EXPECT_EQ(end % 48, 0u) << "piece " << i;
    experts += split.expert[i] ? 1 : 0;
  }
  EXPECT_EQ(experts, 3) << "layers 1, 2 and 3 hold experts";
  // Without ZeRO-1 the layout keeps its 64-element alignment only: a run of
  // another kind starts where the last tensor's padding ends.
  l.zero = 0;
  const TransformerShape plain = transformer_shape_of(m, l);
  EXPECT_EQ(plain.expert_run_align_elements, 0u);
  const ParameterLayout whole(plain);
  const ParameterTensor& router = whole.find("layers.1.router_weight");
  const ParameterTensor& fc1 = whole.find("layers.1.expert_fc1_weight");
  EXPECT_EQ(fc1.offset, (router.offset + router.elements() + 63) / 64 * 64);
}

}  // namespace
}  // namespace sextant::engine
