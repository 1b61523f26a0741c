#include "sim/compute/launch_mode.h"

namespace sextant::sim {

CostProfile with_launched_kernels(const CostProfile& profile) {
  CostProfile launched = profile;
  launched.kernels_launched = true;
  return launched;
}

CostProfile as_engine_launches(const CostProfile& profile, const ParallelLayout& layout) {
  if (profile.software != Software::kSextantEngine || layout.total_gpus() <= 1 || profile.kernels_launched)
    return profile;
  return with_launched_kernels(profile);
}

}  // namespace sextant::sim
