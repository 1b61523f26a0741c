#include "sim/compute/launch_mode.h"

namespace sextant::sim {

LaunchMode engine_launch_mode(const CostProfile& profile, const ParallelLayout& layout) {
  return profile.software == Software::kSextantEngine && layout.total_gpus() > 1 ? LaunchMode::kKernelsLaunched
                                                                               : LaunchMode::kGraphReplay;
}

double measured_kernel_gap_s(const CostProfile& profile, LaunchMode mode) {
  if (!profile.tables || !profile.tables->overheads) return profile.kernel_overhead_s;
  const MeasuredOverheads& o = *profile.tables->overheads;
  return mode == LaunchMode::kKernelsLaunched ? o.kernel_launch_s : o.graph_kernel_s;
}

}  // namespace sextant::sim
