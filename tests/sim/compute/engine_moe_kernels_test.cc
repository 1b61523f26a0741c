// The engine's MoE block (sim/compute/engine_moe_kernels.cc) costed from the
// fixture profile tests/data/profiles/engine-measured-tiny.yaml, whose tables
// follow one rate each: linear forward 2·T·in·out / 600e12 s (input gradient
// 1.05x, weight gradient 1.10x), element-wise bytes / 2.8e12 s, each measured
// kernel plus the graph's 1.5 us gap; the host launches a kernel in 4 us
// (overheads.kernel_launch_s).
#include "sim/compute/engine_moe_kernels.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "sim/compute/device_rates.h"
#include "sim/compute/grouped_gemm_time.h"
#include "sim/compute/kernel_costs.h"
#include "sim/compute/layer_kernels.h"
#include "sim/core/config_loader.h"
#include "sim/core/preset_catalog.h"
#include "sim/core/transformer_shape.h"
#include "tests/sim/compute/engine_profile_fixture.h"

namespace sextant::sim {
namespace {

constexpr double kGap = 1.5e-6;
constexpr double kHostLaunch = 4e-6;
// Kernels with no table (the routing kernels, the staging add) move their bytes
// at the profile's achieved HBM rate, 0.84 x 3.35e12 B/s.
constexpr double kHbm = 0.84 * 3.35e12;

using Fixture = test_fixtures::EngineProfileFixture;
using test_fixtures::one_gpu;

// The engine's choice (TransformerShape::expert_gemms_in_loop): the loop when an
// expert's fc1 takes the GPU longer at 500 TFLOP/s than the host's 10.7 us
// launch, i.e. above 5.35 GFLOP per expert.
TEST(EngineMoeKernels, BackendByTheFlopsOfAnExpertsProduct) {
  const Fixture f;
  const ModelConfig mixtral = f.catalog.model("moe-mixtral-tiny");
  const ModelConfig fine = f.catalog.model("moe-fine-tiny");
  // 8 experts, 1,024 rows x 1,024 x 7,168: 15 GFLOP per expert.
  EXPECT_EQ(engine_expert_gemm_backend(transformer_shape_of(mixtral, one_gpu(2))), ExpertGemmBackend::kCublasLtLoop);
  // 512 rows: 7.5 GFLOP; no tokens at all: nothing to keep the GPU busy.
  EXPECT_EQ(engine_expert_gemm_backend(transformer_shape_of(mixtral, one_gpu(1))), ExpertGemmBackend::kCublasLtLoop);
  EXPECT_EQ(engine_expert_gemm_backend(transformer_shape_of(mixtral, one_gpu(0))), ExpertGemmBackend::kCublasGrouped);
  // 128 experts, 512 rows x 512 x 384: 0.2 GFLOP per expert, even at mbs 16 (3.2 GFLOP).
  EXPECT_EQ(engine_expert_gemm_backend(transformer_shape_of(fine, one_gpu(4))), ExpertGemmBackend::kCublasGrouped);
  EXPECT_EQ(engine_expert_gemm_backend(transformer_shape_of(fine, one_gpu(16))), ExpertGemmBackend::kCublasGrouped);
}

// moe-mixtral-tiny at mbs 4: 8192 tokens x top-2 over 8 experts = 2048 rows each,
// the loop backend: fc1 (2048, 1024) -> (2048, 7168) is 8 products from the table.
TEST(EngineMoeKernels, LoopBackendIsExpertsTimesOneTableGemm) {
  const Fixture f;
  const DeviceRates r = f.rates();
  const ExpertLinearTimes fc1 = engine_expert_linear_times(ExpertGemmBackend::kCublasLtLoop, 2048, 1024, 7168, 8, r);
  EXPECT_EQ(fc1.backend, ExpertGemmBackend::kCublasLtLoop);
  const LinearTimes one = linear_times(2048, 1024, 7168, 1, r);
  EXPECT_DOUBLE_EQ(fc1.gpu.forward_s, 8 * one.forward_s);
  EXPECT_DOUBLE_EQ(fc1.gpu.input_gradient_s, 8 * one.input_gradient_s);
  EXPECT_DOUBLE_EQ(fc1.gpu.weight_gradient_s, 8 * one.weight_gradient_s);
  // The table's rate: 8 x (2·2048·1024·7168 / 600e12 + 1.5 us) = 8 x 51.6 us.
  EXPECT_NEAR(fc1.gpu.forward_s, 8 * (2.0 * 2048 * 1024 * 7168 / 600e12 + kGap), 1e-9);
  // The host issues 8 cuBLASLt products at 10.7 us each (fitted on
  // reports/measurements/2026-11-27-h100-moe-kernels).
  EXPECT_NEAR(fc1.host.forward_s, 8 * 10.7e-6, 1e-15);
}

// moe-fine-tiny at mbs 1: 2048 tokens x top-8 over 128 experts = 128 rows each,
// below the loop's 256: cuBLAS's grouped GEMM, one CUTLASS kernel per product
// (reports/measurements/2026-11-27-h100-moe-ncu): tiles of 64 rows x 128 output
// columns (forward, input gradient) or 128 x 128 of the weights (weight gradient),
// in waves over the SMs, each tile at 400/(0.89·989.4) of the profile's GEMM rate
// times k/(k + 256), plus 8 us (6 us) a call.
TEST(EngineMoeKernels, FineGrainedShapeRunsTheGroupedBackend) {
  const Fixture f;
  const DeviceRates r = f.rates();
  const ModelConfig m = f.catalog.model("moe-fine-tiny");
  const TransformerShape s = transformer_shape_of(m, one_gpu(1));
  const double rows = static_cast<double>(s.routed_pairs()) / s.local_experts;
  ASSERT_EQ(rows, 128);
  const ExpertLinearTimes fc1 = engine_expert_linear_times(ExpertGemmBackend::kCublasGrouped, rows, 512, 384, 128, r);
  EXPECT_EQ(fc1.backend, ExpertGemmBackend::kCublasGrouped);
  const double rate = 400e12 / (0.89 * 989.4e12) * r.bf16_gemm_flops_per_s;
  const auto tile_s = [&](double tile_rows, double tile_columns, double k) {
    return 2.0 * tile_rows * tile_columns * k / (rate * k / (k + 256));
  };
  // Forward: 128 rows Poisson-spread over 64-row tiles (2.0x tiles per expert
  // and a little more), times 3 column tiles of 384, times 128 experts.
  const double row_tiles = expected_tiles_per_group(128, 64);
  EXPECT_GT(row_tiles, 2.0);
  EXPECT_LT(row_tiles, 2.6);
  const double forward_waves = std::ceil(128 * row_tiles * 3 / r.sm_count);
  EXPECT_NEAR(fc1.gpu.forward_s, forward_waves * r.sm_count * tile_s(64, 128, 512) + 8e-6, 1e-12);
  // Input gradient: 4 column tiles of 512, inner 384.
  const double input_waves = std::ceil(128 * row_tiles * 4 / r.sm_count);
  EXPECT_NEAR(fc1.gpu.input_gradient_s, input_waves * r.sm_count * tile_s(64, 128, 384) + 8e-6, 1e-12);
  // Weight gradient: 3 x 4 tiles of the (384, 512) weights per expert over 128
  // rows, then the fp32 staging add: 10 bytes per weight.
  const double weight_waves = std::ceil(128 * 3 * 4 / static_cast<double>(r.sm_count));
  EXPECT_NEAR(fc1.gpu.weight_gradient_s,
              weight_waves * r.sm_count * tile_s(128, 128, 128) + 6e-6 + 10.0 * 128 * 512 * 384 / kHbm + kGap,
              1e-12);
  // One GEMM call and two pointer-table fills (64 experts each), 4 us each to launch.
  EXPECT_NEAR(fc1.host.forward_s, 3 * kHostLaunch, 1e-15);
}

// The layer's forward holds its GEMMs and more: norms, attention, the routing
// kernels and the host's launches after the sync.
TEST(EngineMoeKernels, MoeLayerForwardExceedsItsGemms) {
  const Fixture f;
  const DeviceRates r = f.rates();
  const ModelConfig m = f.catalog.model("moe-mixtral-tiny");
  const PassTime t = layer_time(m, one_gpu(4), r, true);
  // 2048 rows per expert and 3.5 of padding on average (each block a multiple of 8 rows).
  const double rows = 2048 + 3.5;
  const ExpertLinearTimes fc1 = engine_expert_linear_times(ExpertGemmBackend::kCublasLtLoop, rows, 1024, 7168, 8, r);
  const ExpertLinearTimes fc2 = engine_expert_linear_times(ExpertGemmBackend::kCublasLtLoop, rows, 3584, 1024, 8, r);
  // The router GEMM writes fp32 logits: 2 bytes per logit beyond the bf16 product.
  const double router = linear_times(8192, 1024, 8, 1, r).forward_s + 2.0 * 8192 * 8 / kHbm;
  const double moe_gemms = fc1.gpu.forward_s + fc2.gpu.forward_s + router;
  EXPECT_GT(t.forward_s - t.attention_forward_s, moe_gemms);
  EXPECT_GT(t.forward_s, t.gemm_forward_s);
  EXPECT_NEAR(t.gemm_forward_s - moe_gemms,
              linear_times(8192, 1024, 1536, 1, r).forward_s +   // QKV: 16 + 2·4 heads of 64
                  fused_linear_times(8192, 1024, 1024, {ForwardEpilogue::kResidual, {},
                                                        2.0 * 8192 * 1024, 0}, r).forward_s,
              1e-12);
  // The weight gradients: the experts' and the router's, beside QKV's and the projection's.
  EXPECT_GT(t.weight_gradient_s, fc1.gpu.weight_gradient_s + fc2.gpu.weight_gradient_s);
  EXPECT_GT(t.backward_s, t.weight_gradient_s);
}

// Why the engine does not loop over many small experts: moe-fine-tiny at mbs 2
// (256 rows per expert, 128 experts) on the loop would issue 128 products at
// 10.7 us of host time each, each a small GEMM far below the GPU's rate; the
// grouped GEMM does the same work in less time.
TEST(EngineMoeKernels, ManySmallExpertsOnTheLoopWouldBeHostBound) {
  const Fixture f;
  const DeviceRates r = f.rates();
  const ExpertLinearTimes fc1 = engine_expert_linear_times(ExpertGemmBackend::kCublasLtLoop, 256, 512, 384, 128, r);
  EXPECT_NEAR(fc1.host.forward_s, 128 * 10.7e-6, 1e-12);
  const ExpertLinearTimes grouped = engine_expert_linear_times(ExpertGemmBackend::kCublasGrouped, 256, 512, 384, 128, r);
  EXPECT_LT(std::max(grouped.gpu.forward_s, grouped.host.forward_s), std::max(fc1.gpu.forward_s, fc1.host.forward_s));
  // And the engine's choice for that shape is the grouped GEMM.
  EXPECT_EQ(engine_expert_gemm_backend(transformer_shape_of(f.catalog.model("moe-fine-tiny"), one_gpu(2))),
            ExpertGemmBackend::kCublasGrouped);
}

// The engine runs expert parallelism (ep > 1 over dp): its own block, the
// experts' rows sorted by expert and back (two sorts each way, each reading and
// writing the rows), costed unlike Megatron's list.
TEST(EngineMoeKernels, ExpertParallelLayoutsRunTheEnginesBlock) {
  const Fixture f;
  const DeviceRates r = f.rates();
  const ModelConfig m = f.catalog.model("moe-mixtral-tiny");
  ParallelLayout l = one_gpu(2);
  l.ep = 2;
  l.dp = 2;
  const PassTime engine = layer_time(m, l, r, true);
  EXPECT_EQ(engine.forward_s, engine_layer_time(m, l, r, true).forward_s);
  EXPECT_NE(engine.forward_s, megatron_layer_time(m, l, r, true).forward_s);
  // Without the sorts' bytes (2 x 4 bytes per routed row and hidden element per
  // pass) the block would be cheaper by at least that much.
  const TransformerShape s = transformer_shape_of(m, l);
  const double sorts = 2 * untabled_memory_kernel_s(4.0 * s.routed_pairs() * s.hidden, r);
  ParallelLayout one = l;
  one.ep = 1;
  EXPECT_GT(engine.backward_s, sorts);
  EXPECT_NE(engine.forward_s, layer_time(m, one, r, true).forward_s);
}

// Expert tensor parallelism (etp > 1), which the engine does not run, keeps Megatron's list.
TEST(EngineMoeKernels, ExpertTensorParallelLayoutsKeepMegatronsList) {
  const Fixture f;
  const DeviceRates r = f.rates();
  const ModelConfig m = f.catalog.model("moe-mixtral-tiny");
  ParallelLayout l = one_gpu(2);
  l.tp = 2;
  l.etp = 2;
  const PassTime engine = layer_time(m, l, r, true);
  const PassTime megatron = megatron_layer_time(m, l, r, true);
  EXPECT_EQ(engine.forward_s, megatron.forward_s);
  EXPECT_EQ(engine.backward_s, megatron.backward_s);
}

// A capacity with the probs drop policy sorts all pairs before the sync
// (kernels/moe_routing_map.cu): 128 experts make 32 + 7 = 39 key bits, five
// 8-bit onesweep passes, each after a memset of its look-back state; with the
// keys, the histogram and its sum, keep, gather, the scan's two and the rows,
// 18 launches more than dropless, and none after the sync.
TEST(EngineMoeKernels, ACapacitySortsThePairsBeforeTheSync) {
  const test_fixtures::EngineProfileFixture f;
  const TransformerShape s = transformer_shape_of(f.catalog.model("moe-fine-tiny"), test_fixtures::one_gpu(2));
  const EngineMoeKernels dropless = engine_moe_block_kernels(s, 1.0, f.rates());
  const EngineMoeKernels capped = engine_moe_block_kernels(s, 1.0, f.rates(), 1.25);
  const auto count = [](const std::vector<MoeKernelLaunch>& list, const std::string& name) {
    return std::count_if(list.begin(), list.end(), [&](const MoeKernelLaunch& l) { return l.kernel == name; });
  };
  EXPECT_EQ(count(dropless.before_sync, "radix sort onesweep pass"), 0);
  EXPECT_EQ(count(capped.before_sync, "radix sort onesweep pass"), 5);
  EXPECT_EQ(count(capped.before_sync, "radix sort look-back memset"), 5);
  EXPECT_EQ(capped.before_sync.size(), dropless.before_sync.size() + 18);
  EXPECT_EQ(capped.after_sync.size(), dropless.after_sync.size());
  EXPECT_EQ(capped.backward.size(), dropless.backward.size());
}

}  // namespace
}  // namespace sextant::sim

namespace sextant::sim {
namespace {

// cuBLAS's grouped call spends host time beyond its launch building per-group
// arguments (8.1 us + 0.06 us per expert, fitted on the 2026-11-27 H100 probe,
// grouped_sweep.csv), less the one launch `host` already counts (4 us here);
// the loop backend has none.
TEST(EngineMoeKernels, GroupedCallsCarryTheLibrarysHostTimePerExpert) {
  const test_fixtures::EngineProfileFixture f;
  const DeviceRates r = f.rates();
  const ExpertLinearTimes eight = engine_expert_linear_times(ExpertGemmBackend::kCublasGrouped, 128, 512, 384, 8, r);
  const ExpertLinearTimes many = engine_expert_linear_times(ExpertGemmBackend::kCublasGrouped, 128, 512, 384, 128, r);
  EXPECT_NEAR(eight.library_host_s, 8.1e-6 + 8 * 0.06e-6 - 4e-6, 1e-12);
  EXPECT_NEAR(many.library_host_s, 8.1e-6 + 128 * 0.06e-6 - 4e-6, 1e-12);
  EXPECT_EQ(engine_expert_linear_times(ExpertGemmBackend::kCublasLtLoop, 128, 512, 384, 8, r).library_host_s, 0.0);
}

// The block's kernel list names the engine's launches: the padding rows are
// zeroed once in the permutation's forward and once in the un-permutation's
// backward, each pass its own launch. fc1 and fc2 are each listed as three
// launches under the products' name: the grouped call and two pointer-table
// fills (128 experts, 64 per fill).
TEST(EngineMoeKernels, BlockListZeroesThePaddingOnceEachWay) {
  const test_fixtures::EngineProfileFixture f;
  const TransformerShape s = transformer_shape_of(f.catalog.model("moe-fine-tiny"), test_fixtures::one_gpu(1));
  const EngineMoeKernels k = engine_moe_block_kernels(s, 1.0, f.rates());
  const auto count = [](const std::vector<MoeKernelLaunch>& list, const std::string& name) {
    return std::count_if(list.begin(), list.end(), [&](const MoeKernelLaunch& l) { return l.kernel == name; });
  };
  EXPECT_EQ(count(k.before_sync, "zero_padding_kernel"), 0);
  EXPECT_EQ(count(k.after_sync, "zero_padding_kernel"), 1);
  EXPECT_EQ(count(k.backward, "zero_padding_kernel"), 1);
  EXPECT_EQ(count(k.after_sync, "expert GEMMs (grouped)"), 2 * 3);
}

}  // namespace
}  // namespace sextant::sim
