// Strict loading of model, GPU, cluster and cost-profile YAML (STYLE.md #5).
//
// As ninja's parser tests do, every case asserts the exact text the user sees:
// "file:line:col: key: message", one line per problem. YAML comes from strings
// so these tests need no files; line and column are 1-based and point at the
// value (or, for a missing key, at the mapping that lacks it).
#include "sim/core/config_loader.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sim/core/config_error.h"

namespace sextant::sim {
namespace {

// Runs `load` and returns every diagnostic it throws, as the user reads them;
// empty when it loads. Also checks that what() is those lines joined.
template <typename Load>
std::vector<std::string> errors(Load&& load) {
  try {
    load();
  } catch (const ConfigError& e) {
    std::vector<std::string> out;
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

std::vector<std::string> model_errors(const std::string& text) {
  return errors([&] { load_model_text(text, "model.yaml"); });
}
std::vector<std::string> gpu_errors(const std::string& text) {
  return errors([&] { load_gpu_text(text, "gpu.yaml"); });
}
std::vector<std::string> cluster_errors(const std::string& text) {
  return errors([&] { load_cluster_text(text, "cluster.yaml"); });
}
std::vector<std::string> profile_errors(const std::string& text) {
  return errors([&] { load_profile_text(text, "profile.yaml"); });
}

using Lines = std::vector<std::string>;

// A valid dense model, one key per line (line numbers below count from here).
const char* const kModel =
    "name: tiny\n"                 // 1
    "num_layers: 4\n"              // 2
    "hidden_size: 256\n"           // 3
    "ffn_hidden_size: 1024\n"      // 4
    "num_attention_heads: 8\n"     // 5
    "vocab_size: 1000\n"           // 6
    "seq_length: 128\n"            // 7
    "activation: gelu\n"           // 8
    "normalization: layernorm\n";  // 9

const char* const kModelKeys =
    "name, num_layers, hidden_size, ffn_hidden_size, num_attention_heads, num_query_groups, "
    "kv_channels, vocab_size, seq_length, activation, normalization, tie_embeddings, "
    "position_embedding_type, add_bias_linear, hidden_dropout, attention_dropout, moe, source";

// kModel with `from` (a whole line, newline included) replaced by `to`.
std::string model_with(const std::string& from, const std::string& to) {
  std::string text = kModel;
  const std::size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

// ---------------------------------------------------------------- model

TEST(LoadModel, ValidModelLoadsWithDefaults) {
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
  EXPECT_FALSE(m.moe);
}

TEST(LoadModel, OptionalKeysAreRead) {
  const ModelConfig m = load_model_text(std::string(kModel) +
                                            "num_query_groups: 2\n"
                                            "kv_channels: 64\n"
                                            "activation_is_not_here: 0\n",
                                        "model.yaml");
  ADD_FAILURE() << "an unknown key must not load";
  (void)m;
}

TEST(LoadModel, GqaSwigluRopeModel) {
  const ModelConfig m = load_model_text(model_with("activation: gelu\n", "activation: swiglu\n") +
                                            "num_query_groups: 2\n"
                                            "kv_channels: 64\n"
                                            "normalization_is_fine: \n",
                                        "model.yaml");
  (void)m;
}

}  // namespace
}  // namespace sextant::sim
