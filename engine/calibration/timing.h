// How every point of `sextant calibrate` is timed (the method its profile
// states): buffers carved from one allocation made before any timing loop,
// inputs rotated over enough buffer sets to exceed twice the L2 (so no launch
// finds its operands cached by the previous one), warm-up launches apart from
// the timed ones, CUDA events, and the median of several batches.
#pragma once

#include <cstddef>
#include <functional>
#include <string>

#include "kernels/stream.h"

namespace sextant::engine::calibration {

struct TimingSettings {
  int warmup_launches = 2;      // at least; warm-up also touches every buffer set once
  int repeats = 9;              // timed batches whose median is kept
  int repeats_long = 5;         // for points whose batch takes >= long_point_s
  double long_point_s = 2e-3;
  double min_batch_s = 50e-6;   // launches per batch: enough to cover this, so the host's
                                // launch rate does not show in a short kernel's time
  double graph_batch_s = 300e-6;  // median_seconds_in_graph: launches per captured batch
  double wait_before_batch_s = 40e-6;  // GPU-side wait queued before each timed graph (gpu_wait.h)
  std::string description() const;  // for the profile's `method:`
};

/// One device allocation, made once, handed out in 256-byte aligned pieces and
/// reset between points. Filled at construction with bf16 noise N(0, 1) (tensor
/// cores draw less power on zeros and run faster on them: gemm_bench's note), so
/// any piece read as bf16 holds finite values.
class DeviceScratch {
 public:
  DeviceScratch(std::size_t bytes, cudaStream_t stream);
  ~DeviceScratch();
  DeviceScratch(const DeviceScratch&) = delete;
  DeviceScratch& operator=(const DeviceScratch&) = delete;

  /// The next `bytes` (256-byte aligned); throws std::logic_error past the end
  /// (a planning error: scratch sizes are computed before allocating).
  void* take(std::size_t bytes);
  template <typename T>
  T* take_as(std::size_t count) { return static_cast<T*>(take(count * sizeof(T))); }
  void reset() { used_ = 0; }
  std::size_t bytes() const { return bytes_; }

 private:
  char* base_ = nullptr;
  std::size_t bytes_ = 0;
  std::size_t used_ = 0;
};

/// Bytes of `count` pieces of `bytes` each as DeviceScratch hands them out.
std::size_t aligned_bytes(std::size_t bytes);

/// Buffer sets to rotate over: the fewest whose total exceeds 2 x L2 (at least 1, at most 256).
int rotations_for(std::size_t set_bytes, std::size_t l2_bytes);

struct MeasurementContext {
  cudaStream_t stream = nullptr;
  std::size_t l2_bytes = 0;
  int sm_count = 0;
  /// Per-kernel time of a replayed CUDA graph of empty kernels (overheads.h);
  /// median_seconds_in_graph takes it off each kernel, as the simulator adds it back.
  double graph_kernel_s = 0;
  DeviceScratch* scratch = nullptr;
  TimingSettings timing;
};

/// Median seconds of one launch. launch(set) queues one launch on ctx.stream
/// using buffer set `set` (0 <= set < rotations). Warm-up: max(warmup_launches,
/// rotations) launches; then one timed launch estimates the batch size
/// (ceil(min_batch_s / estimate) launches), then `repeats` batches between CUDA
/// events, each giving its mean; the median of those is returned.
double median_seconds(const std::function<void(int set)>& launch, int rotations, const MeasurementContext& ctx);

/// Median seconds of one launch as the engine runs it: inside a replayed CUDA
/// graph. After median_seconds' warm-up, `batch` launches (enough to cover
/// timing.graph_batch_s, cycling over the sets) are captured into one graph;
/// each timed replay waits behind gpu_wait (so the host's graph launch is not
/// timed) and gives the mean per launch; the median of `repeats` replays,
/// less ctx.graph_kernel_s (the gap the simulator adds per kernel itself), is
/// returned (at least 1e-8). When the launches cannot be captured, falls back
/// to median_seconds.
double median_seconds_in_graph(const std::function<void(int set)>& launch, int rotations,
                               const MeasurementContext& ctx);

}  // namespace sextant::engine::calibration
