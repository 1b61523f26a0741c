#include "sim/core/pipeline_split.h"

#include <gtest/gtest.h>

#include "search/split_options.h"
#include "sim/core/config_error.h"
#include "sim/core/layout_check.h"
#include "tests/support/test_models.h"

namespace sextant::sim {
namespace {

ModelConfig layers(int n) {
  ModelConfig m = testing::gpt3_175b();
  m.num_layers = n;
  return m;
}

ParallelLayout pipeline(int pp, int vpp) {
  ParallelLayout l;
  l.pp = pp;
  l.vpp = vpp;
  l.schedule = vpp > 1 ? Schedule::kInterleaved : Schedule::kOneFOneB;
  return l;
}

// Layers per (rank, chunk), rank-major: the split as a table.
std::vector<std::vector<int>> table(const PipelineSplit& s) {
  std::vector<std::vector<int>> out(static_cast<std::size_t>(s.pp()));
  for (int r = 0; r < s.pp(); ++r) {
    for (int c = 0; c < s.vpp(); ++c) out[r].push_back(s.chunk(r, c).num_layers);
  }
  return out;
}

// Chunks read in virtual-stage order cover 0..L−1 once, in order.
void expect_covers(const PipelineSplit& s, int num_layers) {
  int next = 0;
  for (int c = 0; c < s.vpp(); ++c) {
    for (int r = 0; r < s.pp(); ++r) {
      EXPECT_EQ(s.chunk(r, c).first_layer, next) << "rank " << r << " chunk " << c;
      next += s.chunk(r, c).num_layers;
    }
  }
  EXPECT_EQ(next, num_layers);
  EXPECT_TRUE(s.chunk(0, 0).embedding);
  EXPECT_TRUE(s.chunk(s.pp() - 1, s.vpp() - 1).loss);
}

// Llama 3 405B (Megatron-LM examples, 1024 GPUs): 126 layers at pp=8, vpp=8.
// 126 + embedding + loss = 128 = 8·8·2: every virtual stage holds 2 units; the
// first gives one to the embedding, the last one to the loss.
TEST(PipelineSplit, Llama405bAccountsForEmbeddingAndLoss) {
  const ModelConfig m = layers(126);
  ParallelLayout l = pipeline(8, 8);
  EXPECT_EQ(check_pipeline_split(m, l), SplitProblem::kNotDivisible);  // 126 % 64 = 62
  l.embedding_in_split = true;
  l.loss_in_split = true;
  ASSERT_EQ(check_pipeline_split(m, l), SplitProblem::kNone);
  const PipelineSplit s = pipeline_split(m, l);
  EXPECT_EQ(s.chunk(0, 0).num_layers, 1);   // E + t
  EXPECT_EQ(s.chunk(0, 1).num_layers, 2);
  EXPECT_EQ(s.chunk(0, 1).first_layer, 15);  // after 1 + 7·2 layers of chunk 0
  EXPECT_EQ(s.chunk(7, 7).num_layers, 1);   // t + L
  EXPECT_EQ(s.chunk(7, 7).first_layer, 125);
  EXPECT_EQ(s.stage(0).num_layers, 15);     // 1 + 7·2
  EXPECT_EQ(s.stage(3).num_layers, 16);     // 8·2
  EXPECT_EQ(s.stage(7).num_layers, 15);
  EXPECT_EQ(s.max_stage_layers(), 16);
  EXPECT_FALSE(s.even());
  expect_covers(s, 126);
  // What the search starts from when the user leaves the split open.
  const search::SplitKnobs d = search::default_split(m, 8, 8);
  EXPECT_TRUE(d.embedding_in_split && d.loss_in_split);
}

// 94 layers at pp=8, vpp=4: 94 % 32 = 30, and first/last stages cannot help
// (F, N and the middle ranks' layers all multiples of 4 sum to a multiple of 4).
// 94 + 2 = 96 = 8·4·3.
TEST(PipelineSplit, NinetyFourLayersAtPp8Vpp4) {
  const ModelConfig m = layers(94);
  const search::SplitKnobs d = search::default_split(m, 8, 4);
  EXPECT_TRUE(d.embedding_in_split && d.loss_in_split);
  ParallelLayout l = pipeline(8, 4);
  d.apply_to(l);
  const PipelineSplit s = pipeline_split(m, l);
  EXPECT_EQ(table(s)[0], (std::vector<int>{2, 3, 3, 3}));  // 11 layers + E
  EXPECT_EQ(table(s)[4], (std::vector<int>{3, 3, 3, 3}));  // 12
  EXPECT_EQ(table(s)[7], (std::vector<int>{3, 3, 3, 2}));  // 11 layers + L
  expect_covers(s, 94);
  // 94 − 12 − 12 = 70 over 6 middle ranks is not whole.
  l = pipeline(8, 4);
  l.first_stage_layers = 12;
  l.last_stage_layers = 12;
  EXPECT_EQ(check_pipeline_split(m, l), SplitProblem::kUnevenMiddle);
}

// 61 layers at pp=8, vpp=4 (DeepSeek-V3's count without MTP): no accounting
// divides (61, 62, 63 by 32) and 61 is odd, so only an explicit layout works.
// 63 units over 32 virtual stages: 31 of 2 and one of 1; the last virtual
// stage takes the single unit (the loss alone).
TEST(PipelineSplit, SixtyOneLayersNeedAnExplicitLayout) {
  const ModelConfig m = layers(61);
  const search::SplitKnobs d = search::default_split(m, 8, 4);
  EXPECT_EQ(d.pp_layout, "Et|(t*2|)*30L");
  ParallelLayout l = pipeline(8, 4);
  d.apply_to(l);
  ASSERT_EQ(check_pipeline_split(m, l), SplitProblem::kNone);
  const PipelineSplit s = pipeline_split(m, l);
  EXPECT_EQ(table(s)[0], (std::vector<int>{1, 2, 2, 2}));  // 7 + E
  EXPECT_EQ(table(s)[1], (std::vector<int>{2, 2, 2, 2}));  // 8
  EXPECT_EQ(table(s)[7], (std::vector<int>{2, 2, 2, 0}));  // 6 + L
  expect_covers(s, 61);
}

// 70 layers at pp=12: 70 + 2 = 72 = 12·6, the same split as Megatron's
// first_stage_layers=5, last_stage_layers=5 (70 − 5 − 5 = 60 = 10·6).
TEST(PipelineSplit, SeventyLayersAtPp12) {
  const ModelConfig m = layers(70);
  ParallelLayout accounting = pipeline(12, 1);
  search::default_split(m, 12, 1).apply_to(accounting);
  EXPECT_TRUE(accounting.embedding_in_split && accounting.loss_in_split);
  ParallelLayout ends = pipeline(12, 1);
  ends.first_stage_layers = 5;
  ends.last_stage_layers = 5;
  const PipelineSplit a = pipeline_split(m, accounting);
  const PipelineSplit b = pipeline_split(m, ends);
  EXPECT_EQ(table(a), table(b));
  EXPECT_EQ(a.describe(), "E+5t | 6t | 6t | 6t | 6t | 6t | 6t | 6t | 6t | 6t | 6t | 5t+L");
  expect_covers(b, 70);
}

// Megatron's offsets for first/last stages with vpp (get_transformer_layer_offset):
// chunk c of rank s starts at c·(F + M + N)/v + F/v + (s − 1)·M/(v·middle ranks).
// 40 layers, pp=4, vpp=2, F = N = 8: M = 24 over 2 middle ranks, 12 each.
TEST(PipelineSplit, FirstAndLastStageOffsetsFollowMegatron) {
  const ModelConfig m = layers(40);
  ParallelLayout l = pipeline(4, 2);
  l.first_stage_layers = 8;
  l.last_stage_layers = 8;
  const PipelineSplit s = pipeline_split(m, l);
  EXPECT_EQ(s.chunk(0, 0).first_layer, 0);
  EXPECT_EQ(s.chunk(2, 0).first_layer, 4 + 6);           // F/v + 1·M/(v·2)
  EXPECT_EQ(s.chunk(2, 1).first_layer, 20 + 4 + 6);      // + (8 + 24 + 8)/2
  EXPECT_EQ(s.chunk(3, 1).num_layers, 4);
  expect_covers(s, 40);
}

TEST(PipelineSplit, ExplicitLayoutExpandsLikeMegatron) {
  std::vector<std::string> stages;
  std::string error;
  ASSERT_TRUE(expand_pp_layout("Et*3|(tt|)*2,L", stages, error) == false);  // commas refused
  ASSERT_TRUE(expand_pp_layout("Et*3|(tt|)*2L", stages, error)) << error;
  EXPECT_EQ(stages, (std::vector<std::string>{"Ettt", "tt", "tt", "L"}));
  EXPECT_EQ(compress_pp_layout(stages), "Et*3|(t*2|)*2L");
  EXPECT_FALSE(expand_pp_layout("Et|(tt", stages, error));
  EXPECT_EQ(error, "'(' at column 4 is never closed");
}

// check_layout's message for each split problem, as the user reads it.
std::vector<std::string> split_errors(int num_layers, const ParallelLayout& l) {
  std::vector<std::string> out;
  ClusterConfig c = testing::dgx_a100();
  ParallelLayout full = l;
  full.tp = 8;
  full.mbs = 1;
  full.gbs = 8 * l.pp;
  full.dp = 1;
  for (const Diagnostic& d : check_layout(layers(num_layers), c, full.total_gpus(), full)) {
    out.push_back(d.to_string());
  }
  return out;
}

TEST(PipelineSplit, MessagesCarryTheValues) {
  ParallelLayout l = pipeline(8, 3);
  l.embedding_in_split = true;
  l.loss_in_split = true;
  EXPECT_EQ(split_errors(126, l),
            std::vector<std::string>{"--layout: pp: num_layers + embedding + loss = 126 + 1 + 1 = "
                                     "128 must be a multiple of pp·vpp (8·3 = 24)"});
  l = pipeline(12, 1);
  l.first_stage_layers = 4;
  l.last_stage_layers = 4;
  EXPECT_EQ(split_errors(70, l),
            std::vector<std::string>{"--layout: first_stage_layers: num_layers − first_stage_layers "
                                     "− last_stage_layers = 70 − 4 − 4 = 62 must be a positive "
                                     "multiple of the 10 middle stages"});
  l = pipeline(8, 4);
  l.first_stage_layers = 10;
  l.last_stage_layers = 12;
  EXPECT_EQ(split_errors(94, l), std::vector<std::string>{"--layout: first_stage_layers: "
                                                          "first_stage_layers (10) must be a "
                                                          "multiple of vpp (4)"});
  l.embedding_in_split = true;
  EXPECT_EQ(split_errors(94, l),
            std::vector<std::string>{"--layout: first_stage_layers: first_stage_layers and "
                                     "last_stage_layers cannot be combined with embedding_in_split "
                                     "or loss_in_split (Megatron-Core forbids it)"});
  l = pipeline(2, 1);
  l.pp_layout = "Ett|tt|ttL";
  EXPECT_EQ(split_errors(6, l),
            std::vector<std::string>{"--layout: pp_layout: has 3 virtual stages ('|'-separated); "
                                     "it needs pp·vpp (2·1 = 2)"});
  l.pp_layout = "Ett|tL";
  EXPECT_EQ(split_errors(6, l),
            std::vector<std::string>{"--layout: pp_layout: has 3 transformer layers (t); the model "
                                     "has num_layers = 6"});
  l.pp_layout = "tEt|ttL";
  EXPECT_EQ(split_errors(4, l),
            std::vector<std::string>{"--layout: pp_layout: must hold E once, opening its first "
                                     "virtual stage, and L once, closing its last (got 1 E and 1 L)"});
}

TEST(PipelineSplit, ParseLayoutReadsTheKnobs) {
  const PartialLayout p =
      parse_layout("pp=8,first_stage_layers=5,last_stage_layers=5,embedding_in_split=0");
  EXPECT_EQ(p.first_stage_layers, 5);
  EXPECT_EQ(p.last_stage_layers, 5);
  EXPECT_EQ(p.embedding_in_split, false);
  EXPECT_TRUE(p.split_given());
  EXPECT_EQ(parse_layout("pp_layout=Et|tL").pp_layout, "Et|tL");
  try {
    parse_layout("tp=2,pp_layout=Ex|tL");
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()),
              "--layout:1:6: pp_layout: unknown character 'x' at column 2; accepted: E, t, L, |, "
              "x*n, (...)*n (stages separated by '|'; no commas: they separate --layout knobs)");
  }
  ParallelLayout l;
  l.first_stage_layers = 5;
  l.last_stage_layers = 5;
  EXPECT_EQ(parse_layout(l.to_spec()).first_stage_layers, 5);
}

}  // namespace
}  // namespace sextant::sim

namespace sextant::sim {
namespace {

// pp=64 on 32 layers has no even or uneven split (each gives every stage a
// layer): the message says so instead of suggesting one (issue 29, item 11).
TEST(PipelineSplit, MorePipelineStagesThanLayersSuggestsNoUnevenSplit) {
  EXPECT_EQ(split_errors(32, pipeline(64, 1)),
            std::vector<std::string>{
                "--layout: pp: pp (64) must be at most num_layers (32): an even or uneven split "
                "gives every pipeline stage at least one layer; accepted: pp dividing 32 "
                "(1, 2, 4, 8, 16, 32) for an even split, or any pp up to 32 with an uneven one"});
  // Nor has 33 on 32 layers; 31 has an uneven one, and is told so.
  EXPECT_NE(split_errors(32, pipeline(33, 1)).at(0).find("must be at most num_layers (32)"),
            std::string::npos);
  EXPECT_NE(split_errors(32, pipeline(31, 1)).at(0).find("or give an uneven split"),
            std::string::npos);
}

}  // namespace
}  // namespace sextant::sim
