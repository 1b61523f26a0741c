#include "sim/comm/fsdp_behaviour.h"

#include <algorithm>
#include <cmath>

#include "sim/comm/parallel_comm.h"

namespace sextant::sim {

namespace {
// Megatron-FSDP's defaults (megatron_fsdp.py): the communication unit is at
// least 1e9 parameters; the all-gather prefetch is half of it, the
// reduce-scatter queue all of it.
constexpr double kMegatronFsdpPrefetchParams = 5e8;
constexpr double kMegatronFsdpReduceQueueParams = 1e9;
// Parameter-holding submodules of a Megatron-DeepSpeed transformer layer:
// QKV, attention output projection, FC1, FC2, two layer norms.
constexpr int kDeepSpeedModulesPerLayer = 6;
}  // namespace

FsdpBehaviour fsdp_behaviour(FsdpImplementation implementation, double unit_params,
                             Precision precision) {
  FsdpBehaviour out;
  const double unit = std::max(unit_params, 1.0);
  switch (implementation) {
    case FsdpImplementation::kMegatronFsdp:
      // Buckets are added while the prefetched size is below the limit: ceil(limit/unit).
      out.prefetch_units = std::max(1, static_cast<int>(std::ceil(kMegatronFsdpPrefetchParams / unit)));
      // The queue is drained while it holds more than the capacity: floor(capacity/unit).
      out.reduce_queue_units =
          std::max(1, static_cast<int>(std::floor(kMegatronFsdpReduceQueueParams / unit)));
      out.gathers_per_unit = 1;
      out.gradient_bytes_per_param = gradient_reduce_bytes_per_param(precision);
      break;
    case FsdpImplementation::kFsdp2:
      out.prefetch_units = 1;
      out.reduce_queue_units = 1;
      out.gathers_per_unit = 1;
      out.gradient_bytes_per_param = gradient_reduce_bytes_per_param(precision);
      break;
    case FsdpImplementation::kDeepSpeedZero3:
      out.prefetch_units = 0;
      out.reduce_queue_units = 1;
      out.gathers_per_unit = kDeepSpeedModulesPerLayer;
      out.gradient_bytes_per_param = 2.0;
      break;
  }
  return out;
}

}  // namespace sextant::sim
