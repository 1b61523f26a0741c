// check_layout: Megatron-LM's divisibility and compatibility rules, each
// reported verbatim with the values involved; is_valid_layout must agree.
#include "sim/core/layout_check.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace sextant::sim {
namespace {

using Lines = std::vector<std::string>;

// A small dense model: 8 layers, 16 heads of 64 (hidden 1024), ffn 4096.
ModelConfig dense_model() {
  ModelConfig m;
  m.name = "dense-test";
  m.num_layers = 8;
  m.hidden_size = 1024;
  m.ffn_hidden_size = 4096;
  m.num_attention_heads = 16;
  m.num_query_groups = 16;
  m.kv_channels = 64;
  m.vocab_size = 32000;
  m.seq_length = 2048;
  return m;
}

// The same with 8 experts of width 2048, top-2.
ModelConfig moe_model() {
  ModelConfig m = dense_model();
  m.name = "moe-test";
  m.moe = MoeConfig{8, 2, 2048, 0, 0};
  return m;
}

GpuConfig gpu(const std::string& name, double fp8_flops_per_s) {
  GpuConfig g;
  g.name = name;
  g.peak_bf16_flops_per_s = 312e12;
  g.peak_fp8_flops_per_s = fp8_flops_per_s;
  g.peak_fp32_flops_per_s = 19.5e12;
  g.memory_bytes = 80LL << 30;
  g.memory_bandwidth_bytes_per_s = 2.039e12;
  g.sm_count = 108;
  return g;
}

// 4 nodes of 8 GPUs = 32 GPUs; A100s have no FP8 tensor cores.
ClusterConfig cluster(GpuConfig g = gpu("a100-sxm-80gb", 0)) {
  ClusterConfig c;
  c.name = "test-cluster";
  c.gpu = std::move(g);
  c.gpus_per_node = 8;
  c.num_nodes = 4;
  c.intra_node_bandwidth_bytes_per_s = 300e9;
  c.inter_node_bandwidth_bytes_per_s = 25e9;
  c.intra_node_latency_s = 3e-6;
  c.inter_node_latency_s = 6e-6;
  return c;
}

// tp=2 · pp=2 · dp=2 = 8 GPUs, 16 sequences in micro-batches of 1, distributed optimizer.
ParallelLayout valid_layout() {
  ParallelLayout l;
  l.tp = 2;
  l.pp = 2;
  l.dp = 2;
  l.mbs = 1;
  l.gbs = 16;
  l.sp = true;
  l.zero = 1;
  return l;
}

// check_layout's diagnostics as the user reads them; also checks is_valid_layout agrees.
Lines broken(const ModelConfig& m, const ParallelLayout& l, long gpus,
             const ClusterConfig& c = cluster()) {
  Lines out;
  for (const Diagnostic& d : check_layout(m, c, gpus, l)) out.push_back(d.to_string());
  EXPECT_EQ(is_valid_layout(m, c, gpus, l), out.empty()) << l.to_spec();
  return out;
}

TEST(CheckLayout, ValidDenseLayout) {
  EXPECT_EQ(broken(dense_model(), valid_layout(), 8), Lines{});
}

TEST(CheckLayout, ValidMoeLayoutWithParallelFolding) {
  ParallelLayout l = valid_layout();
  l.ep = 2;
  l.etp = 2;  // ep·etp = 4 divides tp·cp·dp = 2·1·2
  EXPECT_EQ(broken(moe_model(), l, 8), Lines{});
}

TEST(CheckLayout, GpuCountMustBeTheProductOfTheParallelSizes) {
  EXPECT_EQ(broken(dense_model(), valid_layout(), 16),
            Lines{"--layout: dp: tp·cp·pp·dp = 2·1·2·2 = 8 must equal the GPU count (16)"});
}

TEST(CheckLayout, MoreGpusThanTheClusterHas) {
  ParallelLayout l = valid_layout();
  l.dp = 16;  // 2·1·2·16 = 64 > 4·8
  l.gbs = 32;
  EXPECT_EQ(broken(dense_model(), l, 64),
            Lines{"--layout: gpus: cluster 'test-cluster' has 32 GPUs, asked for 64"});
}

TEST(CheckLayout, HeadsMustBeAMultipleOfTp) {
  ParallelLayout l = valid_layout();
  l.tp = 32;  // 4096 % 32 == 0, only the heads break
  l.pp = 1;
  l.dp = 1;
  EXPECT_EQ(broken(dense_model(), l, 32),
            Lines{"--layout: tp: num_attention_heads (16) must be a multiple of tp (32)"});
}

TEST(CheckLayout, QueryGroupsMustBeAMultipleOfTp) {
  ModelConfig m = dense_model();
  m.num_query_groups = 4;  // GQA: 16 heads in 4 groups
  ParallelLayout l = valid_layout();
  l.tp = 8;
  l.pp = 1;
  l.dp = 1;
  EXPECT_EQ(broken(m, l, 8),
            Lines{"--layout: tp: num_query_groups (4) must be a multiple of tp (8)"});
}

TEST(CheckLayout, FfnMustBeAMultipleOfTp) {
  ModelConfig m = dense_model();
  m.ffn_hidden_size = 4100;
  ParallelLayout l = valid_layout();
  l.tp = 8;
  l.pp = 1;
  l.dp = 1;
  EXPECT_EQ(broken(m, l, 8),
            Lines{"--layout: tp: ffn_hidden_size (4100) must be a multiple of tp (8)"});
}

TEST(CheckLayout, LayersMustBeAMultipleOfPpTimesVpp) {
  ParallelLayout l = valid_layout();
  l.pp = 3;  // 8 % 3 != 0
  l.dp = 1;
  EXPECT_EQ(broken(dense_model(), l, 6),
            Lines{"--layout: pp: num_layers (8) must be a multiple of pp·vpp (3·1 = 3), or give an uneven split: first_stage_layers, last_stage_layers, "
                 "embedding_in_split, loss_in_split or pp_layout"});
  // 8 layers over pp=2 and vpp=8 chunks would need 16.
  l = valid_layout();
  l.vpp = 8;
  l.schedule = Schedule::kInterleaved;
  EXPECT_EQ(broken(dense_model(), l, 8),
            Lines{"--layout: pp: num_layers (8) must be a multiple of pp·vpp (2·8 = 16), or give an uneven split: first_stage_layers, last_stage_layers, "
                 "embedding_in_split, loss_in_split or pp_layout"});
}

TEST(CheckLayout, GlobalBatchMustBeAMultipleOfMbsTimesDp) {
  ParallelLayout l = valid_layout();
  l.mbs = 2;
  l.gbs = 10;  // 10 % (2·2) != 0
  EXPECT_EQ(broken(dense_model(), l, 8),
            Lines{"--layout: gbs: gbs (10) must be a multiple of mbs·dp (2·2)"});
}

TEST(CheckLayout, VppNeedsTheInterleavedSchedule) {
  ParallelLayout l = valid_layout();
  l.vpp = 2;
  EXPECT_EQ(broken(dense_model(), l, 8),
            Lines{"--layout: vpp: vpp=2 needs schedule=1f1b-interleaved, got schedule=1f1b"});
  l.schedule = Schedule::kGpipe;
  EXPECT_EQ(broken(dense_model(), l, 8),
            Lines{"--layout: vpp: vpp=2 needs schedule=1f1b-interleaved, got schedule=gpipe"});
  l.schedule = Schedule::kInterleaved;
  EXPECT_EQ(broken(dense_model(), l, 8), Lines{});
}

TEST(CheckLayout, InterleavedNeedsTwoStagesAndTwoChunks) {
  ParallelLayout l = valid_layout();
  l.schedule = Schedule::kInterleaved;  // vpp = 1
  EXPECT_EQ(broken(dense_model(), l, 8),
            Lines{"--layout: schedule: 1f1b-interleaved needs pp >= 2 and vpp >= 2, got pp=2, "
                  "vpp=1"});
}

TEST(CheckLayout, InterleavedNeedsMicroBatchesInGroupsOfPp) {
  // tp=1 · pp=4 · dp=2 = 8 GPUs; 12 / (1·2) = 6 micro-batches, not a multiple of 4.
  ParallelLayout l = valid_layout();
  l.tp = 1;
  l.sp = false;
  l.pp = 4;
  l.vpp = 2;
  l.schedule = Schedule::kInterleaved;
  l.gbs = 12;
  EXPECT_EQ(broken(dense_model(), l, 8),
            Lines{"--layout: schedule: 1f1b-interleaved needs the micro-batch count "
                  "(gbs/(mbs·dp) = 6) to be a multiple of pp (4)"});
  l.gbs = 16;  // 8 micro-batches
  EXPECT_EQ(broken(dense_model(), l, 8), Lines{});
}

TEST(CheckLayout, ContextParallelNeedsTwoChunksPerRank) {
  ModelConfig m = dense_model();
  m.seq_length = 2050;  // 2050 % (2·2) != 0
  ParallelLayout l = valid_layout();
  l.cp = 2;
  l.dp = 1;
  EXPECT_EQ(broken(m, l, 8),
            Lines{"--layout: cp: seq_length (2050) must be a multiple of 2·cp (2·2)"});
}

TEST(CheckLayout, ExpertsMustBeAMultipleOfEp) {
  ParallelLayout l = valid_layout();
  l.tp = 1;
  l.sp = false;
  l.pp = 1;
  l.dp = 6;  // ep·etp = 3 divides tp·cp·dp = 6
  l.ep = 3;
  l.gbs = 12;
  EXPECT_EQ(broken(moe_model(), l, 6),
            Lines{"--layout: ep: num_experts (8) must be a multiple of ep (3)"});
}

TEST(CheckLayout, ExpertGroupMustDivideTheDenseRanks) {
  ParallelLayout l = valid_layout();
  l.ep = 8;  // 8·1 does not divide 2·1·2
  EXPECT_EQ(broken(moe_model(), l, 8),
            Lines{"--layout: ep: ep·etp (8·1) must divide tp·cp·dp (4)"});
}

TEST(CheckLayout, ExpertWidthMustBeAMultipleOfEtp) {
  ModelConfig m = moe_model();
  m.moe->ffn_hidden_size = 2049;
  ParallelLayout l = valid_layout();
  l.etp = 2;
  EXPECT_EQ(broken(m, l, 8),
            Lines{"--layout: etp: moe.ffn_hidden_size (2049) must be a multiple of etp (2)"});
}

TEST(CheckLayout, ExpertParallelismOnADenseModel) {
  ParallelLayout l = valid_layout();
  l.ep = 2;
  EXPECT_EQ(broken(dense_model(), l, 8),
            Lines{"--layout: ep: model 'dense-test' has no experts; ep and etp must be 1, got "
                  "ep=2, etp=1"});
  l.ep = 1;
  l.etp = 2;
  EXPECT_EQ(broken(dense_model(), l, 8),
            Lines{"--layout: ep: model 'dense-test' has no experts; ep and etp must be 1, got "
                  "ep=1, etp=2"});
}

TEST(CheckLayout, Fp8NeedsFp8TensorCores) {
  ParallelLayout l = valid_layout();
  l.precision = Precision::kFp8;
  EXPECT_EQ(broken(dense_model(), l, 8),
            Lines{"--layout: precision: GPU 'a100-sxm-80gb' has no FP8 tensor cores; accepted: "
                  "bf16, fp16"});
  EXPECT_EQ(broken(dense_model(), l, 8, cluster(gpu("h100-sxm-80gb", 1978.9e12))), Lines{});
}

TEST(CheckLayout, ZeroTwoAndThreeNeedNoPipeline) {
  ParallelLayout l = valid_layout();
  l.zero = 2;
  EXPECT_EQ(broken(dense_model(), l, 8),
            Lines{"--layout: zero: zero=2 needs pp=1: sharded gradients or parameters would be "
                  "re-gathered for every micro-batch (DeepSpeed forbids ZeRO-2/3 with pipeline "
                  "parallelism)"});
  l.zero = 3;
  l.pp = 1;
  l.dp = 4;
  EXPECT_EQ(broken(dense_model(), l, 8), Lines{});
}

TEST(CheckLayout, OverlapParamGatherNeedsTheDistributedOptimizer) {
  ParallelLayout l = valid_layout();
  l.zero = 0;
  l.overlap_param_gather = true;
  EXPECT_EQ(broken(dense_model(), l, 8),
            Lines{"--layout: overlap_param_gather: needs the distributed optimizer (zero >= 1)"});
  l.overlap_param_gather = false;
  EXPECT_EQ(broken(dense_model(), l, 8), Lines{});
}

TEST(CheckLayout, TpCommOverlapNeedsSequenceParallelism) {
  ParallelLayout l = valid_layout();
  l.tp_comm_overlap = true;
  l.sp = false;
  EXPECT_EQ(broken(dense_model(), l, 8),
            Lines{"--layout: tp_comm_overlap: needs sp=1 (Megatron overlaps the "
                  "sequence-parallel all-gather and reduce-scatter)"});
  l.sp = true;
  EXPECT_EQ(broken(dense_model(), l, 8), Lines{});
}

TEST(CheckLayout, EveryBrokenRuleIsReported) {
  ParallelLayout l = valid_layout();
  l.tp = 3;   // heads and ffn
  l.vpp = 3;  // layers, and the schedule is not interleaved
  l.gbs = 15;
  l.ep = 2;  // dense model
  l.precision = Precision::kFp8;
  EXPECT_EQ(broken(dense_model(), l, 8),
            (Lines{"--layout: dp: tp·cp·pp·dp = 3·1·2·2 = 12 must equal the GPU count (8)",
                   "--layout: tp: num_attention_heads (16) must be a multiple of tp (3)",
                   "--layout: tp: ffn_hidden_size (4096) must be a multiple of tp (3)",
                   "--layout: pp: num_layers (8) must be a multiple of pp·vpp (2·3 = 6), or give an uneven split: first_stage_layers, last_stage_layers, "
                 "embedding_in_split, loss_in_split or pp_layout",
                   "--layout: gbs: gbs (15) must be a multiple of mbs·dp (1·2)",
                   "--layout: vpp: vpp=3 needs schedule=1f1b-interleaved, got schedule=1f1b",
                   "--layout: ep: model 'dense-test' has no experts; ep and etp must be 1, got "
                   "ep=2, etp=1",
                   "--layout: precision: GPU 'a100-sxm-80gb' has no FP8 tensor cores; accepted: "
                   "bf16, fp16"}));
}

// FIXED (was a bug in sim/core/layout_check.cc, run_rules): products of knobs are computed in
// int, so parse_layout's largest values overflow them. mbs=65536,dp=65536 gives
// mbs·dp = 2^32, which wraps to 0 and `gbs % (mbs·dp)` divides by zero (SIGFPE;
// `sextant simulate --gpus 8 --layout tp=1,pp=1,dp=65536,mbs=65536,gbs=8` dies
// with exit 136). Expected: diagnostics, as for any other impossible layout.
TEST(CheckLayout, HugeKnobsAreReportedNotDividedByZero) {
  ParallelLayout l = valid_layout();
  l.tp = 1;
  l.pp = 1;
  l.dp = 65536;
  l.mbs = 65536;
  l.gbs = 8;
  EXPECT_FALSE(broken(dense_model(), l, 8).empty());
}

}  // namespace
}  // namespace sextant::sim

namespace sextant::sim {
namespace {

TEST(CheckLayout, MoeAllToAllOverlapNeedsCombinedOneFOneB) {
  ParallelLayout l = valid_layout();  // tp=2 pp=2 dp=2, 1F1B
  l.ep = 2;
  l.moe_a2a_overlap = true;
  EXPECT_EQ(broken(moe_model(), l, 8),
            Lines{"--layout: moe_a2a_overlap: needs pp=1 or schedule=1f1b-interleaved "
                  "(Megatron-Core's combined 1F1B), got pp=2 with schedule=1f1b"});
  l.schedule = Schedule::kInterleaved;
  l.vpp = 2;
  EXPECT_EQ(broken(moe_model(), l, 8), Lines{});
  l.recompute = Recompute::kFull;
  l.moe_shared_expert_overlap = true;
  EXPECT_EQ(broken(moe_model(), l, 8),
            (Lines{"--layout: moe_a2a_overlap: does not run with recompute=full (accepted: none, "
                   "selective)",
                   "--layout: moe_shared_expert_overlap: cannot be combined with moe_a2a_overlap "
                   "(Megatron-Core refuses both)",
                   "--layout: moe_shared_expert_overlap: needs a MoE model with a shared expert "
                   "and ep > 1"}));
  l = valid_layout();
  l.moe_a2a_overlap = true;
  l.pp = 1;
  l.dp = 4;
  EXPECT_EQ(broken(dense_model(), l, 8),
            Lines{"--layout: moe_a2a_overlap: needs a MoE model and ep > 1 (it hides the "
                  "expert-parallel all-to-all)"});
}

TEST(ParseLayout, MoeOverlapKnobsRoundTrip) {
  const PartialLayout p = parse_layout("moe_a2a_overlap=1,moe_shared_expert_overlap=0");
  EXPECT_EQ(p.moe_a2a_overlap, true);
  EXPECT_EQ(p.moe_shared_expert_overlap, false);
  ParallelLayout l;
  EXPECT_EQ(l.to_spec().find("moe_"), std::string::npos);  // off: not written
  l.moe_a2a_overlap = true;
  EXPECT_NE(l.to_spec().find(",moe_a2a_overlap=1"), std::string::npos);
  EXPECT_EQ(parse_layout(l.to_spec()).moe_a2a_overlap, true);
}

}  // namespace
}  // namespace sextant::sim
