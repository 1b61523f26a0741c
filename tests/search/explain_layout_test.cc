#include "search/explain_layout.h"

#include <gtest/gtest.h>

#include "sim/core/preset_catalog.h"

namespace sextant::search {
namespace {

class ExplainLayout : public ::testing::Test {
 protected:
  ExplainLayout() : catalog(SEXTANT_TEST_CONFIG_DIR) {
    model = catalog.model("gpt3-175b");
    cluster = catalog.cluster("dgx-a100");
    profile = catalog.profile("", cluster.gpu.name);
  }
  Explanation explain(const std::string& spec, long gpus) {
    return explain_layout(model, cluster, profile, gpus, sim::parse_layout(spec), {});
  }
  sim::PresetCatalog catalog;
  sim::ModelConfig model;
  sim::ClusterConfig cluster;
  sim::CostProfile profile;
};

// GPT-3 on 64 GPUs, tp=8 pp=8 dp=1, 4 sequences per micro-batch, nothing recomputed.
// Stage 0 holds p = 8 micro-batches of its 12 layers, each 34·s·b·h/t bytes
// (Korthikanti et al. 2022, sp, flash attention): 34·2048·4·12288/8·12·8 =
// 41.07e9, plus 8 embedding dropout masks s·b·h/t = 0.10e9 and the flash
// log-sum-exp 4·s·b·a/t·12·8 = 0.04e9: 41.21e9 bytes = 38.4 GiB. Full recompute
// or one sequence per micro-batch fits; pp=16 or tp=16 would need dp = 1/2.
TEST_F(ExplainLayout, TooBigSaysWhatAndWhatToTry) {
  const Explanation e = explain(
      "tp=8,pp=8,vpp=1,dp=1,mbs=4,gbs=64,sp=1,recompute=none,zero=0,overlap_grad_reduce=0,"
      "tp_comm_overlap=0",
      64);
  EXPECT_TRUE(e.valid);
  EXPECT_FALSE(e.fits);
  ASSERT_EQ(e.lines.size(), 2u);
  EXPECT_EQ(e.lines[0],
            "activations need 38.4 GiB on stage 0 (85.7 GiB in all); 76.0 GiB available "
            "(80.0 GiB less 5 % headroom)");
  EXPECT_EQ(e.lines[1], "try recompute=full or mbs=1");
}

TEST_F(ExplainLayout, InvalidListsEveryBrokenRule) {
  const Explanation e = explain("tp=7,pp=16,dp=12,mbs=1,gbs=1536", 1536);
  EXPECT_FALSE(e.valid);
  ASSERT_EQ(e.lines.size(), 3u);
  EXPECT_EQ(e.lines[0], "dp: tp·cp·pp·dp = 7·1·16·12 = 1344 must equal the GPU count (1536)");
  EXPECT_EQ(e.lines[1], "tp: num_attention_heads (96) must be a multiple of tp (7)");
  EXPECT_EQ(e.lines[2], "tp: ffn_hidden_size (49152) must be a multiple of tp (7)");
}

TEST_F(ExplainLayout, FittingLayoutSaysWhatLimitsIt) {
  const Explanation e = explain(
      "tp=8,pp=16,dp=12,mbs=1,gbs=1536,sp=1,recompute=selective,zero=1,overlap_grad_reduce=1,"
      "overlap_param_gather=1,tp_comm_overlap=0,vpp=1",
      1536);
  EXPECT_TRUE(e.valid);
  EXPECT_TRUE(e.fits);
  ASSERT_EQ(e.lines.size(), 3u);
  EXPECT_EQ(e.lines[0].rfind("fits: stage 0 needs ", 0), 0u) << e.lines[0];
  EXPECT_EQ(e.lines[2].rfind("limited by ", 0), 0u) << e.lines[2];
}

}  // namespace
}  // namespace sextant::search
