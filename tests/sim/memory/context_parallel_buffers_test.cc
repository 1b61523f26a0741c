// The cp attention core's shared buffers (sim/memory/context_parallel_buffers.h),
// counted by hand for Llama 3.2 1B (32 heads, 8 key/value heads of 64: GQA at
// head_dim 64, whose workspace keeps room for K and V expanded to every query
// head), 32768 tokens, cp = 4, mbs 1:
// c = 4096, E = 32768·8·64 = 16,777,216, q width 2048, kv width 512.
#include <gtest/gtest.h>

#include "sim/core/preset_catalog.h"
#include "sim/memory/context_parallel_buffers.h"
#include "sim/memory/memory_model.h"

namespace sextant::sim {
namespace {

ParallelLayout cp4(CpCommType type) {
  ParallelLayout l;
  l.cp = 4;
  l.mbs = 1;
  l.gbs = 4;
  l.cp_comm_type = type;
  return l;
}

TEST(ContextParallelBuffers, AllGatherCoreHolds22EAndItsWorkspace) {
  const PresetCatalog catalog{SEXTANT_TEST_CONFIG_DIR};
  ModelConfig m = catalog.model("llama3.2-1b");
  m.seq_length = 32768;
  // 22·E = 369,098,752; flash workspace of c queries: fp32 dQ and delta
  // 4·(4096·2048 + 32·4096) = 34,078,720, and K, V, dK, dV expanded to 32
  // heads over S = 32768 keys, 4·2·32768·2048 = 536,870,912.
  EXPECT_DOUBLE_EQ(context_parallel_core_bytes(m, cp4(CpCommType::kAllGather)),
                   369098752.0 + 34078720.0 + 536870912.0);
}

TEST(ContextParallelBuffers, RingCoreHoldsItsReceiveBuffersAndAccumulators) {
  const PresetCatalog catalog{SEXTANT_TEST_CONFIG_DIR};
  ModelConfig m = catalog.model("llama3.2-1b");
  m.seq_length = 32768;
  // A [K | V] block is 2·8192·512 = 8,388,608 elements.
  const double receive = 2 * 2 * 8388608.0;             // two bf16 receive buffers
  const double out = 4 * 8192 * 2048.0;                 // fp32 out accumulator
  const double partial = 2 * 4096 * 2048.0 + 4 * 32 * 4096.0;  // bf16 partial out, its LSE
  const double dq = 4 * 8192 * 2048.0;                  // fp32 dQ
  const double travelling = 2 * 4 * 8388608.0;          // two fp32 dK/dV accumulators
  const double scratch = 2 * 2 * 8192 * 512.0 + 2 * 4096 * 2048.0;  // bf16 partial dK/dV, dQ
  const double workspace = 34078720.0 + 4 * 2 * 8192 * 2048.0;     // keys: 2c
  EXPECT_DOUBLE_EQ(context_parallel_core_bytes(m, cp4(CpCommType::kP2p)),
                   receive + out + partial + dq + travelling + scratch + workspace);
  EXPECT_DOUBLE_EQ(receive + out + partial + dq + travelling + scratch + workspace, 454033408.0);
  // Once per GPU, in `other`, whatever the layers and micro-batches.
  const ParallelLayout l = cp4(CpCommType::kP2p);
  EXPECT_DOUBLE_EQ(peak_memory_per_gpu(m, l).other, 454033408.0);
  ParallelLayout no_cp = l;
  no_cp.cp = 1;
  EXPECT_EQ(context_parallel_core_bytes(m, no_cp), 0.0);
}

}  // namespace
}  // namespace sextant::sim
