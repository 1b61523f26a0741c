// The simulator's cost of the engine's MoE block kernel by kernel
// (sim/compute/engine_moe_kernels.h), for one training step of one micro-batch
// on one GPU, as tools/bench/moe_step_kernels.sh measures it with Nsight
// Compute (gbs = mbs): each kernel's launches and GPU time summed over the
// model's MoE layers, then the time the host leaves the GPU idle, which no
// kernel list shows. tools/bench/moe_kernel_table.py sets the two side by side.
//
//   moe_kernel_costs CONFIGS_DIR MODEL MBS PROFILE
//
// Prints tab-separated rows: kernel, launches, GPU us per step.
// The rates are the profile's at its burst clock with every kernel launched from
// the host (LaunchMode::kKernelsLaunched, as the engine runs an MoE model).
#include <cstdio>
#include <exception>
#include <map>
#include <string>
#include <utility>

#include "sim/compute/device_rates.h"
#include "sim/compute/engine_moe_kernels.h"
#include "sim/compute/kernel_costs.h"
#include "sim/compute/layer_time.h"
#include "sim/core/config_loader.h"
#include "sim/core/preset_catalog.h"
#include "sim/core/transformer_shape.h"

int main(int argc, char** argv) {
  using namespace sextant::sim;
  if (argc != 5) {
    std::fprintf(stderr, "usage: moe_kernel_costs CONFIGS_DIR MODEL MBS PROFILE\n");
    return 2;
  }
  try {
    const PresetCatalog catalog(argv[1]);
    const ModelConfig model = catalog.model(argv[2]);
    const CostProfile profile = load_profile_file(argv[4]);
    const GpuConfig gpu = catalog.gpu(profile.gpu);
    ParallelLayout layout;
    layout.mbs = std::stoi(argv[3]);
    layout.gbs = layout.mbs;
    const DeviceRates rates = device_rates(gpu, profile, Precision::kBf16, LaunchMode::kKernelsLaunched);
    const TransformerShape shape = transformer_shape_of(model, layout);
    const double layers = static_cast<double>(model.moe_layers());
    const double load = model.moe ? model.moe->expert_load_factor : 1.0;
    const EngineMoeKernels k = engine_moe_block_kernels(shape, load, rates);
    std::map<std::string, std::pair<double, double>> by_kernel;  // launches, GPU s per layer
    double gpu_s = 0;
    for (const auto* list : {&k.before_sync, &k.after_sync, &k.backward})
      for (const MoeKernelLaunch& l : *list) {
        by_kernel[l.kernel].first += 1;
        by_kernel[l.kernel].second += l.launch.gpu_s;
        gpu_s += l.launch.gpu_s;
      }
    for (const auto& [name, v] : by_kernel)
      std::printf("%s\t%.0f\t%.1f\n", name.c_str(), v.first * layers, v.second * layers * 1e6);
    // The layer's time beside its kernels': what the host's launches leave idle
    // (the layer less its attention block, norm2 (engine_layer_kernels.cc) and the block's kernels).
    const PassTime t = layer_time(model, layout, rates, true);
    const double T = static_cast<double>(shape.tokens()), h = static_cast<double>(shape.hidden);
    const double norm2 =
        elementwise_time_s(shape.layernorm ? ElementwiseKernel::kLayernormForward : ElementwiseKernel::kRmsnormForward,
                           T, h, 4.0 * T * h, rates) +
        elementwise_time_s(shape.layernorm ? ElementwiseKernel::kLayernormBackward : ElementwiseKernel::kRmsnormBackward,
                           T, h, 8.0 * T * h, rates);
    const double idle = t.forward_s + t.backward_s - t.attention_forward_s - t.attention_backward_s - norm2 - gpu_s;
    // Reference rows from the measured tables, no MoE in them: flash attention
    // (compute-bound; a clock check of the Nsight Compute run) and AdamW (memory-bound).
    const AttentionTimes a =
        attention_times(layout.mbs, shape.heads, shape.kv_heads, static_cast<double>(model.seq_length),
                        static_cast<double>(shape.attention_head_dim()), 1, rates);
    std::printf("reference: flash attention forward (table)\t%.0f\t%.1f\n", layers, a.forward_s * layers * 1e6);
    std::printf("reference: flash attention backward (table)\t%.0f\t%.1f\n", layers, a.backward_s * layers * 1e6);
    std::printf("host idle (MoE block and norm2)\t0\t%.1f\n", idle * layers * 1e6);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "moe_kernel_costs: %s\n", e.what());
    return 2;
  }
  return 0;
}
