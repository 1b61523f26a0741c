#include "sim/compute/launch_mode.h"

namespace sextant::sim {

LaunchMode engine_launch_mode(const CostProfile& profile, const ModelConfig& model, const ParallelLayout& layout) {
  const bool launched = layout.total_gpus() > 1 || model.moe_layers() > 0;
  return profile.software == Software::kSextantEngine && launched ? LaunchMode::kKernelsLaunched
                                                                  : LaunchMode::kGraphReplay;
}

double measured_kernel_gap_s(const CostProfile& profile, LaunchMode mode) {
  if (!profile.tables || !profile.tables->overheads) return profile.kernel_overhead_s;
  const MeasuredOverheads& o = *profile.tables->overheads;
  return mode == LaunchMode::kKernelsLaunched ? o.kernel_launch_s : o.graph_kernel_s;
}

}  // namespace sextant::sim
