// The engine's MoE block, kernel by kernel (engine/transformer/moe_layer.cc over
// kernels/moe_router.h, moe_load_balancing.h, moe_routing_map.h, moe_permute.h,
// moe_grouped_gemm.h, moe_chunk_sort.h), for one micro-batch on one rank: T
// tokens, E experts (E_l = E / ep on this rank), top-k, hidden h, expert width f
// (fc1 2f wide for SwiGLU); the rank routes its own T·k pairs, and its experts
// get the busiest rank's Q = T·k·expert_load_factor rows, n = Q/E_l per expert.
// With ep > 1 the rows travel between ranks (the plan's ep.dispatch and
// ep.combine tasks, sim/comm/parallel_comm.cc) and are sorted by expert on
// arrival and back by source before they leave (moe_chunk_sort, Q rows each).
//
// Forward (norm2 before it is the dense block's, engine_layer_kernels.cc):
//   router GEMM         logits (T, E) fp32 = x (T, h) · Wr^T, bf16 inputs
//   moe_router_forward  one warp per token: reads the logits, writes top-k ids
//                       and weights (T, k) and the row's log-sum-exp (T)
//   aux loss            moe_aux_loss_statistics (reads the logits again) and
//                       moe_router_loss_values (Megatron's aux loss on: our
//                       runs train with its default coefficient, 1e-2)
//   moe_routing_map     a counting sort of the T·k pairs by expert (dropless):
//                       chunk counts, expert starts, chunk ranks
//   row counts          cudaMemcpyAsync of E int32 to the host and
//                       cudaStreamSynchronize: cuBLAS takes the sizes on the host
//   --- host sync ---
//   moe_permute_forward zeroes the padding rows of each expert's block, then
//                       reads x (T, h), writes the permuted rows (T·k, h)
//   [ep > 1: the rows' exchange, then moe_sort_chunks to expert-major (Q, h)]
//   fc1                 per expert (n, fc1) = (n, h) · W1_e^T
//   activation          SwiGLU (Q, 2f) -> (Q, f), or GELU (Q, f)
//   fc2                 per expert (n, h) = (n, f) · W2_e^T
//   [ep > 1: moe_sort_chunks back by source (Q, h), the exchange back]
//   moe_unpermute_forward  y (T, h) = residual + Σ_k weight · expert row: reads
//                       (P, h), the residual (T, h) and the weights, writes (T, h)
// Backward:
//   moe_unpermute_backward  zeroes the padding rows, reads dy (T, h) and the expert rows (P, h), writes
//                       their gradient (P, h) and the weights' (T, k) fp32
//   fc2                 input gradient (n, f) and weight gradient (h x f per expert, fp32)
//   activation backward (P, f)
//   fc1                 input gradient (n, h) and weight gradient (fc1 x h per expert, fp32)
//   moe_permute_backward  reads (P, h), writes dx (T, h)
//   moe_router_backward reads the fp32 logits, writes dlogits (T, E) fp32
//   cast                dlogits to bf16 (T, E)
//   router GEMMs        dx += dlogits · Wr (accumulated into the bf16 input
//                       gradient, read as C), dWr (E, h) += dlogits^T · x, fp32
// (norm2's backward after them is the dense block's.)
//
// Kernels with a measured table (GEMMs, SwiGLU) take their time from it
// (kernel_costs.h); the routing kernels have none and are costed by their bytes
// (untabled_memory_kernel_s).
//
// The host sync: the host waits for the row counts, so after it the GPU runs
// each kernel only once the host has launched it (the step is no CUDA graph:
// a graph cannot hold the sync). The forward of a layer, from one sync to the
// next, is played as the host's and the GPU's queues (host_issued_launches.h:
// time_after_sync_s): the kernels after the sync, the next layer's attention
// block and norm2 (DenseLaunches, their GPU time and launch count), then the
// kernels up to its sync. Each launch costs the host host_launch_s (the
// measured stream launch gap), a cuBLASLt product of the loop backend
// kLoopHostPerProductS, a grouped call its library's own host time
// (kGroupedCallHostS) beside its table fills. The backward has no sync (the row counts are kept from
// the forward): its launches are bounded by the host's and the GPU's sums
// (time_host_or_gpu_bound_s). What the host leaves the GPU idle is added to the
// block's forward and backward.
#include "sim/compute/engine_moe_kernels.h"

#include <algorithm>
#include <cmath>
#include <span>
#include <vector>

#include "sim/compute/grouped_gemm_time.h"
#include "sim/compute/host_issued_launches.h"

namespace sextant::sim {

namespace {

using K = ElementwiseKernel;

// Fitted on our measurement of the engine's two backends on one H100,
// reports/measurements/2026-11-27-h100-moe-kernels/moe_gemm_fwd.csv (forward
// products (n, 2048) x (2048, 1536) per expert, E in {8, 32, 128}, n in 16..16384):
//
// The loop backend: one cuBLASLt product per expert, each issued by the host.
// Below 256 rows per expert the loop's time grows with the experts, not the
// rows: the slope over E from 8 to 128 experts is 10.9, 10.7 and 10.6 us per
// expert at 16, 64 and 256 rows (the GPU needs ~5 us for such a product), so
// the host's time to issue one product is their mean.
constexpr double kLoopHostPerProductS = 10.7e-6;
// The grouped backend (cublasGemmGroupedBatchedEx) runs one CUTLASS grouped
// kernel per product (Nsight Compute on the engine's moe-fine-tiny step,
// reports/measurements/2026-11-27-h100-moe-ncu/): expert e's product is tiles
// of its output in waves over the SMs (grouped_gemm_time.h's mechanism).
//  - forward and input gradient: cutlass_80_tensorop_bf16_s16816gemm_bf16_grouped_128x64_64x3,
//    tiles of 128 output columns by 64 rows (its name; a fact of the kernel),
//    each expert's rows padded to whole tiles;
//  - weight gradient (rows the inner dimension): tiles of the (out, in) output,
//    128 x 128 (the fit's choice among 64/128); one kernel only because the
//    engine pads every expert to a multiple of 8 rows (kernels/moe_routing_map.h):
//    otherwise cuBLAS runs one GEMM per expert at ~10 us of host time each.
// Fitted on reports/measurements/2026-11-27-h100-moe-engine/grouped-gemm-probe/
// grouped_sweep.csv (8-128 experts of 16-2048 equal rows, five expert shapes;
// grid search on ln time): a tile at 400e12 FLOP/s times k/(k + 256), plus a
// fixed time per call: 8 us forward-type (210 calls: rms log error 0.11, worst
// 0.49), 6 us weight gradient (105 calls: rms 0.07, worst 0.23). (The fit this
// replaces, 32 us + 2.2 us per expert on one shape of 2048 x 1536 experts, was
// 3-7x high on small experts.) The rate is taken as a fraction of the profile's
// bf16 GEMM rate, over the measured H100 profile's 0.89 x 989.4e12
// (configs/profiles/measured/h100-sxm-80gb.yaml as calibrated on 2026-11-23, gemm_efficiency;
// the 2026-12-07 recalibration measured 0.905, which puts the tile rate 1.7 % above the
// fit's 400e12; not refitted), so other
// GPUs scale with their own.
constexpr double kGroupedTileRateOfDenseGemmRate = 400e12 / (0.89 * 989.4e12);
constexpr double kGroupedKHalf = 256;
struct GroupedTiles {
  double rows, columns, call_s;
};
constexpr GroupedTiles kGroupedForwardTiles{64, 128, 8e-6};
constexpr GroupedTiles kGroupedWeightGradientTiles{128, 128, 6e-6};
// The host's time in one cublasGemmGroupedBatchedEx call (the pointer-table
// fills are launches of their own): median host_us of
// reports/measurements/2026-11-27-h100-moe-engine/grouped-gemm-probe/grouped_sweep.csv
// over its five expert shapes and 16-2048 rows, 8.6 us at 8 experts and 15.8 us
// at 128 (all three products alike), a line through the two: the library
// builds its per-group arguments on the host, beyond the one stream launch
// (host_launch_s, 3.9 us on the H100 profile) a kernel costs.
constexpr double kGroupedCallHostS = 8.1e-6;
constexpr double kGroupedCallHostPerExpertS = 0.06e-6;
// The engine rounds each expert's rows up to a multiple of 8 (moe_layer.cc):
// 3.5 rows more per expert on average.
constexpr double kMeanPaddingRows = 3.5;
// The grouped backend fills its device pointer tables, 64 experts per launch
// (kernels/moe_grouped_gemm.cu, kPointersPerLaunch), before each product.
constexpr double kExpertsPerPointerLaunch = 64;
// The routing map's chunks (kernels/moe_routing_map.cu, kMinChunkPairs and
// kMaxChunks): 1024 pairs each, at most 128 chunks.
constexpr double kRoutingChunkPairs = 1024;
constexpr double kRoutingMaxChunks = 128;

// One grouped-backend product: `experts` outputs of (m_e × n) over an inner
// dimension k, in `tiles`; m_e = `mean_m` on average, Poisson-spread when the
// rows are m (expected_tiles_per_group), else exact.
double grouped_product_s(const GroupedTiles& tiles, double mean_m, bool m_is_rows, double n, double k,
                         double experts, const DeviceRates& r) {
  const double m_tiles =
      m_is_rows ? expected_tiles_per_group(mean_m, tiles.rows) : std::ceil(mean_m / tiles.rows);
  const double waves = std::ceil(experts * m_tiles * std::ceil(n / tiles.columns) / r.sm_count);
  const double tile_rate = kGroupedTileRateOfDenseGemmRate * r.bf16_gemm_flops_per_s * k / (k + kGroupedKHalf);
  return r.compute_time_factor *
         (waves * r.sm_count * 2.0 * tiles.rows * tiles.columns * k / tile_rate + tiles.call_s);
}

// The block's launches in the order the host issues them, each with its kernel's name.
struct Launches {
  std::vector<MoeKernelLaunch> list;
  void add(const char* kernel, double gpu, double host) { list.push_back({kernel, {gpu, host}}); }
  // A product of `launches` kernels (the loop's E products, the grouped call's
  // table fills and GEMM), each taken as an equal share of its GPU and host time,
  // so the GPU can start the first before the host has issued the last.
  void add_product(const char* kernel, double gpu, double host, double launches) {
    for (double i = 0; i < launches; ++i) list.push_back({kernel, {gpu / launches, host / launches}});
  }
};

std::vector<KernelLaunch> launches_of(std::span<const MoeKernelLaunch> named) {
  std::vector<KernelLaunch> launches;
  for (const MoeKernelLaunch& k : named) launches.push_back(k.launch);
  return launches;
}

// The kernel launches of one expert product on `backend` over `experts`: one per
// expert for the loop; for the grouped call its pointer-table fills and the GEMM
// (the fp32 weight gradient's staging add is one more).
double product_launches(ExpertGemmBackend backend, double experts) {
  return backend == ExpertGemmBackend::kCublasLtLoop
             ? experts
             : 1 + std::ceil(experts / kExpertsPerPointerLaunch);
}

}  // namespace

ExpertGemmBackend engine_expert_gemm_backend(const TransformerShape& shape) {
  return shape.expert_gemms_in_loop() ? ExpertGemmBackend::kCublasLtLoop : ExpertGemmBackend::kCublasGrouped;
}

ExpertLinearTimes engine_expert_linear_times(ExpertGemmBackend backend, double rows, double in, double out,
                                             double experts, const DeviceRates& r) {
  ExpertLinearTimes e;
  e.backend = backend;
  if (rows <= 0 || in <= 0 || out <= 0 || experts <= 0) return e;
  if (e.backend == ExpertGemmBackend::kCublasLtLoop) {
    // E products of the expert's shape, each timed from the measured dense
    // tables (the weight gradient accumulated in fp32 by cuBLASLt itself).
    const LinearTimes one = linear_times(rows, in, out, 1, r);
    e.gpu = {experts * one.forward_s, experts * one.input_gradient_s,
             experts * one.weight_gradient_s};
    const double host = experts * kLoopHostPerProductS;
    e.host = {host, host, host};
    return e;
  }
  // One grouped call (and its pointer-table fills) per product.
  const double forward = grouped_product_s(kGroupedForwardTiles, rows, true, out, in, experts, r);
  const double input_gradient = grouped_product_s(kGroupedForwardTiles, rows, true, in, out, experts, r);
  const double weight_gradient = grouped_product_s(kGroupedWeightGradientTiles, out, false, in, rows, experts, r);
  // cuBLAS's grouped GEMM writes bf16 only (kernels/moe_grouped_gemm.h): the fp32
  // weight gradient is staged in bf16 and added by one more kernel (read 2, read
  // and write 4 + 4 bytes per weight).
  const double staging_add = untabled_memory_kernel_s(10.0 * experts * in * out, r);
  e.gpu = {forward, input_gradient, weight_gradient + staging_add};
  e.staging_add_s = staging_add;
  const double host = product_launches(e.backend, experts) * host_launch_s(r);
  e.host = {host, host, host + host_launch_s(r)};
  e.library_host_s = std::max(0.0, kGroupedCallHostS + kGroupedCallHostPerExpertS * experts - host_launch_s(r));
  return e;
}

EngineMoeKernels engine_moe_block_kernels(const TransformerShape& shape, double load_factor,
                                          const DeviceRates& r, double capacity_factor) {
  EngineMoeKernels k;
  if (!shape.moe()) return k;
  const double T = static_cast<double>(shape.tokens());
  const double E = static_cast<double>(shape.experts);          // the router's and the routing map's
  const double E_local = static_cast<double>(shape.local_experts);  // the grouped GEMMs'
  const double ep = static_cast<double>(shape.ep);
  const double h = static_cast<double>(shape.hidden);
  const double f = static_cast<double>(shape.expert_ffn_hidden);
  const double fc1 = static_cast<double>(shape.expert_fc1_width());
  const double pairs = static_cast<double>(shape.routed_pairs());  // T·k, what the router sorts
  const double P = pairs * load_factor;  // the busiest rank's expert rows (Q above)
  // Each source pads its block of each expert (moe_layer.cc): ep blocks per expert.
  const double n = P / E_local + ep * kMeanPaddingRows;
  // ep > 1: moe_sort_chunks reads and writes the Q rows (2 + 2 bytes per element).
  const double sort = shape.ep > 1 ? untabled_memory_kernel_s(4.0 * P * h, r) : 0.0;
  const double host = host_launch_s(r);
  const double hbm = r.memory_bytes_per_s / r.compute_time_factor;

  // Forward, before the sync. The router GEMM's table times a bf16 output; it
  // writes fp32 logits: 2 more bytes per logit.
  const LinearTimes router = linear_times(T, h, E, 1, r);
  Launches before;
  const double router_forward = router.forward_s + 2.0 * T * E / hbm;
  before.add("router GEMM", router_forward, host);
  // moe_router_forward: logits 4 bytes each; ids and weights 4 + 4 per pair; lse 4 per token.
  before.add("moe_router_forward_kernel", untabled_memory_kernel_s(4.0 * T * E + 8.0 * pairs + 4.0 * T, r), host);
  // Aux loss: the statistics re-read the logits; the loss values read E sums.
  before.add("moe_aux_statistics_partials_kernel", untabled_memory_kernel_s(4.0 * T * E, r), host);
  before.add("moe_router_loss_values_kernel", untabled_memory_kernel_s(8.0 * E, r), host);
  // moe_routing_map, dropless (kernels/moe_routing_map.cu), a counting sort in
  // three kernels: chunk_counts (read the ids, write each chunk's E counts),
  // expert_starts (one block: read and write the chunks' counts, write the E
  // starts and the two outputs), chunk_ranks (read the ids, the chunk's E counts
  // and starts, write the rows).
  const double chunks = std::min(std::ceil(pairs / kRoutingChunkPairs), kRoutingMaxChunks);
  before.add("chunk_counts_kernel", untabled_memory_kernel_s(4.0 * pairs + 4.0 * chunks * E, r), host);
  before.add("expert_starts_kernel", untabled_memory_kernel_s(8.0 * chunks * E + 20.0 * E, r), host);
  before.add("chunk_ranks_kernel", untabled_memory_kernel_s(8.0 * pairs + 8.0 * chunks * E, r), host);
  // A capacity with the `probs` drop policy (kernels/moe_routing_map.cu): the
  // pairs each expert keeps are its largest router weights, found by sorting
  // all T·k pairs by (expert, weight). priority_keys reads the ids and weights
  // (4 + 4 bytes a pair) and writes 8-byte keys and 4-byte slots; cub's
  // onesweep radix sort of the (key, slot) pairs over 32 + ceil(log2 E) key
  // bits (cub/device/dispatch/dispatch_radix_sort.cuh: a histogram kernel
  // reading the keys, an exclusive sum of its bins, then per 8-bit digit a
  // memset of the look-back state and a pass reading and writing the pairs,
  // 12 + 12 bytes); keep_by_priority reads the sorted keys and slots and writes
  // a flag (16 bytes), gather_keep moves the flags back to pair order (12),
  // cub's exclusive scan of them (a tile-state init and the scan: 8) and
  // rows_by_priority writes each pair's row (20).
  if (capacity_factor > 0) {
    before.add("priority_keys_kernel", untabled_memory_kernel_s(20.0 * pairs, r), host);
    const double key_bits = 32.0 + std::ceil(std::log2(std::max(E, 2.0)));
    before.add("radix sort histogram", untabled_memory_kernel_s(8.0 * pairs, r), host);
    before.add("radix sort bins' exclusive sum", untabled_memory_kernel_s(0.0, r), host);
    for (int digit = 0; digit < static_cast<int>(std::ceil(key_bits / 8.0)); ++digit) {
      before.add("radix sort look-back memset", r.measured_kernel_gap_s, host);
      before.add("radix sort onesweep pass", untabled_memory_kernel_s(24.0 * pairs, r), host);
    }
    before.add("keep_by_priority_kernel", untabled_memory_kernel_s(16.0 * pairs, r), host);
    before.add("gather_keep_kernel", untabled_memory_kernel_s(12.0 * pairs, r), host);
    before.add("scan tile-state init", untabled_memory_kernel_s(0.0, r), host);
    before.add("scan of the kept flags", untabled_memory_kernel_s(8.0 * pairs, r), host);
    before.add("rows_by_priority_kernel", untabled_memory_kernel_s(20.0 * pairs, r), host);
  }
  // The row counts' copy to the host (4·E bytes: its time is the launch's).
  before.add("row counts to the host", r.measured_kernel_gap_s, host);

  // Forward, after the sync.
  const ExpertGemmBackend backend = engine_expert_gemm_backend(shape);
  const char* const gemm = backend == ExpertGemmBackend::kCublasLtLoop ? "expert GEMMs (cuBLASLt loop)"
                                                                       : "expert GEMMs (grouped)";
  const ExpertLinearTimes g1 = engine_expert_linear_times(backend, n, h, fc1, E_local, r);
  const ExpertLinearTimes g2 = engine_expert_linear_times(backend, n, f, h, E_local, r);
  Launches after;
  // zero_padding_kernel (kernels/moe_permute.cu, run by moe_permute_forward and
  // moe_unpermute_backward): the rows padding each expert's block to a multiple
  // of 8 set to zero, 2 bytes per element; each source pads all E experts' blocks.
  const double zero_padding = untabled_memory_kernel_s(2.0 * E * kMeanPaddingRows * h, r);
  after.add("zero_padding_kernel", zero_padding, host);
  // moe_permute_forward: x (T, h) and the rows (4 bytes per pair) in, the pairs' rows out.
  after.add("permute_forward_kernel", untabled_memory_kernel_s(2.0 * T * h + 4.0 * pairs + 2.0 * pairs * h, r),
            host);
  // ep > 1: the exchange (its time the plan's dispatch task; here the host's
  // launch of it) and the sort to expert-major.
  if (shape.ep > 1) {
    after.add("ep exchange", 0.0, host);
    after.add("moe_sort_chunks", sort, host);
  }
  const double launches = product_launches(g1.backend, E_local);  // g2's backend is g1's: same rows
  after.add_product(gemm, g1.gpu.forward_s, g1.host.forward_s + g1.library_host_s, launches);
  const double activation_forward =
      shape.gelu ? untabled_memory_kernel_s(4.0 * P * f, r)  // GELU: read and write (P, f)
                 : elementwise_time_s(K::kSwigluForward, P, f, 6.0 * P * f, r);
  after.add(shape.gelu ? "gelu_forward" : "swiglu_forward_kernel", activation_forward, host);
  after.add_product(gemm, g2.gpu.forward_s, g2.host.forward_s + g2.library_host_s, launches);
  if (shape.ep > 1) {  // sorted back by source, then the exchange back
    after.add("moe_sort_chunks", sort, host);
    after.add("ep exchange", 0.0, host);
  }
  // moe_unpermute_forward: the pairs' expert rows, the rows and weights (4 + 4 per
  // pair) and the residual (T, h) in, y (T, h) out.
  const double unpermute = untabled_memory_kernel_s(2.0 * pairs * h + 8.0 * pairs + 4.0 * T * h, r);
  after.add("gather_sum_kernel", unpermute, host);
  k.gemm_forward_s = router_forward + g1.gpu.forward_s + g2.gpu.forward_s;
  // Full recomputation stores the layer's output (the next layer's input): the
  // un-permutation that writes it is what it skips, as fc2 in the dense block.
  k.full_recompute_skipped_s = unpermute;

  // Backward.
  Launches back;
  back.add("zero_padding_kernel", zero_padding, host);
  // moe_unpermute_backward: dy (T, h), the pairs' expert rows, rows and weights in;
  // their gradient and the weights' (4 per pair) out.
  back.add("unpermute_backward_kernel",
           untabled_memory_kernel_s(2.0 * T * h + 4.0 * pairs * h + 12.0 * pairs, r), host);
  if (shape.ep > 1) {  // the gradient's exchange and sort, as the forward's rows
    back.add("ep exchange", 0.0, host);
    back.add("moe_sort_chunks", sort, host);
  }
  const bool staged = g1.backend == ExpertGemmBackend::kCublasGrouped;
  // A weight gradient: its product, then (grouped) the fp32 staging add.
  const auto weight_gradient = [&](const ExpertLinearTimes& g) {
    back.add_product(gemm, g.gpu.weight_gradient_s - g.staging_add_s,
                     g.host.weight_gradient_s - (staged ? host : 0.0) + g.library_host_s, launches);
    if (staged) back.add("accumulate_staged_kernel", g.staging_add_s, host);
  };
  back.add_product(gemm, g2.gpu.input_gradient_s, g2.host.input_gradient_s + g2.library_host_s, launches);
  weight_gradient(g2);
  const double activation_backward =
      shape.gelu ? untabled_memory_kernel_s(6.0 * P * f, r)  // read dy and x, write dx
                 : elementwise_time_s(K::kSwigluBackward, P, f, 10.0 * P * f, r);
  back.add(shape.gelu ? "gelu_backward" : "swiglu_backward_kernel", activation_backward, host);
  back.add_product(gemm, g1.gpu.input_gradient_s, g1.host.input_gradient_s + g1.library_host_s, launches);
  weight_gradient(g1);
  if (shape.ep > 1) {  // the input gradient sorted back by source and sent home
    back.add("moe_sort_chunks", sort, host);
    back.add("ep exchange", 0.0, host);
  }
  // moe_permute_backward: the pairs' rows in, dx (T, h) out.
  back.add("gather_sum_kernel", untabled_memory_kernel_s(2.0 * pairs * h + 4.0 * pairs + 2.0 * T * h, r), host);
  // moe_router_backward: logits in, dlogits out (4 + 4 per logit), with the ids,
  // weights and their gradients (12 per pair); the cast to bf16 (4 + 2 per logit).
  back.add("moe_router_backward_kernel", untabled_memory_kernel_s(8.0 * T * E + 12.0 * pairs, r), host);
  back.add("convert_to_bf16_kernel", untabled_memory_kernel_s(6.0 * T * E, r), host);
  // dx += dlogits · Wr: the input gradient read as C (2 bytes per element of dx).
  const double router_input_gradient = router.input_gradient_s + 2.0 * T * h / hbm;
  back.add("router GEMM", router_input_gradient, host);
  back.add("router GEMM", router.weight_gradient_s, host);
  k.weight_gradient_s = g1.gpu.weight_gradient_s + g2.gpu.weight_gradient_s + router.weight_gradient_s;
  k.gemm_backward_s = g1.gpu.input_gradient_s + g2.gpu.input_gradient_s + router_input_gradient +
                      k.weight_gradient_s;
  k.before_sync = std::move(before.list);
  k.after_sync = std::move(after.list);
  k.backward = std::move(back.list);
  return k;
}

PassTime engine_moe_block_time(const TransformerShape& shape, double load_factor,
                               const DenseLaunches& rest, const DeviceRates& r, double capacity_factor) {
  PassTime t;
  if (!shape.moe()) return t;
  const EngineMoeKernels k = engine_moe_block_kernels(shape, load_factor, r, capacity_factor);
  const double host = host_launch_s(r);
  const auto gpu_s = [](std::span<const MoeKernelLaunch> list) {
    double sum = 0;
    for (const MoeKernelLaunch& l : list) sum += l.launch.gpu_s;
    return sum;
  };
  // The rest's kernels, taken as equal shares of its time.
  const auto add_rest = [&](std::vector<KernelLaunch>& list, double rest_gpu_s, int rest_launches) {
    for (int i = 0; i < rest_launches; ++i) list.push_back({rest_gpu_s / rest_launches, host});
  };

  // One sync to the next: this block's kernels after the sync, the next layer's
  // attention block and norm2, this block's kernels before the sync.
  std::vector<KernelLaunch> cycle = launches_of(k.after_sync);
  add_rest(cycle, rest.forward_gpu_s, rest.forward_launches);
  for (const KernelLaunch& l : launches_of(k.before_sync)) cycle.push_back(l);
  const double forward_gpu = gpu_s(k.before_sync) + gpu_s(k.after_sync);
  const double forward_idle = time_after_sync_s(cycle) - (forward_gpu + rest.forward_gpu_s);
  t.forward_s = forward_gpu + forward_idle;
  t.gemm_forward_s = k.gemm_forward_s;
  t.full_recompute_skipped_s = k.full_recompute_skipped_s;

  // The backward: its launches and the rest's, bounded by the host's and the GPU's sums.
  std::vector<KernelLaunch> layer = launches_of(k.backward);
  add_rest(layer, rest.backward_gpu_s, rest.backward_launches);
  const double backward_gpu = gpu_s(k.backward);
  const double backward_idle = time_host_or_gpu_bound_s(layer) - (backward_gpu + rest.backward_gpu_s);
  t.backward_s = backward_gpu + backward_idle;
  t.weight_gradient_s = k.weight_gradient_s;
  t.gemm_backward_s = k.gemm_backward_s;
  return t;
}

}  // namespace sextant::sim
