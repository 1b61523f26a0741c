#include "engine/calibration/timing.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <exception>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "kernels/bf16.h"
#include "kernels/cuda_check.h"
#include "kernels/gpu_wait.h"
#include "kernels/parameter_init.h"

namespace sextant::engine::calibration {

std::string TimingSettings::description() const {
  return "CUDA events; >= " + std::to_string(warmup_launches) +
         " warm-up launches touching every buffer set, then the median of " + std::to_string(repeats) +
         " timed batches (" + std::to_string(repeats_long) + " when a batch takes >= " +
         std::to_string(static_cast<int>(long_point_s * 1e3)) + " ms), each batch enough launches to cover " +
         std::to_string(static_cast<int>(min_batch_s * 1e6)) +
         " us (kernels the engine replays in its CUDA graph: captured batches covering " +
         std::to_string(static_cast<int>(graph_batch_s * 1e6)) + " us, each replay queued behind a " +
         std::to_string(static_cast<int>(wait_before_batch_s * 1e6)) +
         " us GPU-side wait, less the graph's per-kernel gap); inputs rotated over buffer sets totalling > 2x the device's L2; bf16 N(0,1) noise inputs; "
         "all buffers carved from one allocation made before timing";
}

std::size_t aligned_bytes(std::size_t bytes) { return (bytes + 255) / 256 * 256; }

DeviceScratch::DeviceScratch(std::size_t bytes, cudaStream_t stream) : bytes_(aligned_bytes(bytes)) {
  SEXTANT_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&base_), bytes_));
  // Noise in pieces: N(0, 1) fp32 into a temporary buffer, rounded to bf16 into the arena.
  constexpr std::size_t kPieceValues = std::size_t{1} << 24;
  float* fp32 = nullptr;
  SEXTANT_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&fp32), kPieceValues * sizeof(float)));
  const std::size_t values = bytes_ / sizeof(kernels::Bf16);
  for (std::size_t first = 0, piece = 0; first < values; first += kPieceValues, ++piece) {
    const std::size_t n = std::min(kPieceValues, values - first);
    kernels::fill_normal(fp32, n, 0.0f, 1.0f, 0x5eed, piece, stream);
    kernels::convert_to_bf16(reinterpret_cast<kernels::Bf16*>(base_) + first, fp32, n, stream);
  }
  SEXTANT_CUDA_CHECK(cudaStreamSynchronize(stream));
  cudaFree(fp32);
}

DeviceScratch::~DeviceScratch() { cudaFree(base_); }

void* DeviceScratch::take(std::size_t bytes) {
  const std::size_t size = aligned_bytes(bytes);
  if (used_ + size > bytes_)
    throw std::logic_error("DeviceScratch: " + std::to_string(used_ + size) + " bytes asked of " +
                           std::to_string(bytes_));
  void* p = base_ + used_;
  used_ += size;
  return p;
}

int rotations_for(std::size_t set_bytes, std::size_t l2_bytes) {
  if (set_bytes == 0) return 1;
  const std::size_t sets = 2 * l2_bytes / set_bytes + 1;
  return static_cast<int>(std::clamp<std::size_t>(sets, 1, 256));
}

namespace {

class EventPair {
 public:
  EventPair() {
    SEXTANT_CUDA_CHECK(cudaEventCreate(&start_));
    SEXTANT_CUDA_CHECK(cudaEventCreate(&stop_));
  }
  ~EventPair() {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
  }
  EventPair(const EventPair&) = delete;
  EventPair& operator=(const EventPair&) = delete;
  cudaEvent_t start() const { return start_; }
  cudaEvent_t stop() const { return stop_; }
  double elapsed_s() const {
    SEXTANT_CUDA_CHECK(cudaEventSynchronize(stop_));
    float ms = 0;
    SEXTANT_CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
    return ms * 1e-3;
  }

 private:
  cudaEvent_t start_ = nullptr;
  cudaEvent_t stop_ = nullptr;
};

}  // namespace

double median_seconds(const std::function<void(int set)>& launch, int rotations, const MeasurementContext& ctx) {
  const TimingSettings& t = ctx.timing;
  int set = 0;
  auto next = [&] {
    launch(set);
    set = (set + 1) % rotations;
  };
  for (int i = 0; i < std::max(t.warmup_launches, rotations); ++i) next();
  EventPair events;
  SEXTANT_CUDA_CHECK(cudaEventRecord(events.start(), ctx.stream));
  next();
  SEXTANT_CUDA_CHECK(cudaEventRecord(events.stop(), ctx.stream));
  const double estimate_s = std::max(events.elapsed_s(), 1e-7);
  const int batch = static_cast<int>(std::clamp(std::ceil(t.min_batch_s / estimate_s), 1.0, 4096.0));
  const int repeats = batch * estimate_s >= t.long_point_s ? t.repeats_long : t.repeats;
  std::vector<double> means;
  for (int r = 0; r < repeats; ++r) {
    SEXTANT_CUDA_CHECK(cudaEventRecord(events.start(), ctx.stream));
    for (int i = 0; i < batch; ++i) next();
    SEXTANT_CUDA_CHECK(cudaEventRecord(events.stop(), ctx.stream));
    means.push_back(events.elapsed_s() / batch);
  }
  std::nth_element(means.begin(), means.begin() + repeats / 2, means.end());
  return means[static_cast<std::size_t>(repeats / 2)];
}

namespace {

// A captured batch of launches, instantiated; empty when capture failed.
class CapturedBatch {
 public:
  CapturedBatch(const std::function<void()>& queue, cudaStream_t stream) {
    if (cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed) != cudaSuccess) {
      (void)cudaGetLastError();
      return;
    }
    bool queued = true;
    try {
      queue();
    } catch (const std::exception&) {
      queued = false;
    }
    cudaGraph_t graph = nullptr;
    const cudaError_t ended = cudaStreamEndCapture(stream, &graph);
    if (queued && ended == cudaSuccess && graph != nullptr &&
        cudaGraphInstantiate(&exec_, graph, 0) != cudaSuccess)
      exec_ = nullptr;
    if (graph != nullptr) cudaGraphDestroy(graph);
    (void)cudaGetLastError();  // a failed capture leaves its error behind; the caller falls back
  }
  ~CapturedBatch() {
    if (exec_ != nullptr) cudaGraphExecDestroy(exec_);
  }
  CapturedBatch(const CapturedBatch&) = delete;
  CapturedBatch& operator=(const CapturedBatch&) = delete;
  bool ok() const { return exec_ != nullptr; }
  void launch(cudaStream_t stream) const { SEXTANT_CUDA_CHECK(cudaGraphLaunch(exec_, stream)); }

 private:
  cudaGraphExec_t exec_ = nullptr;
};

}  // namespace

double median_seconds_in_graph(const std::function<void(int set)>& launch, int rotations,
                               const MeasurementContext& ctx) {
  const TimingSettings& t = ctx.timing;
  for (int i = 0; i < std::max(t.warmup_launches, rotations); ++i) launch(i % rotations);
  const auto wait_ns = static_cast<std::int64_t>(t.wait_before_batch_s * 1e9);
  EventPair events;
  auto timed_replay = [&](const CapturedBatch& batch, int launches) {
    kernels::gpu_wait(wait_ns, ctx.stream);
    SEXTANT_CUDA_CHECK(cudaEventRecord(events.start(), ctx.stream));
    batch.launch(ctx.stream);
    SEXTANT_CUDA_CHECK(cudaEventRecord(events.stop(), ctx.stream));
    return events.elapsed_s() / launches;
  };
  // Estimate from one graph holding every set once (at least one launch).
  const CapturedBatch probe([&] { for (int i = 0; i < rotations; ++i) launch(i); }, ctx.stream);
  if (!probe.ok()) return median_seconds(launch, rotations, ctx);
  probe.launch(ctx.stream);
  const double estimate_s = std::max(timed_replay(probe, rotations), 1e-7);
  const int batch = static_cast<int>(std::clamp(std::ceil(t.graph_batch_s / estimate_s), 1.0, 4096.0));
  const CapturedBatch graph([&] { for (int i = 0; i < batch; ++i) launch(i % rotations); }, ctx.stream);
  if (!graph.ok()) return median_seconds(launch, rotations, ctx);
  graph.launch(ctx.stream);  // first replay uploads the graph
  const int repeats = batch * estimate_s >= t.long_point_s ? t.repeats_long : t.repeats;
  std::vector<double> means;
  for (int r = 0; r < repeats; ++r) means.push_back(timed_replay(graph, batch));
  std::nth_element(means.begin(), means.begin() + repeats / 2, means.end());
  return std::max(means[static_cast<std::size_t>(repeats / 2)] - ctx.graph_kernel_s, 1e-8);
}

}  // namespace sextant::engine::calibration
