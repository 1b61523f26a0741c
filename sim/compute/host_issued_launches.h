// Kernels the host launches one by one from a point where the GPU has caught
// up with it (a cudaStreamSynchronize, or a stream that ran dry): each kernel
// can start only once the host has issued it, so where the host's per-launch
// time exceeds the kernels' GPU time the launches, not the kernels, set the
// pace. Inside a replayed CUDA graph (launch_mode.h) the host issues nothing
// per kernel and none of this applies.
//
// Used by the engine's MoE layer (engine_moe_kernels.h), whose router copies the
// experts' row counts to the host and waits for them once per layer: the host
// cannot run ahead of the GPU past that point, and the step cannot be one graph.
#pragma once

#include <span>

#include "sim/compute/device_rates.h"

namespace sextant::sim {

/// One launch as the host issues it and the GPU runs it.
struct KernelLaunch {
  double gpu_s = 0;   // the kernel's time on the stream (its table time with the stream's gap)
  double host_s = 0;  // the host's time to issue it (host_launch_s, or a library call's own)
};

/// The host's time to launch one kernel outside a graph: the profile's measured
/// stream launch gap (overheads.kernel_launch_s: back-to-back launches of an
/// 8-element kernel, so the host's rate, not the GPU's), else its
/// kernel_overhead_s (launch_mode.h: measured_kernel_gap_s under kKernelsLaunched).
double host_launch_s(const DeviceRates& rates);

/// Time from a host sync (GPU idle, host about to issue) until the GPU has run
/// `launches` in order. Kernel i starts when the GPU has finished kernel i-1 and
/// the host has issued kernels 1..i: gpu_end_i = max(gpu_end_{i-1}, Σ_{j<=i} host_s_j) + gpu_s_i.
double time_after_sync_s(std::span<const KernelLaunch> launches);

/// The same launches where the host may start ahead (no sync before them): the
/// longer of the GPU's and the host's sums, the throughput bound of the two
/// queues (exact when one side is the bottleneck throughout).
double time_host_or_gpu_bound_s(std::span<const KernelLaunch> launches);

}  // namespace sextant::sim
