// Launches issued by the host after a sync (sim/compute/host_issued_launches.h).
#include "sim/compute/host_issued_launches.h"

#include <gtest/gtest.h>

#include <vector>

namespace sextant::sim {
namespace {

// Host 3 us per launch, GPU 1, 1, then 10 us: kernel 1 starts at 3 and ends at 4;
// kernel 2 is issued at 6 and ends at 7; kernel 3 is issued at 9 and ends at 19.
TEST(HostIssuedLaunches, EachKernelWaitsForItsLaunch) {
  const std::vector<KernelLaunch> k{{1e-6, 3e-6}, {1e-6, 3e-6}, {10e-6, 3e-6}};
  EXPECT_NEAR(time_after_sync_s(k), 19e-6, 1e-15);
  // Without the sync: the longer queue, the GPU's 12 us against the host's 9.
  EXPECT_NEAR(time_host_or_gpu_bound_s(k), 12e-6, 1e-15);
}

// GPU-bound after the first launch: only the first launch's 2 us are exposed.
TEST(HostIssuedLaunches, LongKernelsHideLaterLaunches) {
  const std::vector<KernelLaunch> k{{50e-6, 2e-6}, {50e-6, 2e-6}, {50e-6, 2e-6}};
  EXPECT_NEAR(time_after_sync_s(k), 152e-6, 1e-15);
  EXPECT_NEAR(time_host_or_gpu_bound_s(k), 150e-6, 1e-15);
}

TEST(HostIssuedLaunches, HostLaunchIsTheMeasuredStreamGap) {
  DeviceRates r;
  r.kernel_overhead_s = 7e-6;
  EXPECT_EQ(host_launch_s(r), 7e-6);  // no measured overheads: the profile's kernel_overhead_s
  MeasuredTables tables;
  tables.overheads = MeasuredOverheads{};
  tables.overheads->kernel_launch_s = 3.9e-6;
  r.tables = &tables;
  EXPECT_EQ(host_launch_s(r), 3.9e-6);
}

}  // namespace
}  // namespace sextant::sim
