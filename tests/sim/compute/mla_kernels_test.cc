// Multi-head latent attention end to end on DeepSeek-V3 (configs/models/
// deepseek-v3.yaml): parameters against the paper's 671B / 37B, FLOPs per
// token, the kernel list's GEMM shapes and tensor-parallel sharding.
//
// DeepSeek-V3: h 7168, n 128 heads, d_c' 1536, d_c 512, d_nope 128, d_rope 64,
// d_v 128, 61 layers (3 dense, ffn 18432), 256 experts top-8 of 2048 + 1 shared
// of 2048, vocab 129280, untied.
#include "sim/compute/mla_kernels.h"

#include <gtest/gtest.h>

#include "sim/comm/parallel_comm.h"
#include "sim/compute/layer_kernels.h"
#include "sim/core/preset_catalog.h"
#include "sim/flops/model_flops.h"
#include "sim/memory/activation_memory.h"
#include "sim/memory/parameter_count.h"

namespace sextant::sim {
namespace {

ModelConfig deepseek_v3() { return PresetCatalog(SEXTANT_TEST_CONFIG_DIR).model("deepseek-v3"); }

TEST(MlaParameters, DeepSeekV3Has671BTotalAnd37BActive) {
  const ModelConfig m = deepseek_v3();
  const LayerParams dense = layer_params(m, false);
  // Split by heads: W^UQ 1536·128·192 + W^UKV 512·128·(128+128) + W^O 128·128·7168
  //   = 37,748,736 + 16,777,216 + 117,440,512 = 171,966,464.
  EXPECT_DOUBLE_EQ(dense.attention, 171'966'464.0);
  // Replicated: W^DQ 7168·1536 + its norm 1536 + W^DKV,W^KR 7168·576 + its norm 512.
  EXPECT_DOUBLE_EQ(dense.attention_replicated, 11'010'048.0 + 1536 + 4'128'768 + 512);
  // Total: 3 dense layers of 583,483,392, 58 MoE layers of 11,507,286,016
  // (256 + 1 experts of 3·7168·2048 = 44,040,192, router 7168·256), embedding
  // and output 2·129280·7168, final norm 7168 = 671,026,404,352 (paper: 671B).
  EXPECT_DOUBLE_EQ(total_params(m), 671'026'404'352.0);
  // Active: the MoE layers count 8 routed experts: 37,552,282,624 (paper: 37B;
  // 35.7B without the embedding and output layer).
  EXPECT_DOUBLE_EQ(active_params(m), 37'552'282'624.0);
}

TEST(MlaParameters, TensorParallelSplitsHeadsAndReplicatesDownProjections) {
  const ModelConfig m = deepseek_v3();
  ParallelLayout l;
  l.tp = 8;
  l.pp = 61;
  l.ep = 8;
  l.dp = 1;
  // A middle stage holds one MoE layer: (attention + shared expert)/8 + replicated
  // down projections and norms + the two norms + router; experts / (ep·etp).
  const LayerParams p = layer_params(m, true);
  const StageParams s = stage_params_per_gpu(m, l, 30);
  EXPECT_DOUBLE_EQ(s.dense, (171'966'464.0 + 44'040'192.0) / 8 + 15'140'864.0 + 2 * 7168.0 +
                                7168.0 * 256);
  EXPECT_DOUBLE_EQ(s.expert, p.experts / 8);
}

TEST(MlaFlops, DeepSeekV3PerToken) {
  const ModelConfig m = deepseek_v3();
  const LayerFlops f = layer_forward_flops(m, 1.0, true);
  // Projections: 2·(7168·1536 + 1536·128·192 + 7168·576 + 512·128·256) = 139,329,536.
  EXPECT_DOUBLE_EQ(f.qkv, 139'329'536.0);
  // Scores over s = 4096 keys (Megatron counting) with d_qk 192; values with d_v 128.
  EXPECT_DOUBLE_EQ(f.attention_scores, 2.0 * 4096 * 128 * 192);
  EXPECT_DOUBLE_EQ(f.attention_values, 2.0 * 4096 * 128 * 128);
  EXPECT_DOUBLE_EQ(f.projection, 2.0 * 128 * 128 * 7168);
  // Experts: 8 routed + 1 shared SwiGLU of 2048: 9·6·7168·2048; router 2·7168·256.
  EXPECT_DOUBLE_EQ(f.mlp, 9 * 6.0 * 7168 * 2048);
  EXPECT_DOUBLE_EQ(f.router, 2.0 * 7168 * 256);
  // A training step's model FLOPs per token: 3 x (3 dense layers of 1.5025e9,
  // 58 MoE layers of 1.5061e9, logits 2·7168·129280) = 2.8115e11 (6·37.5B =
  // 2.25e11 of it is the weights, the rest attention over 4096 keys).
  ParallelLayout l;
  l.gbs = 1;
  EXPECT_NEAR(step_flops(m, l).model_flops / 4096, 281'152'192'512.0, 1.0);
}

// Compute-bound rates with no shape effects: a GEMM's forward time is 2·m·n·k / 1e15.
DeviceRates flat_rates() {
  DeviceRates r;
  r.gemm_flops_per_s = r.bf16_gemm_flops_per_s = 1e15;
  r.attention_forward_flops_per_s = r.attention_backward_flops_per_s = 1e15;
  r.memory_bytes_per_s = 1e20;
  r.sm_count = 1;
  r.tile_m = r.tile_n = 1;
  return r;
}

TEST(MlaKernels, GemmShapesUnderTensorAndSequenceParallelism) {
  const ModelConfig m = deepseek_v3();
  ParallelLayout l;
  l.tp = 8;
  l.sp = true;
  l.mbs = 1;
  PassTime t;
  add_mla_projections(t, m, l, flat_rates());
  // T = 4096 tokens; the down projections run on this rank's 512 rows (sp),
  // the up projections on all 4096 rows and 16 of the 128 heads:
  //   W^DQ 512·7168·1536, W^UQ 4096·1536·(16·192), W^DKV 512·7168·576, W^UKV 4096·512·(16·256).
  const double macs = 512.0 * 7168 * 1536 + 4096.0 * 1536 * 16 * 192 + 512.0 * 7168 * 576 +
                      4096.0 * 512 * 16 * 256;
  EXPECT_NEAR(t.gemm_forward_s, 2 * macs / 1e15, 1e-15);
  // Without sp every rank repeats the down projections on all 4096 rows.
  l.sp = false;
  PassTime u;
  add_mla_projections(u, m, l, flat_rates());
  const double repeat = 4096.0 * 7168 * 1536 + 4096.0 * 7168 * 576 - 512.0 * 7168 * 1536 -
                        512.0 * 7168 * 576;
  EXPECT_NEAR(u.gemm_forward_s - t.gemm_forward_s, 2 * repeat / 1e15, 1e-15);
}

TEST(MlaKernels, AttentionCoreHasAsymmetricHeadsAndTheProjectionTakesValueHeads) {
  const ModelConfig m = deepseek_v3();
  ParallelLayout l;
  l.tp = 8;
  l.sp = true;
  const DeviceRates r = flat_rates();
  const PassTime t = megatron_layer_time(m, l, r, false);
  // Causal flash attention, 16 heads: 2·s²·(d_qk + d_v)/2 per head = 2·4096²·160·16.
  EXPECT_NEAR(t.attention_core_forward_s, 2.0 * 4096 * 4096 * 160 * 16 / 1e15, 1e-12);
  // The output projection reads 16·128 value channels: 4096·2048·7168 MACs;
  // attention's GEMMs = the MLA projections above + that.
  PassTime projections;
  add_mla_projections(projections, m, l, r);
  EXPECT_NEAR(t.attention_forward_s - t.attention_core_forward_s -
                  (projections.forward_s - projections.gemm_forward_s),
              projections.gemm_forward_s + 2.0 * 4096 * 2048 * 7168 / 1e15, 1e-9);
}

TEST(MlaComm, SequenceParallelGathersTheLatentsNotTheHiddenState) {
  const ModelConfig m = deepseek_v3();
  // 1536 + 512 + 64 channels enter the attention's TP region in place of 7168.
  EXPECT_DOUBLE_EQ(attention_tp_entry_width(m), 2112.0);
  ClusterConfig c;
  c.gpus_per_node = 8;
  const LinkRates links{100e9, 10e9, 0.0, 0.0, 0.0};
  ParallelLayout l;
  l.tp = 8;
  l.sp = true;
  const LayerComm comm = layer_comm(m, l, c, links, false);
  // Ring all-gather / reduce-scatter of B bytes over 8 ranks: 7/8·B at 100 GB/s.
  // MLP: gather and scatter of 2·4096·7168 bytes; attention: gather of 2·4096·2112, scatter of 2·4096·7168.
  const double full = 2.0 * 4096 * 7168 * 7 / 8 / 100e9;
  const double latent = 2.0 * 4096 * 2112 * 7 / 8 / 100e9;
  EXPECT_NEAR(comm.tp_forward_s, 3 * full + latent, 1e-12);
  EXPECT_NEAR(comm.tp_backward_s, comm.tp_forward_s, 1e-15);
}

TEST(MlaMemory, KeepsLatentsAndAsymmetricQkv) {
  ModelConfig m = deepseek_v3();
  ParallelLayout l;
  l.tp = 1;
  l.mbs = 1;
  // Dense layer, no tp, bf16, flash, no dropout (T = 4096, h = 7168):
  //   attention: norm input + QKV input 2·2·T·h; Q,K (128·192 each) and V (128·128):
  //   2·T·(24576 + 24576 + 16384); projection input 2·T·16384; log-sum-exp 4·T·128;
  //   latents: (2 + 2)·T·(1536 + 512);
  //   MLP: norm input 2·T·h; fc1 input 2·T·h, SwiGLU's 2·18432 outputs, fc2 input 18432 (x2 bytes).
  const double T = 4096, h = 7168, f = 18432;
  const double attention = 4 * T * h + 2 * T * 65536 + 2 * T * 16384 + 4 * T * 128 + 4 * T * 2048;
  const double mlp = 2 * T * h + 2 * T * h + 2 * T * 2 * f + 2 * T * f;
  EXPECT_DOUBLE_EQ(layer_activation_bytes(m, l, false, false), attention + mlp);
}

}  // namespace
}  // namespace sextant::sim
