#include "sim/core/framework.h"

namespace sextant::sim {

CostProfile with_framework(CostProfile profile, const Framework& framework) {
  profile.sustained_compute_fraction = framework.sustained_compute_fraction;
  profile.framework = framework.name;
  return profile;
}

}  // namespace sextant::sim
