#include "sim/memory/runtime_memory.h"

#include <gtest/gtest.h>

#include "sim/memory/memory_model.h"
#include "tests/support/test_models.h"

namespace sextant::sim {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

ParallelLayout layout(int tp, int dp, int pp, int vpp = 1) {
  ParallelLayout l;
  l.tp = tp;
  l.dp = dp;
  l.pp = pp;
  l.vpp = vpp;
  return l;
}

// One connection on NVLink with P2P read: the receiver's 4 KiB header + LL
// 512 KiB + LL128 4,800 KiB = 5.19 MiB -> 6 MiB, the sender's 4 KiB header +
// Simple 4 MiB -> 6 MiB (2 MiB granules). Without read the receiver holds
// Simple too: 9.19 -> 10 MiB, the sender 4 KiB -> 2 MiB: 12 MiB either way.
TEST(NcclMemory, ConnectionAndCommunicatorBytes) {
  NcclMemorySettings n;
  EXPECT_DOUBLE_EQ(n.ll_buffer_bytes, 524288);
  EXPECT_DOUBLE_EQ(n.ll128_buffer_bytes, 4915200);
  EXPECT_DOUBLE_EQ(n.connection_bytes(), 12 * kMiB);
  n.p2p_read = false;
  EXPECT_DOUBLE_EQ(n.connection_bytes(), 12 * kMiB);
  // A larger NCCL_BUFFSIZE grows the sender's granules: 4 KiB + 8 MiB -> 10 MiB.
  n.p2p_read = true;
  n.simple_buffer_bytes = 8 * kMiB;
  EXPECT_DOUBLE_EQ(n.connection_bytes(), 16 * kMiB);
  // A communicator: 2 fixed granules + 3 per channel, 32 channel slots (two or
  // more ranks) or 64 channels (one rank): 196 and 388 MiB.
  const NcclMemorySettings d;
  EXPECT_DOUBLE_EQ(d.communicator_bytes(2), (2 + 3 * 32) * 2 * kMiB);
  EXPECT_DOUBLE_EQ(d.communicator_bytes(4), 196 * kMiB);
  EXPECT_DOUBLE_EQ(d.communicator_bytes(1), 388 * kMiB);
}

TEST(RuntimeMemory, OneGpuIsTheContextOnly) {
  const RuntimeMemory r = runtime_memory(layout(1, 1, 1), 0, {});
  EXPECT_DOUBLE_EQ(r.total(), 542 * kMiB);
  EXPECT_DOUBLE_EQ(r.nccl(), 0);
}

// dp=2, the run the process constant was fitted on (2 x H200, 3149.9 MiB
// measured outside the arena): context 542 + NCCL process 376 + world 196 +
// dp 196 + four one-rank groups 4 x 388 + dp's 24 ring channels x 12 = 3150 MiB.
TEST(RuntimeMemory, DataParallelOfTwo) {
  const RuntimeMemory r = runtime_memory(layout(1, 2, 1), 0, {true, false});
  EXPECT_DOUBLE_EQ(r.nccl_communicators, (196 + 196 + 4 * 388) * kMiB);
  EXPECT_DOUBLE_EQ(r.nccl_ring_buffers, 24 * 12 * kMiB);
  EXPECT_DOUBLE_EQ(r.nccl_p2p_buffers, 0);
  EXPECT_DOUBLE_EQ(r.total(), 3150 * kMiB);
  // tp=2 and dp=4 hold the same: one spanning group, four one-rank ones.
  EXPECT_DOUBLE_EQ(runtime_memory(layout(2, 1, 1), 0, {true, false}).total(), r.total());
  EXPECT_DOUBLE_EQ(runtime_memory(layout(1, 4, 1), 0, {true, false}).total(), r.total());
}

// pp=4, stage 0, tied embeddings (not fitted; measured 4078.0 MiB on 4 x H200):
// world 196, tp/cp/ep/dp one rank each 4 x 388, pp 196 and the embedding group
// {0, 3} 196; rings on pp and embedding 2 x 288; one send/recv peer 32 x 12 +
// 61 first use: 542 + 376 + 2140 + 576 + 445 = 4079 MiB. Interleaved, stage 0
// also exchanges with stage 3: one more peer, +384 MiB (measured 4461-4463).
TEST(RuntimeMemory, PipelineOfFour) {
  const RuntimeMemory first = runtime_memory(layout(1, 1, 4), 0, {true, false});
  EXPECT_DOUBLE_EQ(first.nccl_communicators, 2140 * kMiB);
  EXPECT_DOUBLE_EQ(first.nccl_ring_buffers, 576 * kMiB);
  EXPECT_DOUBLE_EQ(first.nccl_p2p_buffers, 445 * kMiB);
  EXPECT_DOUBLE_EQ(first.total(), 4079 * kMiB);
  EXPECT_DOUBLE_EQ(runtime_memory(layout(1, 1, 4, 2), 0, {true, false}).total(), 4463 * kMiB);
  // A middle stage: two peers, no embedding group: 4079 + 384 - 196 - 288.
  EXPECT_DOUBLE_EQ(runtime_memory(layout(1, 1, 4), 1, {true, false}).total(), (4079 + 384 - 484) * kMiB);
}

// A shared communicator is counted once: at pp=2 the embedding group is the pp
// group; at pp=4 it is a communicator of its own.
TEST(RuntimeMemory, SharedCommunicatorCountedOnce) {
  const RuntimeMemory pp2 = runtime_memory(layout(1, 1, 2), 0, {true, false});
  // world 196 + pp 196 + four one-rank groups: no embedding communicator.
  EXPECT_DOUBLE_EQ(pp2.nccl_communicators, (196 + 196 + 4 * 388) * kMiB);
  EXPECT_DOUBLE_EQ(pp2.nccl_ring_buffers, 288 * kMiB);
}

// The runtime memory enters the breakdown's total and the stage holdings.
TEST(RuntimeMemory, EntersThePeakMemory) {
  const ModelConfig m = testing::gpt3_175b();
  ParallelLayout l = layout(8, 4, 8);
  l.gbs = 64;
  const MemoryBreakdown peak = peak_memory_per_gpu(m, l);
  EXPECT_GT(peak.runtime.nccl(), 0);
  EXPECT_DOUBLE_EQ(peak.total(), peak.tensors() + peak.runtime.total());
  EXPECT_DOUBLE_EQ(peak_memory_per_gpu(m, layout(1, 1, 1)).runtime.total(), 542 * kMiB);
}

}  // namespace
}  // namespace sextant::sim
