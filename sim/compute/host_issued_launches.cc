#include "sim/compute/host_issued_launches.h"

#include <algorithm>

namespace sextant::sim {

double host_launch_s(const DeviceRates& r) {
  if (r.tables && r.tables->overheads) return r.tables->overheads->kernel_launch_s;
  return r.kernel_overhead_s;
}

double time_after_sync_s(std::span<const KernelLaunch> launches) {
  double host_s = 0, gpu_s = 0;
  for (const KernelLaunch& k : launches) {
    host_s += k.host_s;
    gpu_s = std::max(gpu_s, host_s) + k.gpu_s;
  }
  return gpu_s;
}

double time_host_or_gpu_bound_s(std::span<const KernelLaunch> launches) {
  double host_s = 0, gpu_s = 0;
  for (const KernelLaunch& k : launches) {
    host_s += k.host_s;
    gpu_s += k.gpu_s;
  }
  return std::max(host_s, gpu_s);
}

}  // namespace sextant::sim
