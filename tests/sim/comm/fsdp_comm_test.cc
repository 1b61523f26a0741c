#include "sim/comm/fsdp_comm.h"

#include <gtest/gtest.h>

#include "sim/comm/data_parallel_volume.h"
#include "tests/support/test_models.h"

namespace sextant::sim {
namespace {

// 25 GB/s NIC, 6 µs per ring step across nodes, no launch cost: the arithmetic
// below is the ring's alone.
const LinkRates kRates{300e9, 25e9, 3e-6, 6e-6, 0.0};

ParallelLayout tp8_dp8_zero3(FsdpImplementation implementation) {
  ParallelLayout l;
  l.tp = 8;
  l.dp = 8;
  l.zero = 3;
  l.fsdp = implementation;
  return l;
}

TEST(FsdpBehaviour, EachImplementationAsItsSourceSays) {
  // Megatron-FSDP: gathers run ceil(5e8 / 2.7e7) = 19 units ahead, floor(1e9 / 2.7e7) = 37
  // reductions queue; one collective per unit; fp32 gradients under bf16.
  const FsdpBehaviour megatron = fsdp_behaviour(FsdpImplementation::kMegatronFsdp, 2.7e7,
                                                Precision::kBf16);
  EXPECT_EQ(megatron.prefetch_units, 19);
  EXPECT_EQ(megatron.reduce_queue_units, 37);
  EXPECT_EQ(megatron.gathers_per_unit, 1);
  EXPECT_EQ(megatron.gradient_bytes_per_param, 4.0);
  // A unit larger than both limits still prefetches and queues one.
  const FsdpBehaviour big = fsdp_behaviour(FsdpImplementation::kMegatronFsdp, 2e9,
                                           Precision::kBf16);
  EXPECT_EQ(big.prefetch_units, 1);
  EXPECT_EQ(big.reduce_queue_units, 1);
  // FSDP2: one unit ahead, one reduction in flight, whatever the size.
  const FsdpBehaviour fsdp2 = fsdp_behaviour(FsdpImplementation::kFsdp2, 2.7e7, Precision::kBf16);
  EXPECT_EQ(fsdp2.prefetch_units, 1);
  EXPECT_EQ(fsdp2.reduce_queue_units, 1);
  // DeepSpeed stage 3 (2021): synchronous fetches of 6 submodules, bf16 reductions.
  const FsdpBehaviour deepspeed = fsdp_behaviour(FsdpImplementation::kDeepSpeedZero3, 2.7e7,
                                                 Precision::kBf16);
  EXPECT_EQ(deepspeed.prefetch_units, 0);
  EXPECT_EQ(deepspeed.gathers_per_unit, 6);
  EXPECT_EQ(deepspeed.gradient_bytes_per_param, 2.0);
}

TEST(FsdpUnitComm, RingOverTheNetworkWhenTheGroupSpansNodes) {
  // dp=8 at stride tp=8: one rank per node, 8 nodes, rings at the NIC's 25 GB/s.
  const ClusterConfig cluster = testing::dgx_a100();
  const ParallelLayout l = tp8_dp8_zero3(FsdpImplementation::kFsdp2);
  const FsdpBehaviour b = fsdp_behaviour(l.fsdp, 1e8, l.precision);
  const FsdpUnitComm c = fsdp_unit_comm({1e8, 0.0}, b, l, cluster, kRates);
  // gather: 7/8 · 2 bytes · 1e8 / 25e9 + 7 steps · 6 µs = 7 ms + 42 µs
  EXPECT_DOUBLE_EQ(c.gather_s, 7.0 / 8 * 2e8 / 25e9 + 7 * 6e-6);
  // reduce-scatter of fp32 gradients: 7/8 · 4e8 / 25e9 + 42 µs = 14 ms + 42 µs
  EXPECT_DOUBLE_EQ(c.reduce_s, 7.0 / 8 * 4e8 / 25e9 + 7 * 6e-6);
  // DeepSpeed's 6 gathers move the same bytes and pay the ring latency 6 times.
  const ParallelLayout ds = tp8_dp8_zero3(FsdpImplementation::kDeepSpeedZero3);
  const FsdpUnitComm d = fsdp_unit_comm({1e8, 0.0}, fsdp_behaviour(ds.fsdp, 1e8, ds.precision),
                                        ds, cluster, kRates);
  EXPECT_DOUBLE_EQ(d.gather_s, 6 * (7.0 / 8 * (2e8 / 6) / 25e9 + 7 * 6e-6));
}

TEST(DataParallelVolume, ZeroThreeMovesThreeTimesTheWeightsPerMicroBatch) {
  // GPT-3 175B, tp=8 dp=8 pp=1, 4 micro-batches. Per GPU P parameters, E of them
  // the embedding: ZeRO-1 sends 7/8·(4P + 2P); ZeRO-3 7/8·4·(4P + 2·2P − 2E).
  const ModelConfig m = testing::gpt3_175b();
  ParallelLayout l = tp8_dp8_zero3(FsdpImplementation::kMegatronFsdp);
  l.mbs = 1;
  l.gbs = 32;
  ParallelLayout zero1 = l;
  zero1.zero = 1;
  const double zero1_bytes = data_parallel_bytes_per_step(m, zero1);
  const double zero3_bytes = data_parallel_bytes_per_step(m, l);
  const double p = zero1_bytes / (7.0 / 8 * 6.0);
  const double e = 51200.0 * 12288 / 8;
  EXPECT_NEAR(zero3_bytes, 7.0 / 8 * 4 * (4 * p + 4 * p - 2 * e), 1e-6 * zero3_bytes);
  EXPECT_GT(zero3_bytes, 5 * zero1_bytes);
}

}  // namespace
}  // namespace sextant::sim
