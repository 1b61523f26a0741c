// Strict loading of model, GPU, cluster and cost-profile YAML (STYLE.md #5).
//
// As ninja's parser tests do, every case asserts the exact text the user reads:
// "file:line:col: key: message", one line per problem, all problems at once.
// YAML comes from strings, so these tests need no files. Lines and columns are
// 1-based and point at the offending value, or, for a missing key, at the
// first key of the mapping that lacks it.
#include "sim/core/config_loader.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "sim/core/config_error.h"

namespace sextant::sim {
namespace {

using Lines = std::vector<std::string>;

// Runs `load` and returns every diagnostic it throws as the user reads it;
// empty when it loads. Also checks that what() is those lines joined.
template <typename Load>
Lines errors(Load&& load) {
  try {
    load();
  } catch (const ConfigError& e) {
    Lines out;
    std::string joined;
    for (const Diagnostic& d : e.diagnostics()) {
      out.push_back(d.to_string());
      joined += (joined.empty() ? "" : "\n") + d.to_string();
    }
    EXPECT_EQ(joined, e.what());
    return out;
  }
  return {};
}

Lines model_errors(const std::string& text) {
  return errors([&] { load_model_text(text, "model.yaml"); });
}
Lines gpu_errors(const std::string& text) {
  return errors([&] { load_gpu_text(text, "gpu.yaml"); });
}
Lines cluster_errors(const std::string& text) {
  return errors([&] { load_cluster_text(text, "cluster.yaml"); });
}
Lines profile_errors(const std::string& text) {
  return errors([&] { load_profile_text(text, "profile.yaml"); });
}

// `text` with the first occurrence of `from` replaced by `to`.
std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const std::size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << "'" << from << "' is not in the text";
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

// ---------------------------------------------------------------- model

// A valid dense model, one key per line; the numbers are the line numbers.
const std::string kModel =
    "name: tiny\n"                 // 1
    "num_layers: 4\n"              // 2
    "hidden_size: 256\n"           // 3
    "ffn_hidden_size: 1024\n"      // 4
    "num_attention_heads: 8\n"     // 5
    "vocab_size: 1000\n"           // 6
    "seq_length: 128\n"            // 7
    "activation: gelu\n"           // 8
    "normalization: layernorm\n";  // 9

const std::string kModelKeys =
    "name, num_layers, hidden_size, ffn_hidden_size, num_attention_heads, num_query_groups, "
    "kv_channels, vocab_size, seq_length, activation, normalization, tie_embeddings, "
    "position_embedding_type, add_bias_linear, add_qkv_bias, sliding_window, rotary_base, "
    "hidden_dropout, attention_dropout, moe, mla, "
    "source";

TEST(LoadModel, DenseModelLoadsWithDefaults) {
  const ModelConfig m = load_model_text(kModel, "model.yaml");
  EXPECT_EQ(m.name, "tiny");
  EXPECT_EQ(m.num_layers, 4);
  EXPECT_EQ(m.hidden_size, 256);
  EXPECT_EQ(m.ffn_hidden_size, 1024);
  EXPECT_EQ(m.num_attention_heads, 8);
  EXPECT_EQ(m.num_query_groups, 8);  // default: one group per head (MHA)
  EXPECT_EQ(m.kv_channels, 32);      // default: hidden_size / heads = 256 / 8
  EXPECT_EQ(m.vocab_size, 1000);
  EXPECT_EQ(m.seq_length, 128);
  EXPECT_EQ(m.activation, Activation::kGelu);
  EXPECT_EQ(m.normalization, Normalization::kLayerNorm);
  EXPECT_FALSE(m.tie_embeddings);
  EXPECT_EQ(m.position_embedding, PositionEmbedding::kLearnedAbsolute);
  EXPECT_TRUE(m.add_bias_linear);
  EXPECT_DOUBLE_EQ(m.hidden_dropout, 0.1);
  EXPECT_DOUBLE_EQ(m.attention_dropout, 0.1);
  EXPECT_DOUBLE_EQ(m.rotary_base, 10000.0);
  EXPECT_FALSE(m.moe);
}

TEST(LoadModel, EveryOptionalKeyIsRead) {
  const std::string text = replaced(replaced(kModel, "gelu", "swiglu"), "layernorm", "rmsnorm") +
                           "num_query_groups: 2\n"
                           "kv_channels: 64\n"
                           "tie_embeddings: true\n"
                           "position_embedding_type: rope\n"
                           "add_bias_linear: false\n"
                           "hidden_dropout: 0.0\n"
                           "attention_dropout: 0.05\n"
                           "rotary_base: 500000\n"
                           "source: made up for a test\n";
  const ModelConfig m = load_model_text(text, "model.yaml");
  EXPECT_EQ(m.num_query_groups, 2);
  EXPECT_EQ(m.kv_channels, 64);
  EXPECT_EQ(m.query_width(), 8 * 64);
  EXPECT_EQ(m.kv_width(), 2 * 64);
  EXPECT_EQ(m.activation, Activation::kSwiglu);
  EXPECT_EQ(m.normalization, Normalization::kRmsNorm);
  EXPECT_TRUE(m.tie_embeddings);
  EXPECT_EQ(m.position_embedding, PositionEmbedding::kRope);
  EXPECT_FALSE(m.add_bias_linear);
  EXPECT_DOUBLE_EQ(m.hidden_dropout, 0.0);
  EXPECT_DOUBLE_EQ(m.attention_dropout, 0.05);
  EXPECT_DOUBLE_EQ(m.rotary_base, 500000.0);
}

TEST(LoadModel, RotaryBaseMustBePositive) {
  EXPECT_EQ(model_errors(kModel + "rotary_base: 0\n"),
            Lines{"model.yaml:10:14: rotary_base: must be in [1, 1000000000], got 0"});
}

TEST(LoadModel, SlidingWindowAndQkvBias) {
  const ModelConfig plain = load_model_text(kModel, "model.yaml");
  EXPECT_EQ(plain.sliding_window, 0);
  EXPECT_FALSE(plain.add_qkv_bias);
  const ModelConfig m =
      load_model_text(kModel + "sliding_window: 64\nadd_qkv_bias: true\n", "model.yaml");
  EXPECT_EQ(m.sliding_window, 64);
  EXPECT_EQ(m.attention_span(), 64);  // min(seq_length 128, window 64)
  EXPECT_TRUE(m.add_qkv_bias);
  EXPECT_EQ(load_model_text(kModel + "sliding_window: 0\n", "model.yaml").sliding_window, 0);
  EXPECT_EQ(model_errors(kModel + "sliding_window: -5\n"),
            Lines{"model.yaml:10:17: sliding_window: must be positive, got -5"});
  EXPECT_EQ(model_errors(kModel + "sliding_window: abc\n"),
            Lines{"model.yaml:10:17: sliding_window: expected an integer, got 'abc'"});
}

TEST(LoadModel, NamesMustBeValidUtf8) {
  EXPECT_EQ(model_errors(replaced(kModel, "name: tiny", "name: \"ti\xff" "ny\"")),
            Lines{"model.yaml:1:7: name: is not valid UTF-8 (byte 0xff at byte 2)"});
  EXPECT_EQ(model_errors(replaced(kModel, "name: tiny", "name: \"ti\\x01\"")),
            Lines{"model.yaml:1:7: name: contains a control character at byte 2"});
  EXPECT_EQ(model_errors(replaced(kModel, "name: tiny", "name: \"caf\u00e9\"")), Lines{});
}

TEST(LoadModel, UnknownKeyListsTheAcceptedKeys) {
  EXPECT_EQ(model_errors(kModel + "hidden_dim: 256\n"),
            Lines{"model.yaml:10:1: hidden_dim: unknown key; accepted keys: " + kModelKeys});
}

TEST(LoadModel, UnknownNonScalarKeyIsShownAsQuestionMark) {
  EXPECT_EQ(model_errors(kModel + "? [a, b]\n: 1\n"),
            Lines{"model.yaml:10:3: ?: unknown key; accepted keys: " + kModelKeys});
}

TEST(LoadModel, WrongTypeQuotesTheValue) {
  EXPECT_EQ(model_errors(kModel + "num_query_groups: abc\n"),
            Lines{"model.yaml:10:19: num_query_groups: expected an integer, got 'abc'"});
  EXPECT_EQ(model_errors(kModel + "kv_channels: 1.5\n"),
            Lines{"model.yaml:10:14: kv_channels: expected an integer, got '1.5'"});
  EXPECT_EQ(model_errors(kModel + "kv_channels: [64]\n"),
            Lines{"model.yaml:10:14: kv_channels: expected an integer, got a list"});
  EXPECT_EQ(model_errors(kModel + "kv_channels: {a: 1}\n"),
            Lines{"model.yaml:10:14: kv_channels: expected an integer, got a mapping"});
  EXPECT_EQ(model_errors(kModel + "tie_embeddings: maybe\n"),
            Lines{"model.yaml:10:17: tie_embeddings: expected true or false, got 'maybe'"});
  EXPECT_EQ(model_errors(kModel + "hidden_dropout: high\n"),
            Lines{"model.yaml:10:17: hidden_dropout: expected a finite number, got 'high'"});
  EXPECT_EQ(model_errors(kModel + "source: [a, b]\n"),
            Lines{"model.yaml:10:9: source: expected a string, got a list"});
}

TEST(LoadModel, NonFiniteNumbersAreRejected) {
  EXPECT_EQ(model_errors(kModel + "hidden_dropout: .nan\nattention_dropout: .inf\n"),
            (Lines{"model.yaml:10:17: hidden_dropout: expected a finite number, got '.nan'",
                   "model.yaml:11:20: attention_dropout: expected a finite number, got '.inf'"}));
}

// The placeholder 0 that required_int returns after a type error must not be
// range-checked too ("must be positive, got 0" about a value never written).
TEST(LoadModel, WrongTypeOfRequiredSizeIsReportedOnce) {
  EXPECT_EQ(model_errors(replaced(kModel, "num_layers: 4", "num_layers: abc")),
            Lines{"model.yaml:2:13: num_layers: expected an integer, got 'abc'"});
}

TEST(LoadModel, MissingRequiredKeyPointsAtTheMapping) {
  EXPECT_EQ(model_errors(replaced(kModel, "vocab_size: 1000\n", "")),
            Lines{"model.yaml:1:1: vocab_size: required key is missing"});
}

TEST(LoadModel, NonPositiveSizes) {
  EXPECT_EQ(model_errors(replaced(kModel, "num_layers: 4", "num_layers: 0")),
            Lines{"model.yaml:2:13: num_layers: must be positive, got 0"});
  EXPECT_EQ(model_errors(replaced(kModel, "hidden_size: 256", "hidden_size: -256")),
            Lines{"model.yaml:3:14: hidden_size: must be positive, got -256"});
  EXPECT_EQ(model_errors(kModel + "kv_channels: 0\nnum_query_groups: 0\n"),
            (Lines{"model.yaml:11:19: num_query_groups: must be positive, got 0",
                   "model.yaml:10:14: kv_channels: must be positive, got 0"}));
}

TEST(LoadModel, ImplausiblyLargeSize) {
  // Sizes are read as 64-bit and must fit an int: the limit is 2^30.
  EXPECT_EQ(model_errors(replaced(kModel, "vocab_size: 1000", "vocab_size: 2000000000")),
            Lines{"model.yaml:6:13: vocab_size: is implausibly large (2000000000)"});
}

TEST(LoadModel, HeadsNotDivisibleByQueryGroups) {
  EXPECT_EQ(
      model_errors(kModel + "num_query_groups: 3\n"),
      Lines{"model.yaml:10:19: num_query_groups: must divide num_attention_heads (8), got 3"});
}

TEST(LoadModel, HiddenSizeNotDivisibleByHeadsNeedsKvChannels) {
  const std::string seven_heads =
      replaced(kModel, "num_attention_heads: 8", "num_attention_heads: 7");
  EXPECT_EQ(model_errors(seven_heads),
            Lines{"model.yaml:5:22: num_attention_heads: must divide hidden_size (256) unless "
                  "kv_channels is given, got 7"});
  EXPECT_EQ(load_model_text(seven_heads + "kv_channels: 64\n", "model.yaml").kv_channels, 64);
}

TEST(LoadModel, ChoicesListTheAcceptedValues) {
  EXPECT_EQ(model_errors(replaced(kModel, "gelu", "relu")),
            Lines{"model.yaml:8:13: activation: got 'relu'; accepted: gelu, swiglu, squared_relu"});
  EXPECT_EQ(model_errors(replaced(kModel, "layernorm", "batchnorm")),
            Lines{"model.yaml:9:16: normalization: got 'batchnorm'; accepted: layernorm, rmsnorm"});
  EXPECT_EQ(model_errors(kModel + "position_embedding_type: alibi\n"),
            Lines{"model.yaml:10:26: position_embedding_type: got 'alibi'; accepted: "
                  "learned_absolute, rope"});
}

TEST(LoadModel, DropoutOutOfRange) {
  EXPECT_EQ(model_errors(kModel + "hidden_dropout: 1.5\nattention_dropout: -0.1\n"),
            (Lines{"model.yaml:10:17: hidden_dropout: must be in [0, 0.99], got 1.5",
                   "model.yaml:11:20: attention_dropout: must be in [0, 0.99], got -0.1"}));
}

TEST(LoadModel, MalformedYamlGivesTheParsersLineAndColumn) {
  EXPECT_EQ(model_errors("name: tiny\nnum_layers: [4\nhidden_size: 256\n"),
            Lines{"model.yaml:3:12: invalid YAML: end of sequence flow not found"});
  EXPECT_EQ(model_errors("name: tiny\nnum_layers: 4\n  hidden_size: 256\n"),
            Lines{"model.yaml:3:14: invalid YAML: illegal map value"});
  EXPECT_EQ(model_errors("name: tiny\nnum_layers: 4\n\thidden_size: 256\n"),
            Lines{"model.yaml:3:1: invalid YAML: illegal tab when looking for indentation"});
}

TEST(LoadModel, TopLevelMustBeAMapping) {
  // An empty document has no position to point at.
  EXPECT_EQ(model_errors(""), Lines{"model.yaml: expected a mapping of key: value"});
  EXPECT_EQ(model_errors("- name: tiny\n"),
            Lines{"model.yaml:1:1: expected a mapping of key: value"});
  EXPECT_EQ(model_errors("tiny\n"), Lines{"model.yaml:1:1: expected a mapping of key: value"});
}

TEST(LoadModel, SeveralProblemsAreReportedAtOnce) {
  // Seven independent mistakes; one load names them all, in the order the keys are read.
  const std::string text =
      "name: tiny\n"
      "hidden_dropout: 1.5\n"
      "position_embedding_type: alibi\n"
      "tie_embeddings: maybe\n"
      "num_layers: 4\n"
      "hidden_size: 250\n"
      "ffn_hidden_size: 1024\n"
      "num_attention_heads: 0\n"
      "seq_length: 128\n"
      "activation: relu\n"
      "normalization: batchnorm\n";
  EXPECT_EQ(model_errors(text),
            (Lines{"model.yaml:8:22: num_attention_heads: must be positive, got 0",
                   "model.yaml:1:1: vocab_size: required key is missing",
                   "model.yaml:10:13: activation: got 'relu'; accepted: gelu, swiglu, squared_relu",
                   "model.yaml:11:16: normalization: got 'batchnorm'; accepted: layernorm, rmsnorm",
                   "model.yaml:4:17: tie_embeddings: expected true or false, got 'maybe'",
                   "model.yaml:3:26: position_embedding_type: got 'alibi'; accepted: "
                   "learned_absolute, rope",
                   "model.yaml:2:17: hidden_dropout: must be in [0, 0.99], got 1.5"}));
}

TEST(LoadModel, MissingFile) {
  EXPECT_EQ(errors([] { load_model_file("/nonexistent/sextant/model.yaml"); }),
            Lines{"/nonexistent/sextant/model.yaml: cannot open file (does it exist and is it "
                  "readable?)"});
}

TEST(LoadModel, FileErrorsNameThePath) {
  const std::string path = ::testing::TempDir() + "sextant_config_loader_test_model.yaml";
  {
    std::ofstream out(path);
    out << replaced(kModel, "num_layers: 4", "num_layers: 0");
  }
  EXPECT_EQ(errors([&] { load_model_file(path); }),
            Lines{path + ":2:13: num_layers: must be positive, got 0"});
  std::remove(path.c_str());
}

// YAML forbids a key twice; yaml-cpp keeps both pairs, so the loader must say so
// rather than read one of them silently (this was a bug).
TEST(LoadModel, DuplicateKeyIsAnError) {
  EXPECT_EQ(model_errors(kModel + "num_layers: 7\n"),
            Lines{"model.yaml:10:1: num_layers: given twice; each key may appear once"});
}

// A required key with no value is neither missing nor of a wrong type; it used
// to load as "" or 0 silently (cluster latencies then passed their range check).
TEST(LoadModel, RequiredKeyWithEmptyValueIsAnError) {
  EXPECT_EQ(model_errors(replaced(kModel, "num_layers: 4", "num_layers:")),
            Lines{"model.yaml:2:1: num_layers: has no value; expected an integer"});
}

// FIXED (was a bug in sim/core/strict_yaml.cc, check_required): "has no value" points at the
// null node, whose mark yaml-cpp sets at the next token -- the line after the
// key (3:1 above, for "num_layers:" on line 2). Expected: the key's position.
TEST(LoadModel, EmptyValueIsReportedAtItsKey) {
  EXPECT_EQ(model_errors(replaced(kModel, "num_layers: 4", "num_layers:")),
            Lines{"model.yaml:2:1: num_layers: has no value; expected an integer"});
}

// FIXED (was a bug in sim/core/config_loader.cc, load_model_text): kv_channels is cast to int
// without the 2^30 bound the other sizes get, so 2^32 + 64 loads as 64 and
// 2^31 as -2147483648 -- a negative head dimension, accepted.
TEST(LoadModel, HugeKvChannelsIsRejected) {
  EXPECT_EQ(model_errors(kModel + "kv_channels: 4294967360\n"),
            Lines{"model.yaml:10:14: kv_channels: is implausibly large (4294967360)"});
  EXPECT_EQ(model_errors(kModel + "kv_channels: 2147483648\n"),
            Lines{"model.yaml:10:14: kv_channels: is implausibly large (2147483648)"});
}

// FIXED (was a bug in sim/core/config_loader.cc, load_model_text): a second YAML document is
// never parsed (YAML::Load reads the first), so whatever follows "---" -- even
// invalid YAML -- is silently ignored.
TEST(LoadModel, SecondDocumentIsAnError) {
  EXPECT_EQ(model_errors(kModel + "---\nfoo: [\n").size(), 1u);
}

// ---------------------------------------------------------------- model: MoE

const std::string kMoe =
    "moe:\n"                                  // 10
    "  num_experts: 8\n"                      // 11
    "  router_topk: 2\n"                      // 12
    "  ffn_hidden_size: 512\n"                // 13
    "  shared_expert_ffn_hidden_size: 256\n"  // 14
    "  first_dense_layers: 1\n";              // 15

const std::string kMoeKeys =
    "num_experts, router_topk, ffn_hidden_size, shared_expert_ffn_hidden_size, "
    "first_dense_layers, capacity_factor, expert_load_factor";

// ---------------------------------------------------------------- model: MLA

const std::string kMla =
    "mla:\n"                     // 10
    "  q_lora_rank: 96\n"        // 11
    "  kv_lora_rank: 64\n"       // 12
    "  qk_nope_head_dim: 32\n"   // 13
    "  qk_rope_head_dim: 16\n"   // 14
    "  v_head_dim: 32\n";        // 15

TEST(LoadModelMla, DerivesHeadWidthAndGroups) {
  const ModelConfig m = load_model_text(kModel + kMla, "model.yaml");
  ASSERT_TRUE(m.mla);
  EXPECT_EQ(m.mla->q_lora_rank, 96);
  EXPECT_EQ(m.mla->kv_lora_rank, 64);
  EXPECT_EQ(m.kv_channels, 48);        // 32 + 16
  EXPECT_EQ(m.num_query_groups, 8);    // every head its own keys and values
  EXPECT_EQ(m.qk_head_dim(), 48);
  EXPECT_EQ(m.value_head_dim(), 32);
  EXPECT_EQ(m.attention_output_width(), 8 * 32);
  // q_lora_rank 0 (or absent): no query compression.
  EXPECT_EQ(load_model_text(kModel + replaced(kMla, "  q_lora_rank: 96\n", ""), "model.yaml")
                .mla->q_lora_rank,
            0);
}

TEST(LoadModelMla, ErrorsNameTheKeyAndTheConflict) {
  EXPECT_EQ(model_errors(kModel + kMla + "  rope: 1\n"),
            Lines{"model.yaml:16:3: mla.rope: unknown key; accepted keys: q_lora_rank, "
                  "kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim"});
  EXPECT_EQ(model_errors(kModel + replaced(kMla, "kv_lora_rank: 64", "kv_lora_rank: 0")),
            Lines{"model.yaml:12:17: mla.kv_lora_rank: must be positive, got 0"});
  EXPECT_EQ(model_errors(kModel + "kv_channels: 64\n" + replaced(kMla, "mla:", "mla:")),
            Lines{"model.yaml:10:14: kv_channels: is derived under mla (kv_channels = "
                  "qk_nope_head_dim + qk_rope_head_dim, num_query_groups = num_attention_heads); "
                  "remove it"});
}

TEST(LoadModelMoe, MoeBlockLoads) {
  const ModelConfig m = load_model_text(kModel + kMoe, "model.yaml");
  ASSERT_TRUE(m.moe);
  EXPECT_EQ(m.moe->num_experts, 8);
  EXPECT_EQ(m.moe->router_topk, 2);
  EXPECT_EQ(m.moe->ffn_hidden_size, 512);
  EXPECT_EQ(m.moe->shared_expert_ffn_hidden_size, 256);
  EXPECT_EQ(m.moe->first_dense_layers, 1);
  EXPECT_EQ(m.moe_layers(), 3);  // 4 layers, the first dense
  EXPECT_EQ(m.dense_layers(), 1);
}

TEST(LoadModelMoe, OptionalMoeKeysDefaultToZero) {
  const ModelConfig m = load_model_text(
      kModel + "moe:\n  num_experts: 8\n  router_topk: 2\n  ffn_hidden_size: 512\n", "model.yaml");
  ASSERT_TRUE(m.moe);
  EXPECT_EQ(m.moe->shared_expert_ffn_hidden_size, 0);
  EXPECT_EQ(m.moe->first_dense_layers, 0);
  EXPECT_EQ(m.moe_layers(), 4);
}

TEST(LoadModelMoe, UnknownNestedKeyIsNamedWithItsParent) {
  EXPECT_EQ(model_errors(kModel + kMoe + "  xyz: 1\n"),
            Lines{"model.yaml:16:3: moe.xyz: unknown key; accepted keys: " + kMoeKeys});
}

// A load factor below 1 would mean the busiest rank gets less than the mean:
// only a capacity that drops pairs makes that.
TEST(LoadModelMoe, ExpertLoadFactorIsAtLeastOneUnlessACapacityDropsPairs) {
  const std::vector<std::string> errors =
      model_errors(kModel + kMoe + "  expert_load_factor: 0.5\n");
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("model.yaml:16:23: moe.expert_load_factor:"), std::string::npos)
      << errors[0];
  EXPECT_TRUE(model_errors(kModel + kMoe + "  capacity_factor: 1.25\n  expert_load_factor: 0.5\n").empty());
  EXPECT_EQ(model_errors(kModel + kMoe + "  capacity_factor: -1\n").size(), 1u);
}

TEST(LoadModelMoe, MissingNestedKeyPointsAtTheMoeMapping) {
  EXPECT_EQ(model_errors(kModel + replaced(kMoe, "  num_experts: 8\n", "")),
            Lines{"model.yaml:11:3: moe.num_experts: required key is missing"});
}

TEST(LoadModelMoe, ValueErrors) {
  std::string moe = replaced(kMoe, "router_topk: 2", "router_topk: 9");
  moe = replaced(moe, "ffn_hidden_size: 512", "ffn_hidden_size: 0");
  moe = replaced(moe, "shared_expert_ffn_hidden_size: 256", "shared_expert_ffn_hidden_size: -1");
  moe = replaced(moe, "first_dense_layers: 1", "first_dense_layers: 4");
  EXPECT_EQ(model_errors(kModel + moe),
            (Lines{"model.yaml:12:16: moe.router_topk: must be at most num_experts (8), got 9",
                   "model.yaml:13:20: moe.ffn_hidden_size: must be positive, got 0",
                   "model.yaml:14:34: moe.shared_expert_ffn_hidden_size: must be in [0, 1000000000], "
                   "got -1",
                   // Every layer dense would not be a MoE model: at most num_layers - 1 = 3.
                   "model.yaml:15:23: moe.first_dense_layers: must be in [0, 3], got 4"}));
}

// FIXED (was a bug in sim/core/config_loader.cc, load_model_text): first_dense_layers is
// read as 64 bits and cast to int before its range check, so 2^32 loads as 0.
TEST(LoadModelMoe, HugeFirstDenseLayersIsRejected) {
  EXPECT_EQ(model_errors(kModel +
                         replaced(kMoe, "first_dense_layers: 1", "first_dense_layers: 4294967296")),
            Lines{"model.yaml:15:23: moe.first_dense_layers: must be in [0, 3], got 4294967296"});
}

// FIXED (was a bug in sim/core/config_loader.cc, load_model_text): with num_layers missing
// (placeholder 0) the range of first_dense_layers becomes [0, -1], so a valid
// 0 is reported too. And with num_layers: 2147483648 (reported as implausibly
// large, then cast to INT_MIN) `m.num_layers - 1` overflows int: undefined
// behaviour, reported by UBSan (tests/fuzz/regressions/model/moe-int-min-layers).
TEST(LoadModelMoe, MissingLayersDoNotBreakTheMoeRangeCheck) {
  EXPECT_EQ(model_errors(replaced(kModel, "num_layers: 4\n", "") +
                         replaced(kMoe, "first_dense_layers: 1", "first_dense_layers: 0")),
            Lines{"model.yaml:1:1: num_layers: required key is missing"});
}

TEST(LoadModelMoe, MoeMustBeAMapping) {
  EXPECT_EQ(model_errors(kModel + "moe: 8\n"),
            Lines{"model.yaml:10:6: moe: expected a mapping, got '8'"});
}

// ---------------------------------------------------------------- GPU

const std::string kGpu =
    "name: test-gpu\n"                                       // 1
    "peak_flops_per_s: {bf16: 312.0e+12, fp32: 19.5e+12}\n"  // 2
    "memory_bytes: 85899345920\n"                            // 3
    "memory_bandwidth_bytes_per_s: 2.039e+12\n"              // 4
    "sm_count: 108\n"                                        // 5
    "source: A100 datasheet\n";                              // 6

TEST(LoadGpu, GpuWithoutFp8Loads) {
  const GpuConfig g = load_gpu_text(kGpu, "gpu.yaml");
  EXPECT_EQ(g.name, "test-gpu");
  EXPECT_DOUBLE_EQ(g.peak_bf16_flops_per_s, 312e12);
  EXPECT_DOUBLE_EQ(g.peak_fp32_flops_per_s, 19.5e12);
  EXPECT_DOUBLE_EQ(g.peak_fp8_flops_per_s, 0);  // no key: no FP8 tensor cores
  EXPECT_EQ(g.memory_bytes, 85899345920);       // 80 GiB = 80·2^30
  EXPECT_DOUBLE_EQ(g.memory_bandwidth_bytes_per_s, 2.039e12);
  EXPECT_EQ(g.sm_count, 108);
  EXPECT_DOUBLE_EQ(g.compute_capability, 0);  // no key: not stated
  EXPECT_EQ(g.source, "A100 datasheet");
}

TEST(LoadGpu, ComputeCapabilityIsReadAndMustBePositive) {
  EXPECT_DOUBLE_EQ(
      load_gpu_text(replaced(kGpu, "sm_count: 108\n", "sm_count: 108\ncompute_capability: 8.0\n"), "gpu.yaml")
          .compute_capability,
      8.0);
  EXPECT_EQ(gpu_errors(replaced(kGpu, "sm_count: 108\n", "sm_count: 108\ncompute_capability: 0\n")),
            Lines{"gpu.yaml:6:21: compute_capability: must be positive, got 0"});
}

TEST(LoadGpu, Fp8PeakIsRead) {
  const GpuConfig g = load_gpu_text(
      replaced(kGpu, "fp32: 19.5e+12", "fp32: 19.5e+12, fp8: 1978.9e+12"), "gpu.yaml");
  EXPECT_DOUBLE_EQ(g.peak_fp8_flops_per_s, 1978.9e12);
}

TEST(LoadGpu, NestedPeakErrors) {
  EXPECT_EQ(gpu_errors(replaced(kGpu, "{bf16: 312.0e+12, fp32: 19.5e+12}",
                                "{fp16: 1, bf16: -1, fp8: 0, fp32: 19.5e+12}")),
            (Lines{"gpu.yaml:2:35: peak_flops_per_s.bf16: must be positive, got -1",
                   "gpu.yaml:2:44: peak_flops_per_s.fp8: must be positive, got 0",
                   "gpu.yaml:2:20: peak_flops_per_s.fp16: unknown key; accepted keys: bf16, fp8, "
                   "fp32"}));
}

// The missing mapping is reported once, not also each of its required children.
TEST(LoadGpu, MissingPeakIsReportedOnce) {
  EXPECT_EQ(gpu_errors(replaced(kGpu, "peak_flops_per_s: {bf16: 312.0e+12, fp32: 19.5e+12}\n", "")),
            Lines{"gpu.yaml:1:1: peak_flops_per_s: required key is missing"});
}

TEST(LoadGpu, WrongTypes) {
  EXPECT_EQ(gpu_errors(replaced(kGpu, "memory_bytes: 85899345920", "memory_bytes: 80GB")),
            Lines{"gpu.yaml:3:15: memory_bytes: expected an integer, got '80GB'"});
  EXPECT_EQ(gpu_errors(replaced(kGpu, "sm_count: 108", "sm_count: 1.5")),
            Lines{"gpu.yaml:5:11: sm_count: expected an integer, got '1.5'"});
  EXPECT_EQ(gpu_errors(replaced(kGpu, "{bf16: 312.0e+12, fp32: 19.5e+12}", "312.0e+12")),
            Lines{"gpu.yaml:2:19: peak_flops_per_s: expected a mapping, got '312.0e+12'"});
}

// FIXED (was a bug in sim/core/config_loader.cc, load_gpu_text): "peak_flops_per_s:" with no
// value is present (so not "missing"), null (so not a type error) and not a
// map (so its children are not read): the GPU loads with every peak 0.
TEST(LoadGpu, PeakWithoutValueIsAnError) {
  EXPECT_EQ(gpu_errors(replaced(kGpu, "peak_flops_per_s: {bf16: 312.0e+12, fp32: 19.5e+12}\n",
                                "peak_flops_per_s:\n"))
                .size(),
            1u);
}

// ---------------------------------------------------------------- cluster

const std::string kCluster =
    "name: test-cluster\n"                       // 1
    "gpu: test-gpu\n"                            // 2
    "gpus_per_node: 8\n"                         // 3
    "num_nodes: 4\n"                             // 4
    "intra_node_bandwidth_bytes_per_s: 300e9\n"  // 5
    "inter_node_bandwidth_bytes_per_s: 25e9\n"   // 6
    "intra_node_latency_s: 3e-6\n"               // 7
    "inter_node_latency_s: 6e-6\n"               // 8
    "source: DGX A100 datasheet\n";              // 9

TEST(LoadCluster, ClusterLoadsAndNamesItsGpu) {
  const ClusterFile f = load_cluster_text(kCluster, "cluster.yaml");
  EXPECT_EQ(f.gpu_name, "test-gpu");
  EXPECT_EQ(f.cluster.gpu.name, "");  // PresetCatalog resolves the GPU
  EXPECT_EQ(f.cluster.name, "test-cluster");
  EXPECT_EQ(f.cluster.gpus_per_node, 8);
  EXPECT_EQ(f.cluster.num_nodes, 4);
  EXPECT_EQ(f.cluster.total_gpus(), 32);
  EXPECT_DOUBLE_EQ(f.cluster.intra_node_bandwidth_bytes_per_s, 300e9);
  EXPECT_DOUBLE_EQ(f.cluster.inter_node_bandwidth_bytes_per_s, 25e9);
  EXPECT_DOUBLE_EQ(f.cluster.intra_node_latency_s, 3e-6);
  EXPECT_DOUBLE_EQ(f.cluster.inter_node_latency_s, 6e-6);
  EXPECT_EQ(f.cluster.source, "DGX A100 datasheet");
}

TEST(LoadCluster, SeveralProblemsAreReportedAtOnce) {
  std::string text = replaced(kCluster, "gpu: test-gpu\n", "");
  text = replaced(text, "gpus_per_node: 8", "gpus_per_node: 0");
  text = replaced(text, "inter_node_latency_s: 6e-6", "inter_node_latency_s: 0.01");
  text = replaced(text, "num_nodes: 4\n", "num_nodes: 4\nbandwidth_gbps: 100\n");
  EXPECT_EQ(cluster_errors(text),
            (Lines{"cluster.yaml:1:1: gpu: required key is missing",
                   "cluster.yaml:2:16: gpus_per_node: must be positive, got 0",
                   "cluster.yaml:8:23: inter_node_latency_s: must be in [0, 0.001], got 0.01",
                   "cluster.yaml:4:1: bandwidth_gbps: unknown key; accepted keys: name, gpu, "
                   "gpus_per_node, num_nodes, intra_node_bandwidth_bytes_per_s, "
                   "inter_node_bandwidth_bytes_per_s, intra_node_latency_s, "
                   "inter_node_latency_s, source"}));
}

TEST(LoadCluster, BandwidthWithUnitTextIsNotANumber) {
  EXPECT_EQ(cluster_errors(replaced(kCluster, "300e9", "300 GB/s")),
            Lines{"cluster.yaml:5:35: intra_node_bandwidth_bytes_per_s: expected a finite number, "
                  "got '300 GB/s'"});
}

TEST(LoadCluster, LatencyWithoutValueIsAnError) {
  EXPECT_EQ(
      cluster_errors(replaced(kCluster, "intra_node_latency_s: 3e-6", "intra_node_latency_s:")),
      Lines{"cluster.yaml:7:1: intra_node_latency_s: has no value; expected a finite number"});
}

// ---------------------------------------------------------------- cost profile

const std::string kProfile =
    "name: test-profile\n"                          // 1
    "gpu: test-gpu\n"                               // 2
    "gemm_efficiency: 0.77\n"                       // 3
    "fp8_gemm_efficiency: 0.6\n"                    // 4
    "gemm_tile_m: 128\n"                            // 5
    "gemm_tile_n: 256\n"                            // 6
    "gemm_k_half: 256\n"                            // 7
    "flash_attention_forward_efficiency: 0.7\n"     // 8
    "flash_attention_backward_efficiency: 0.6\n"    // 9
    "flash_attention_half_efficiency_tiles: 190\n"  // 10
    "sustained_compute_fraction: 0.9\n"             // 11
    "memory_efficiency: 0.9\n"                      // 12
    "kernel_overhead_s: 2.0e-6\n"                   // 13
    "nvlink_efficiency: 0.73\n"                     // 14
    "collective_launch_s: 26.0e-6\n"                // 15
    "network_efficiency: 0.9\n"                     // 16
    "source: made up for a test\n";                 // 17

TEST(LoadProfile, ProfileLoads) {
  const CostProfile p = load_profile_text(kProfile, "profile.yaml");
  EXPECT_EQ(p.name, "test-profile");
  EXPECT_EQ(p.gpu, "test-gpu");
  EXPECT_DOUBLE_EQ(p.gemm_efficiency, 0.77);
  EXPECT_DOUBLE_EQ(p.fp8_gemm_efficiency, 0.6);
  EXPECT_EQ(p.gemm_tile_m, 128);
  EXPECT_EQ(p.gemm_tile_n, 256);
  EXPECT_DOUBLE_EQ(p.gemm_k_half, 256);
  EXPECT_DOUBLE_EQ(p.flash_attention_forward_efficiency, 0.7);
  EXPECT_DOUBLE_EQ(p.flash_attention_backward_efficiency, 0.6);
  EXPECT_DOUBLE_EQ(p.flash_attention_half_efficiency_tiles, 190);
  EXPECT_DOUBLE_EQ(p.sustained_compute_fraction, 0.9);
  EXPECT_DOUBLE_EQ(p.memory_efficiency, 0.9);
  EXPECT_DOUBLE_EQ(p.kernel_overhead_s, 2e-6);
  EXPECT_DOUBLE_EQ(p.nvlink_efficiency, 0.73);
  EXPECT_DOUBLE_EQ(p.collective_launch_s, 26e-6);
  EXPECT_DOUBLE_EQ(p.network_efficiency, 0.9);
  EXPECT_EQ(p.source, "made up for a test");
}

TEST(LoadProfile, RangeAndMissingKeyErrors) {
  std::string text = replaced(kProfile, "gemm_efficiency: 0.77", "gemm_efficiency: 1.5");
  text = replaced(text, "gemm_tile_m: 128", "gemm_tile_m: 0");
  text = replaced(text, "kernel_overhead_s: 2.0e-6", "kernel_overhead_s: 1");
  text = replaced(text, "memory_efficiency: 0.9", "memory_efficiency: 0");
  text = replaced(text, "network_efficiency: 0.9\n", "");
  EXPECT_EQ(profile_errors(text),
            (Lines{"profile.yaml:3:18: gemm_efficiency: must be in [0.001, 1], got 1.5",
                   "profile.yaml:5:14: gemm_tile_m: must be positive, got 0",
                   "profile.yaml:12:20: memory_efficiency: must be in [0.001, 1], got 0",
                   "profile.yaml:13:20: kernel_overhead_s: must be in [0, 0.001], got 1",
                   "profile.yaml:1:1: network_efficiency: required key is missing"}));
}

TEST(LoadProfile, UnknownKey) {
  const Lines got = profile_errors(kProfile + "gemm_efficency: 0.8\n");
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].rfind("profile.yaml:18:1: gemm_efficency: unknown key; accepted keys: name, "
                         "gpu, gemm_efficiency, ",
                         0),
            0u)
      << got[0];
}

}  // namespace
}  // namespace sextant::sim

namespace sextant::sim {
namespace {

// --- As strict as JSON (issue 29, item 10) ---

TEST(LoadModelStrictness, AQuotedNumberIsAString) {
  EXPECT_EQ(model_errors(replaced(kModel, "hidden_size: 256", "hidden_size: \"4096\"")),
            Lines{"model.yaml:3:14: hidden_size: expected an integer, got the string \"4096\""});
  EXPECT_EQ(model_errors(kModel + "rotary_base: '10000'\n"),
            Lines{"model.yaml:10:14: rotary_base: expected a finite number, got the string \"10000\""});
  EXPECT_EQ(model_errors(kModel + "tie_embeddings: \"true\"\n"),
            Lines{"model.yaml:10:17: tie_embeddings: expected true or false, got the string \"true\""});
  // Every kind of config reads through StrictMap: a cluster too.
  EXPECT_EQ(cluster_errors(replaced(kCluster, "num_nodes: 4", "num_nodes: \"4\"")),
            Lines{"cluster.yaml:4:12: num_nodes: expected an integer, got the string \"4\""});
}

TEST(LoadModelStrictness, AnIntegerBeyond64BitsIsOutOfRange) {
  EXPECT_EQ(model_errors(replaced(kModel, "num_layers: 4", "num_layers: 99999999999999999999")),
            Lines{"model.yaml:2:13: num_layers: is out of range: 99999999999999999999 does not fit "
                  "in a 64-bit integer (accepted: -9223372036854775808 to 9223372036854775807)"});
  EXPECT_EQ(model_errors(replaced(kModel, "num_layers: 4", "num_layers: -99999999999999999999")),
            Lines{"model.yaml:2:13: num_layers: is out of range: -99999999999999999999 does not fit "
                  "in a 64-bit integer (accepted: -9223372036854775808 to 9223372036854775807)"});
}

TEST(LoadModelStrictness, ANulByteMeansNotAText) {
  // yaml-cpp alone says "unknown escape character" here.
  std::string text = kModel;
  text.insert(text.find("256") + 1, 1, '\0');  // line 3, after "hidden_size: 2"
  EXPECT_EQ(model_errors(text),
            Lines{"model.yaml:3:15: the file contains a NUL byte here: not a text file (a binary "
                  "file, or UTF-16 text?)"});
  EXPECT_EQ(cluster_errors(std::string("name: x\0", 8)),
            Lines{"cluster.yaml:1:8: the file contains a NUL byte here: not a text file (a binary "
                  "file, or UTF-16 text?)"});
}

}  // namespace
}  // namespace sextant::sim
