// The engine's parameter layout: counts, alignment, the decay split, names.
#include "engine/model/parameter_layout.h"
#include "engine/model/partial_gradient_runs.h"

#include <gtest/gtest.h>

#include "engine/model/transformer_shape.h"
#include "sim/core/config_loader.h"

namespace sextant::engine {
namespace {

TransformerShape gpt_1_3b() {
  TransformerShape s;
  s.num_layers = 24;
  s.hidden = 2048;
  s.ffn_hidden = 8192;
  s.heads = 16;
  s.kv_heads = 16;
  s.head_dim = 128;
  s.vocab = 51200;
  s.seq = 2048;
  s.micro_batch = 4;
  return s;
}

TEST(ParameterLayout, CountsGpt13bAsMegatronDoes) {
  // Per layer: 12h^2 (QKV 3h^2, proj h^2, MLP 8h^2) + 13h (biases 3h + h + 4h + h,
  // two LayerNorms 4h) (Narayanan et al. 2021, Sec. 5.1); plus embeddings V·h,
  // positions s·h and the final LayerNorm 2h; tied output layer.
  const TransformerShape s = gpt_1_3b();
  const ParameterLayout layout(s);
  const std::int64_t h = 2048;
  const std::int64_t expected = 24 * (12 * h * h + 13 * h) + 51200 * h + 2048 * h + 2 * h;
  EXPECT_EQ(layout.parameter_count(), expected);
  EXPECT_EQ(layout.parameter_count(), 1317654528);  // "1.3B"
  EXPECT_EQ(layout.lm_head(), layout.wte());
}

TEST(ParameterLayout, LlamaHasNoBiasesBetasOrPositionsAndAnUntiedHead) {
  TransformerShape s = gpt_1_3b();
  s.layernorm = false;
  s.gelu = false;
  s.bias = false;
  s.learned_positions = false;
  s.tie_embeddings = false;
  s.kv_heads = 4;
  const ParameterLayout layout(s);
  EXPECT_EQ(layout.wpe(), LayerTensors::kAbsent);
  EXPECT_NE(layout.lm_head(), layout.wte());
  const LayerTensors& l = layout.layer(3);
  EXPECT_EQ(l.qkv_bias, LayerTensors::kAbsent);
  EXPECT_EQ(l.norm1_beta, LayerTensors::kAbsent);
  EXPECT_EQ(l.fc2_bias, LayerTensors::kAbsent);
  // GQA: Q 16 heads + K, V 4 heads each, of 128.
  EXPECT_EQ(layout.tensor(l.qkv_weight).rows, (16 + 2 * 4) * 128);
  // SwiGLU: fc1 holds gate and up.
  EXPECT_EQ(layout.tensor(l.fc1_weight).rows, 2 * 8192);
  EXPECT_EQ(layout.find("layers.3.fc1_weight").offset, layout.tensor(l.fc1_weight).offset);
}

TEST(ParameterLayout, TensorsAreAlignedDisjointInForwardOrderWithTheirDecayRanges) {
  TransformerShape s = gpt_1_3b();
  s.num_layers = 3;
  s.hidden = 72;  // not a multiple of the alignment: padding is needed
  s.ffn_hidden = 200;
  s.vocab = 1000;
  s.seq = 33;
  const ParameterLayout layout(s);
  std::size_t end = 0;
  const auto& decayed = layout.decayed_ranges();
  auto in_decayed = [&](std::size_t offset) {
    for (const auto& [begin, last] : decayed)
      if (offset >= begin && offset < last) return true;
    return false;
  };
  for (const ParameterTensor& t : layout.tensors()) {
    EXPECT_EQ(t.offset % ParameterLayout::kAlignElements, 0u) << t.name;
    EXPECT_GE(t.offset, end) << t.name;
    end = t.offset + t.elements();
    EXPECT_EQ(t.weight_decay, in_decayed(t.offset)) << t.name;
    EXPECT_EQ(t.weight_decay, in_decayed(end - 1)) << t.name;
    // Megatron: no decay on biases and norm parameters, decay on every matrix.
    EXPECT_EQ(t.weight_decay, t.rows > 1) << t.name;
  }
  for (std::size_t i = 1; i < decayed.size(); ++i) EXPECT_LT(decayed[i - 1].second, decayed[i].first);  // merged
  // The embeddings, then each layer (vectors, then its four matrices: one decayed range
  // per layer), then the final norm.
  ASSERT_EQ(decayed.size(), 1u + 3u);
  EXPECT_EQ(decayed[0].first, layout.tensor(layout.wte()).offset);
  EXPECT_GE(decayed[0].second, layout.tensor(layout.wpe()).offset + layout.tensor(layout.wpe()).elements());
  for (int l = 0; l < 3; ++l) {
    const LayerTensors& t = layout.layer(l);
    EXPECT_LT(layout.tensor(t.fc2_bias).offset, layout.tensor(t.qkv_weight).offset);
    EXPECT_EQ(decayed[static_cast<std::size_t>(l) + 1].first, layout.tensor(t.qkv_weight).offset);
    if (l > 0) EXPECT_GT(layout.tensor(t.norm1_gamma).offset, layout.tensor(layout.layer(l - 1).fc2_weight).offset);
  }
  EXPECT_GT(layout.tensor(layout.final_norm_gamma()).offset, layout.tensor(layout.layer(2).fc2_weight).offset);
  EXPECT_LE(end, layout.total_elements());
  EXPECT_EQ(layout.total_elements() % ParameterLayout::kAlignElements, 0u);
  EXPECT_THROW(layout.find("layers.3.qkv_weight"), std::out_of_range);
}

TEST(TransformerShape, ReadsPresetsAndNamesWhatTheEngineCannotRun) {
  sim::ModelConfig m;
  m.name = "odd";
  m.num_layers = 2;
  m.hidden_size = 100;
  m.ffn_hidden_size = 400;
  m.num_attention_heads = 4;
  m.num_query_groups = 4;
  m.kv_channels = 25;
  m.vocab_size = 1001;
  m.seq_length = 16;
  const TransformerShape s = transformer_shape_of(m, 2, 16);
  EXPECT_EQ(s.tokens(), 32);
  EXPECT_EQ(s.qkv_width(), 300);
  const std::vector<std::string> problems = transformer_shape_problems(s, m);
  ASSERT_EQ(problems.size(), 3u);
  EXPECT_NE(problems[0].find("head dimension (kv_channels) 25"), std::string::npos) << problems[0];
  EXPECT_NE(problems[1].find("hidden_size 100"), std::string::npos) << problems[1];
  EXPECT_NE(problems[2].find("vocab_size 1001"), std::string::npos) << problems[2];

  const sim::ModelConfig llama = sim::load_model_file(SEXTANT_TEST_CONFIG_DIR "/models/llama3-8b.yaml");
  const TransformerShape l = transformer_shape_of(llama, 1, 8192);
  EXPECT_TRUE(transformer_shape_problems(l, llama).empty());
  EXPECT_FALSE(l.layernorm);
  EXPECT_FALSE(l.gelu);
  EXPECT_FALSE(l.bias);
  EXPECT_FALSE(l.learned_positions);
  EXPECT_EQ(l.qkv_width(), (32 + 2 * 8) * 128);
}

TEST(ParameterLayout, NamesTheTensorsTensorParallelismSplits) {
  // Shoeybi et al. 2019: QKV and fc1 split by rows (weights and biases), proj and
  // fc2 by columns; their biases added after the all-reduce, the norms and the
  // embeddings replicated. GPT-1.3B: 4 split weights + 2 split biases per layer.
  const ParameterLayout layout(gpt_1_3b());
  int split = 0;
  for (const ParameterTensor& t : layout.tensors()) split += t.split_over_tp ? 1 : 0;
  EXPECT_EQ(split, 24 * 6);
  for (const char* name : {"layers.0.qkv_weight", "layers.0.qkv_bias", "layers.5.proj_weight",
                           "layers.5.fc1_weight", "layers.5.fc1_bias", "layers.23.fc2_weight"})
    EXPECT_TRUE(layout.find(name).split_over_tp) << name;
  for (const char* name : {"wte", "wpe", "layers.0.norm1_gamma", "layers.0.proj_bias", "layers.0.fc2_bias",
                           "final_norm_beta"})
    EXPECT_FALSE(layout.find(name).split_over_tp) << name;
}

TEST(ParameterLayout, SaysAlongWhichDimensionAndInWhichBlocksTpSplits) {
  // A Llama rank's shard at tp = 2 of 16 heads, 4 KV heads of 128, ffn 8192:
  // 8 heads, 2 KV heads, ffn 4096. QKV rows [Q 1024 | K 256 | V 256] (each rank
  // holds its heads of each), SwiGLU fc1 rows [gate 4096 | up 4096], proj and fc2 columns.
  TransformerShape s = gpt_1_3b();
  s.heads = 8;
  s.kv_heads = 2;
  s.ffn_hidden = 4096;
  s.gelu = s.bias = s.layernorm = s.learned_positions = s.tie_embeddings = false;
  const ParameterLayout layout(s);
  const ParameterTensor& qkv = layout.find("layers.0.qkv_weight");
  EXPECT_EQ(qkv.tp_split_dim, 0);
  EXPECT_EQ(qkv.tp_blocks, (std::vector<std::int64_t>{1024, 256, 256}));
  EXPECT_EQ(qkv.rows, 1024 + 2 * 256);
  EXPECT_EQ(layout.find("layers.0.fc1_weight").tp_blocks, (std::vector<std::int64_t>{4096, 4096}));
  EXPECT_EQ(layout.find("layers.0.proj_weight").tp_split_dim, 1);
  EXPECT_EQ(layout.find("layers.0.proj_weight").tp_blocks, (std::vector<std::int64_t>{1024}));
  EXPECT_EQ(layout.find("layers.0.fc2_weight").tp_blocks, (std::vector<std::int64_t>{4096}));
  EXPECT_EQ(layout.find("lm_head").tp_split_dim, -1);  // shape.tp = 1 here: nothing is vocabulary-parallel
}

TEST(ParameterLayout, VocabularyParallelAndSequenceParallelTensors) {
  // At tp = 2 the embedding (tied: it is the output layer too) is split by
  // vocabulary rows; under sp the replicated tensors that see only the rank's
  // tokens — 2 gains, 2 shifts and the proj and fc2 biases per layer, the
  // final norm's gain and shift — have partial gradients: 24·6 + 2 = 146.
  TransformerShape shape = gpt_1_3b();
  shape.tp = 2;
  shape.vocab = 51200 / 2;
  shape.sequence_parallel = true;
  const ParameterLayout layout(shape);
  EXPECT_TRUE(layout.find("wte").split_over_tp);
  EXPECT_EQ(layout.find("wte").rows, 25600);
  EXPECT_EQ(layout.find("wte").tp_split_dim, 0);  // checkpoints move it between tp layouts by rows
  EXPECT_EQ(layout.find("wte").tp_blocks, (std::vector<std::int64_t>{25600}));
  EXPECT_FALSE(layout.find("wpe").split_over_tp);
  EXPECT_FALSE(layout.find("wpe").partial_gradient_over_tp);  // from the gathered gradient, alike on every rank
  int partial = 0;
  for (const ParameterTensor& t : layout.tensors()) {
    partial += t.partial_gradient_over_tp ? 1 : 0;
    EXPECT_FALSE(t.partial_gradient_over_tp && t.split_over_tp) << t.name;
  }
  EXPECT_EQ(partial, 24 * 6 + 2);
  for (const char* name : {"layers.0.norm1_gamma", "layers.0.norm1_beta", "layers.3.proj_bias",
                           "layers.3.norm2_gamma", "layers.23.fc2_bias", "final_norm_gamma", "final_norm_beta"})
    EXPECT_TRUE(layout.find(name).partial_gradient_over_tp) << name;

  // Runs of neighbours. A layer's replicated vectors lie side by side at its
  // start (norm1_gamma, norm1_beta, proj_bias, norm2_gamma, norm2_beta,
  // fc2_bias), then its split biases and matrices: one run per layer, and the
  // final norm's: 24 + 1 = 25 runs.
  const std::vector<ElementRun> runs = partial_gradient_runs(layout);
  ASSERT_EQ(runs.size(), 25u);
  for (int i = 0; i < 24; ++i) {
    const std::string p = "layers." + std::to_string(i) + ".";
    EXPECT_EQ(runs[static_cast<std::size_t>(i)].begin, layout.find(p + "norm1_gamma").offset) << i;
    EXPECT_EQ(runs[static_cast<std::size_t>(i)].end, layout.find(p + "fc2_bias").offset + 2048) << i;
  }
  EXPECT_EQ(runs.back().begin, layout.find("final_norm_gamma").offset);
  EXPECT_EQ(runs.back().end, layout.find("final_norm_beta").offset + 2048);

  shape.sequence_parallel = false;
  EXPECT_TRUE(partial_gradient_runs(ParameterLayout(shape)).empty());
}

TEST(ParameterLayout, PipelineStagesHoldTheirLayersUnderTheWholeModelsNames) {
  // GPT-1.3B split 12 | 12 over two stages: the first holds wte, wpe and
  // layers 0-11; the last layers 12-23, the final norm and, tied, its own wte.
  TransformerShape s = gpt_1_3b();
  s.num_layers = 12;
  const std::int64_t h = 2048;
  const std::int64_t per_layer = 12 * h * h + 13 * h;
  const ParameterLayout first(s, StageParts{0, true, false});
  EXPECT_EQ(first.parameter_count(), 12 * per_layer + 51200 * h + 2048 * h);
  EXPECT_EQ(first.tensor(first.layer(0).qkv_weight).name, "layers.0.qkv_weight");
  EXPECT_EQ(first.lm_head(), LayerTensors::kAbsent);
  EXPECT_EQ(first.final_norm_gamma(), LayerTensors::kAbsent);
  const ParameterLayout last(s, StageParts{12, false, true});
  EXPECT_EQ(last.parameter_count(), 12 * per_layer + 51200 * h + 2 * h);
  EXPECT_EQ(last.tensor(last.layer(0).qkv_weight).name, "layers.12.qkv_weight");
  EXPECT_EQ(last.tensor(last.layer(11).fc2_bias).name, "layers.23.fc2_bias");
  EXPECT_EQ(last.lm_head(), last.wte());
  EXPECT_EQ(last.wpe(), LayerTensors::kAbsent);
  // Untied (Llama-like), a middle stage: layers only, no wte.
  s.tie_embeddings = false;
  const ParameterLayout middle(s, StageParts{6, false, false});
  EXPECT_EQ(middle.parameter_count(), 12 * per_layer);
  EXPECT_EQ(middle.wte(), LayerTensors::kAbsent);
  EXPECT_EQ(middle.lm_head(), LayerTensors::kAbsent);
  // A chunk of the embedding alone has only decayed tensors: all of it decays.
  s.num_layers = 0;
  const ParameterLayout embedding_only(s, StageParts{0, true, false});
  EXPECT_EQ(embedding_only.decayed_ranges(),
            (std::vector<std::pair<std::size_t, std::size_t>>{{0, embedding_only.total_elements()}}));
  EXPECT_EQ(embedding_only.parameter_count(), 51200 * h + 2048 * h);
}

}  // namespace
}  // namespace sextant::engine
