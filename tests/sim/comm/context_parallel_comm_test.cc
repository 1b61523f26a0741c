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

}  // namespace
}  // namespace sextant::sim
