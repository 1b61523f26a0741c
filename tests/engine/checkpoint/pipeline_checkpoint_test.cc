// Checkpoints of pipeline-parallel runs, on the CPU: which tensors each stage
// holds (pipeline_stage_sharding, against the model's split and the stage's
// ParameterLayouts), the version-3 metadata through JSON, and whole
// checkpoints moved between pp/vpp/split/tp/dp layouts through real files,
// every element checked.
//
// The end-to-end cases build each saved rank's arrays from the element's
// identity (identity_states.h), keyed by the whole model's tensor index (a
// stage's own tensor order differs; i < 60 and e < 4096 here). The tied copy of wte on the last
// stage holds the same numbers as the first stage's (as training keeps them:
// reshard_plan.h). Padding holds 7777 in the saved arrays and must be 0 after
// a reshard.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "engine/checkpoint/checkpoint_directory.h"
#include "engine/checkpoint/checkpoint_metadata.h"
#include "engine/checkpoint/checkpoint_of_run.h"
#include "engine/checkpoint/checkpoint_sharding.h"
#include "engine/checkpoint/reshard_plan.h"
#include "engine/model/parameter_layout.h"
#include "engine/model/transformer_shape.h"
#include "sim/core/config_error.h"
#include "tests/engine/checkpoint/identity_states.h"

namespace sextant::engine::checkpoint {
namespace {

namespace fs = std::filesystem;

// A GPT of 4 layers, hidden 16, tied embeddings; vocabulary 256, which tp = 1
// and tp = 2 pad alike (a multiple of 128·2).
sim::ModelConfig tiny_gpt() {
  sim::ModelConfig m;
  m.name = "pp-ckpt-gpt";
  m.num_layers = 4;
  m.hidden_size = 16;
  m.ffn_hidden_size = 64;
  m.num_attention_heads = 2;
  m.num_query_groups = 2;
  m.kv_channels = 8;
  m.vocab_size = 256;
  m.seq_length = 8;
  m.tie_embeddings = true;
  m.hidden_dropout = 0;
  m.attention_dropout = 0;
  return m;
}

struct Layout {
  int tp = 1, dp = 1, zero = 0, pp = 1, vpp = 1;
  int first_stage_layers = 0;  // 0: the even split
  int cp = 1;                  // context-parallel ranks: the same arrays as cp rank 0's
  int ranks() const { return tp * cp * dp * pp; }
  sim::ParallelLayout parallel() const {
    sim::ParallelLayout l;
    l.tp = tp;
    l.dp = dp;
    l.zero = zero;
    l.pp = pp;
    l.vpp = vpp;
    if (vpp > 1) l.schedule = sim::Schedule::kInterleaved;
    if (first_stage_layers > 0) l.first_stage_layers = first_stage_layers;
    l.mbs = 1;
    l.gbs = 8;
    return l;
  }
  CheckpointLayout checkpoint() const {
    CheckpointLayout c{tp, dp, zero, pp, vpp};
    c.cp = cp;
    return c;
  }
};

// The sharding of each stage's ranks: the pipeline's, or (pp = 1) the whole
// model's, with two ZeRO buckets that do not end at tensor boundaries.
std::vector<CheckpointSharding> shardings_for(const Layout& l) {
  const sim::ModelConfig model = tiny_gpt();
  if (l.pp > 1) return pipeline_sharding(model, l.parallel());
  return {testing::sharding_with_buckets(ParameterLayout(transformer_shape_of(model, l.parallel())), l.tp, l.dp,
                                         l.zero != 0)};
}

// The whole model's tensor index by name (tp = 1, pp = 1).
std::map<std::string, std::size_t> whole_index() {
  std::map<std::string, std::size_t> index;
  const ParameterLayout whole(transformer_shape_of(tiny_gpt(), 1, 8));
  for (std::size_t i = 0; i < whole.tensors().size(); ++i) index[whole.tensors()[i].name] = i;
  return index;
}

// Every rank's state of a layout, each tensor identified by its index in the whole model.
std::vector<TrainerState> states_for(const Layout& l, const std::vector<CheckpointSharding>& stages, float pad,
                                     std::int64_t step) {
  const std::map<std::string, std::size_t> index = whole_index();
  return testing::identity_states(
      l.tp, l.dp, stages, [&](const TensorSharding& t) { return index.at(t.name); }, pad, step, l.cp);
}

std::vector<std::string> names_of(const CheckpointSharding& s) {
  std::vector<std::string> names;
  for (const TensorSharding& t : s.tensors) names.push_back(t.name);
  return names;
}

TEST(PipelineStageSharding, EachStageHoldsItsSplitsLayersInChunkOrder) {
  const sim::ModelConfig model = tiny_gpt();
  // pp = 2, even: stage 0 layers 0-1 and the embedding, stage 1 layers 2-3,
  // the loss and the tied copy of wte.
  std::vector<CheckpointSharding> s = pipeline_sharding(model, Layout{1, 1, 0, 2}.parallel());
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].chunks, (std::vector<ChunkParts>{{0, 2, true, false}}));
  EXPECT_EQ(s[1].chunks, (std::vector<ChunkParts>{{2, 2, false, true}}));
  // The offsets are those of the stage's ParameterLayout, which the trainer binds.
  TransformerShape shape = transformer_shape_of(model, Layout{1, 1, 0, 2}.parallel());
  shape.num_layers = 2;
  const ParameterLayout last(shape, StageParts{2, false, true});
  ASSERT_EQ(s[1].tensors.size(), last.tensors().size());
  for (std::size_t i = 0; i < last.tensors().size(); ++i) {
    EXPECT_EQ(s[1].tensors[i].name, last.tensors()[i].name);
    EXPECT_EQ(s[1].tensors[i].offset, last.tensors()[i].offset);
  }
  EXPECT_EQ(s[1].flat_elements, last.total_elements());
  EXPECT_EQ(s[1].tensors.front().name, "wte");  // the tied copy, named as the whole model's
  EXPECT_EQ(s[1].tensors[1].name, "layers.2.norm1_gamma");  // a layer's vectors first

  // vpp = 2: virtual stages in order rank 0 chunk 0 (E + layer 0), rank 1 chunk 0
  // (layer 1), rank 0 chunk 1 (layer 2), rank 1 chunk 1 (layer 3 + L); a chunk's
  // tensors follow the previous chunk's, at its total_elements.
  s = pipeline_sharding(model, Layout{1, 1, 0, 2, 2}.parallel());
  EXPECT_EQ(s[0].chunks, (std::vector<ChunkParts>{{0, 1, true, false}, {2, 1, false, false}}));
  EXPECT_EQ(s[1].chunks, (std::vector<ChunkParts>{{1, 1, false, false}, {3, 1, false, true}}));
  shape.num_layers = 1;
  const ParameterLayout chunk0(shape, StageParts{0, true, false});
  const ParameterLayout chunk1(shape, StageParts{2, false, false});
  EXPECT_EQ(s[0].flat_elements, chunk0.total_elements() + chunk1.total_elements());
  EXPECT_EQ(s[0].tensors[chunk0.tensors().size()].name, "layers.2.norm1_gamma");
  EXPECT_EQ(s[0].tensors[chunk0.tensors().size()].offset, chunk0.total_elements());

  // first_stage_layers=1: stage 0 holds layer 0, stage 1 layers 1-3.
  s = pipeline_sharding(model, Layout{1, 1, 0, 2, 1, 1}.parallel());
  EXPECT_EQ(s[0].chunks, (std::vector<ChunkParts>{{0, 1, true, false}}));
  EXPECT_EQ(s[1].chunks, (std::vector<ChunkParts>{{1, 3, false, true}}));

  // tp = 2: whole shapes (the vocabulary's 256 rows, not a rank's 128).
  s = pipeline_sharding(model, Layout{2, 1, 0, 2}.parallel());
  EXPECT_EQ(s[0].tensors.front().name, "wte");
  EXPECT_EQ(s[0].tensors.front().rows, 256);
  EXPECT_EQ(s[0].tensors.front().split_dim, 0);

  // Over the stages, every tensor of the whole model once, wte twice (tied).
  std::map<std::string, int> held;
  for (const CheckpointSharding& stage : pipeline_sharding(model, Layout{1, 1, 0, 4}.parallel()))
    for (const std::string& name : names_of(stage)) ++held[name];
  for (const auto& [name, i] : whole_index()) EXPECT_EQ(held[name], name == "wte" ? 2 : 1) << name;
  EXPECT_EQ(held.size(), whole_index().size());

  // The distributed optimizer beside pp: a stage is one bucket padded to 8·dp
  // elements, dp rank d owning its d-th block (the trainer). dp = 3 pads
  // these stages (their lengths are multiples of 16, not of 24).
  bool padded_some = false;
  for (const int dp : {2, 3}) {
    const std::vector<CheckpointSharding> plain = pipeline_sharding(model, Layout{1, dp, 0, 2}.parallel());
    s = pipeline_sharding(model, Layout{1, dp, 1, 2}.parallel());
    const std::uint64_t multiple = 8 * static_cast<std::uint64_t>(dp);
    for (std::size_t stage = 0; stage < 2; ++stage) {
      const std::uint64_t padded = (plain[stage].flat_elements + multiple - 1) / multiple * multiple;
      padded_some = padded_some || padded != plain[stage].flat_elements;
      EXPECT_EQ(s[stage].flat_elements, padded);
      EXPECT_EQ(s[stage].tensors, plain[stage].tensors);
      ASSERT_EQ(s[stage].optimizer_shards.size(), static_cast<std::size_t>(dp));
      const std::uint64_t block = padded / static_cast<std::uint64_t>(dp);
      for (int d = 0; d < dp; ++d)
        EXPECT_EQ(s[stage].optimizer_shards[static_cast<std::size_t>(d)],
                  (std::vector<OptimizerRange>{{static_cast<std::uint64_t>(d) * block, block, 0}}));
    }
  }
  EXPECT_TRUE(padded_some);

  // A split the knobs cannot make (4 layers over pp = 3).
  EXPECT_THROW(pipeline_sharding(model, Layout{1, 1, 0, 3}.parallel()), std::invalid_argument);
}

TEST(PipelineCheckpointMetadata, StagesRoundTripThroughJsonAsVersion3) {
  CheckpointMetadata m;
  m.step = 7;
  m.data_batches = 7;
  m.seed = 99;
  m.model = {"pp-ckpt-gpt", 4, 16, 64, 2, 2, 8, 256, 8, 1};
  const Layout l{1, 2, 0, 2, 2};
  m.layout = l.checkpoint();
  m.world_size = l.ranks();
  m.lr_schedule = {1e-3, 1e-4, 2, 6};
  m.stages = shardings_for(l);
  for (int r = 0; r < m.world_size; ++r) m.files.push_back({r, shard_file_name(r), 100, 0x01020304u});
  const std::string text = to_json(m);
  EXPECT_NE(text.find("\"format_version\": 3"), std::string::npos);
  EXPECT_NE(text.find("\"vpp\": 2"), std::string::npos);
  EXPECT_NE(text.find("\"first_layer\": 2"), std::string::npos);
  EXPECT_EQ(text.find("\"sharding\""), std::string::npos);  // the stages instead
  m.format_version = 3;
  EXPECT_EQ(parse_metadata(text, "m.json"), m);
  EXPECT_EQ(stage_sharding(m, 1), m.stages[1]);
  EXPECT_TRUE(sharding_known(m));

  // A stage missing, or the files not tp·dp·pp: named.
  std::string broken = to_json(m);
  broken.replace(broken.find("\"world_size\": 4"), 15, "\"world_size\": 2");
  EXPECT_THROW(parse_metadata(broken, "m.json"), sim::ConfigError);
  CheckpointMetadata fewer = m;
  fewer.stages.pop_back();
  try {
    parse_metadata(to_json(fewer), "m.json");
    ADD_FAILURE() << "one stage for pp = 2 was read";
  } catch (const sim::ConfigError& e) {
    EXPECT_EQ(e.diagnostics().at(0).message, "stages: 1 stages for pp 2");
  }
}

struct PipelineReshardCase {
  Layout saved, run;
  std::string name;
};

class PipelineReshardTest : public ::testing::TestWithParam<PipelineReshardCase> {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("sextant-pp-reshard-" + std::to_string(::getpid()));
    fs::remove_all(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  OpenedCheckpoint save(const Layout& l, const std::vector<CheckpointSharding>& stages) {
    const std::vector<TrainerState> states = states_for(l, stages, 7777.0f, 5);
    begin_save(root_.string(), 5);
    for (int w = 0; w < l.ranks(); ++w) write_rank_shard(root_.string(), 5, w, states[static_cast<std::size_t>(w)]);
    CheckpointMetadata m;
    m.step = 5;
    m.data_batches = 5;
    m.layout = l.checkpoint();
    m.world_size = l.ranks();
    if (l.pp > 1)
      m.stages = stages;
    else
      m.sharding = stages.front();
    commit_save(root_.string(), m, 1);
    return open_checkpoint(root_.string());
  }
  fs::path root_;
};

TEST_P(PipelineReshardTest, EveryElementLandsWhereTheNewLayoutKeepsIt) {
  const PipelineReshardCase& c = GetParam();
  const std::vector<CheckpointSharding> saved = shardings_for(c.saved);
  const std::vector<CheckpointSharding> run = shardings_for(c.run);
  const OpenedCheckpoint opened = save(c.saved, saved);
  const std::vector<CheckpointSharding> read = saved_stage_shardings(opened.metadata);
  ASSERT_EQ(read, saved);  // through metadata.json
  testing::expect_resharded_states(opened, read, c.run.checkpoint(), run, states_for(c.run, run, 0.0f, 5));
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, PipelineReshardTest,
    ::testing::Values(PipelineReshardCase{{1, 1, 0, 2}, {1, 1, 0, 1}, "Pp2ToPp1"},
                      PipelineReshardCase{{1, 1, 0, 1}, {1, 1, 0, 2}, "Pp1ToPp2"},
                      PipelineReshardCase{{1, 1, 0, 2}, {1, 1, 0, 2, 2}, "Pp2ToPp2Vpp2"},
                      PipelineReshardCase{{1, 1, 0, 2, 2}, {1, 1, 0, 4}, "Pp2Vpp2ToPp4"},
                      PipelineReshardCase{{1, 1, 0, 2, 1, 1}, {1, 1, 0, 2}, "UnevenSplitToEven"},
                      PipelineReshardCase{{2, 2, 0, 2}, {1, 1, 0, 1}, "Tp2Dp2Pp2ToOneRank"},
                      PipelineReshardCase{{1, 1, 0, 1}, {2, 2, 0, 2}, "OneRankToTp2Dp2Pp2"},
                      PipelineReshardCase{{2, 1, 0, 2}, {1, 2, 0, 4}, "Tp2Pp2ToDp2Pp4"},
                      PipelineReshardCase{{1, 2, 1, 1}, {1, 2, 0, 2}, "Dp2Zero1ToDp2Pp2"},
                      PipelineReshardCase{{1, 2, 0, 2}, {1, 2, 1, 1}, "Dp2Pp2ToDp2Zero1"},
                      // the distributed optimizer beside pp (a stage's one padded bucket) and tp
                      PipelineReshardCase{{1, 2, 1, 2}, {1, 1, 0, 1}, "Dp2Zero1Pp2ToOneRank"},
                      PipelineReshardCase{{2, 2, 1, 2}, {1, 2, 1, 2, 2}, "Tp2Dp2Zero1Pp2ToDp2Zero1Pp2Vpp2"},
                      PipelineReshardCase{{1, 1, 0, 1}, {2, 2, 1, 2}, "OneRankToTp2Dp2Zero1Pp2"},
                      PipelineReshardCase{{2, 2, 1, 1}, {1, 4, 1, 2}, "Tp2Dp2Zero1ToDp4Zero1Pp2"},
                      // Context parallelism: the ranks are numbered tp-cp-dp-pp, so saved stage 1
                      // starts at rank tp·cp·dp = 4 (not tp·dp = 2, a cp rank of stage 0).
                      PipelineReshardCase{{2, 1, 0, 2, 1, 0, 2}, {1, 1, 0, 1}, "Tp2Cp2Pp2ToOneRank"},
                      PipelineReshardCase{{1, 1, 0, 1}, {1, 2, 1, 2, 1, 0, 2}, "OneRankToCp2Dp2Zero1Pp2"}),
    [](const ::testing::TestParamInfo<PipelineReshardCase>& info) { return info.param.name; });

// load_rank_state finds a rank's stage in the rank order tp-cp-dp-pp: with
// cp = 2 and pp = 2, world rank 1 is stage 0's second cp rank and rank 2 is
// stage 1 (world_rank / (tp·dp) said stages 1 and 2).
class PipelineLoadTest : public PipelineReshardTest {};

TEST_F(PipelineLoadTest, EveryCpRankLoadsItsOwnStagesTensors) {
  const Layout saved{1, 1, 0, 2};
  Layout run{1, 1, 0, 2};
  run.cp = 2;
  const OpenedCheckpoint opened = save(saved, shardings_for(saved));
  const std::vector<CheckpointSharding> stages = shardings_for(run);
  sim::ParallelLayout layout = run.parallel();
  layout.cp = run.cp;
  const std::vector<TrainerState> want = states_for(run, stages, 0.0f, 5);
  for (int w = 0; w < run.ranks(); ++w)
    EXPECT_EQ(load_rank_state(opened, layout, w, stages), want[static_cast<std::size_t>(w)]) << "rank " << w;
}

TEST(PipelineReshardPlan, AStageReadsItsTensorsFromTheSavedStagesThatHoldThem) {
  // pp = 2 -> pp = 1: the one rank reads layers 0-1 and wte from rank 0 (stage
  // 0), layers 2-3 and the final norm from rank 1; the tied wte of rank 1 is
  // not read (the first stage's copy is).
  const std::vector<CheckpointSharding> saved = shardings_for({1, 1, 0, 2});
  const std::vector<CheckpointSharding> run = shardings_for({1, 1, 0, 1});
  const ReshardPlan plan = plan_reshard({1, 1, 0, 2}, saved, {1, 1, 0, 1}, run.front(), 0, "m.json");
  std::uint64_t from[2] = {0, 0};
  for (const ArrayCopy& c : plan.weights) from[c.source_rank] += c.elements;
  std::uint64_t stage_params[2] = {0, 0};
  for (int s = 0; s < 2; ++s)
    for (const TensorSharding& t : saved[static_cast<std::size_t>(s)].tensors)
      stage_params[s] += static_cast<std::uint64_t>(t.rows * t.cols);
  EXPECT_EQ(from[0], stage_params[0]);
  EXPECT_EQ(from[1], stage_params[1] - 256 * 16);  // less its copy of wte (vocab 256 x hidden 16)
  // A stage's run needs only its own tensors: stage 1 of pp = 2 from a pp = 1 checkpoint.
  const std::vector<CheckpointSharding> pp2 = shardings_for({1, 1, 0, 2});
  EXPECT_NO_THROW(plan_reshard({1, 1, 0, 1}, run, {1, 1, 0, 2}, pp2[1], 1, "m.json"));
  // A saved tensor no stage of the run holds (an untied model's lm_head into a tied one):
  // named, although each stage alone finds all of its own tensors.
  std::vector<CheckpointSharding> untied = pp2;
  untied[1].tensors.push_back({"lm_head", 256, 16, untied[1].flat_elements, 0, {256}});
  EXPECT_NO_THROW(check_run_holds_saved_tensors(pp2, run, "m.json"));
  try {
    check_run_holds_saved_tensors(untied, run, "m.json");
    ADD_FAILURE() << "lm_head was not missed";
  } catch (const sim::ConfigError& e) {
    EXPECT_EQ(e.diagnostics().at(0).message, "has a tensor 'lm_head' (256 x 16) that this run's model lacks");
  }
  // The saved stages must be the layout's.
  try {
    plan_reshard({1, 1, 0, 2}, run, {1, 1, 0, 1}, run.front(), 0, "m.json");
    ADD_FAILURE() << "one sharding for pp = 2 was planned";
  } catch (const sim::ConfigError& e) {
    EXPECT_EQ(e.diagnostics().at(0).message, "describes 1 pipeline stage(s); its layout has pp=2");
  }
}

}  // namespace
}  // namespace sextant::engine::checkpoint
