// The context-parallel exchange of one layer (sim/comm/parallel_comm.h):
// the ring's cp−1 point-to-point steps, or the all-gather variant's K/V
// all-gather and fp32 dK/dV reduce-scatter, as the engine runs it.
#include <gtest/gtest.h>

#include "sim/comm/collective_cost.h"
#include "sim/comm/group_placement.h"
#include "sim/comm/parallel_comm.h"
#include "tests/support/test_models.h"

namespace sextant::sim {
namespace {

TEST(ContextParallelComm, AllGatherMovesTheWholeSequencesKeysAndValues) {
  const ModelConfig m = testing::gpt3_175b();
  const ClusterConfig cluster = testing::dgx_a100();
  const LinkRates r{100e9, 25e9, 3e-6, 6e-6, 5e-6};
  ParallelLayout l;
  l.cp = 4;
  l.tp = 2;
  l.mbs = 1;
  const double local_tokens = static_cast<double>(m.seq_length) / l.cp;
  const double kv_elements = local_tokens * static_cast<double>(m.kv_width() + m.value_width()) / l.tp;
  const GroupPlacement group = place_group(l.cp, l.tp, cluster.gpus_per_node);

  l.cp_comm_type = CpCommType::kAllGather;
  const LayerComm gather = layer_comm(m, l, cluster, r, false);
  const double all_gather = all_gather_time_s(2.0 * kv_elements * l.cp, group, r);
  EXPECT_DOUBLE_EQ(gather.cp_forward_s, all_gather);
  EXPECT_DOUBLE_EQ(gather.cp_backward_s, all_gather + reduce_scatter_time_s(4.0 * kv_elements * l.cp, group, r));
  EXPECT_FALSE(gather.cp_overlaps_core);

  l.cp_comm_type = CpCommType::kP2p;
  const LayerComm ring = layer_comm(m, l, cluster, r, false);
  const double step = p2p_time_s(2.0 * kv_elements, group.crosses_nodes(), r);
  EXPECT_DOUBLE_EQ(ring.cp_forward_s, 3 * step);
  EXPECT_DOUBLE_EQ(ring.cp_backward_s, 6 * step);
  EXPECT_TRUE(ring.cp_overlaps_core);
}

// The engine's ring (LinkRates::engine_context_ring): forward as Megatron's,
// backward K/V cp−1 times in bf16 and each dK/dV accumulator cp hops in fp32.
// GPT-3 175B (kv width 12288 + 12288), seq 2048, tp 2, cp 4 in one DGX node:
// a rank holds 512 tokens, 512·24576/2 = 6,291,456 K/V elements.
TEST(ContextParallelComm, EngineRingCarriesFp32GradientsOneHopBehind) {
  const ModelConfig m = testing::gpt3_175b();
  const ClusterConfig cluster = testing::dgx_a100();
  LinkRates r{100e9, 25e9, 3e-6, 6e-6, 5e-6};
  r.engine_context_ring = true;
  ParallelLayout l;
  l.cp = 4;
  l.tp = 2;
  l.mbs = 1;
  const LayerComm ring = layer_comm(m, l, cluster, r, false);
  // [K | V] bf16: 12,582,912 B at 100e9 B/s + 3 us latency + 5 us launch.
  EXPECT_NEAR(ring.cp_kv_exchange_s, 133.82912e-6, 1e-12);
  // dK/dV fp32: 25,165,824 B.
  EXPECT_NEAR(ring.cp_gradient_exchange_s, 259.65824e-6, 1e-12);
  EXPECT_NEAR(ring.cp_forward_s, 3 * 133.82912e-6, 1e-12);
  EXPECT_NEAR(ring.cp_backward_s, 3 * 133.82912e-6 + 4 * 259.65824e-6, 1e-12);
  EXPECT_TRUE(ring.cp_overlaps_core);
  // Megatron-Core's ring moves no fp32: the same K/V exchange, dK/dV with it in bf16.
  r.engine_context_ring = false;
  const LayerComm megatron = layer_comm(m, l, cluster, r, false);
  EXPECT_DOUBLE_EQ(megatron.cp_kv_exchange_s, ring.cp_kv_exchange_s);
  EXPECT_EQ(megatron.cp_gradient_exchange_s, 0.0);
  EXPECT_NEAR(megatron.cp_backward_s, 6 * 133.82912e-6, 1e-12);
}

}  // namespace
}  // namespace sextant::sim
