#include "sim/compute/launch_mode.h"

namespace sextant::sim {

CostProfile with_launched_kernels(const CostProfile& profile) {
  CostProfile launched = profile;
  launched.kernels_launched = true;
  return launched;
}

bool engine_launches_differently(const CostProfile& profile, const ParallelLayout& layout) {
  return profile.software == Software::kSextantEngine && layout.total_gpus() > 1 && !profile.kernels_launched;
}

CostProfile as_engine_launches(const CostProfile& profile, const ParallelLayout& layout) {
  return engine_launches_differently(profile, layout) ? with_launched_kernels(profile) : profile;
}

}  // namespace sextant::sim
