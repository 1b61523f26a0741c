#include "engine/calibration/overheads.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

#include "kernels/cuda_check.h"
#include "kernels/residual.h"

namespace sextant::engine::calibration {

namespace {

constexpr int kKernels = 256;

double median(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

class Graph {
 public:
  Graph(int kernels, kernels::Bf16* x, cudaStream_t stream) {
    cudaGraph_t graph = nullptr;
    SEXTANT_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < kernels; ++i) kernels::residual_add(x, x, x + 8, 8, stream);
    SEXTANT_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
    const cudaError_t status = cudaGraphInstantiate(&exec_, graph, 0);
    cudaGraphDestroy(graph);
    SEXTANT_CUDA_CHECK(status);
  }
  ~Graph() { cudaGraphExecDestroy(exec_); }
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  cudaGraphExec_t exec() const { return exec_; }

 private:
  cudaGraphExec_t exec_ = nullptr;
};

}  // namespace

Overheads measure_overheads(const MeasurementContext& ctx) {
  ctx.scratch->reset();
  auto* x = ctx.scratch->take_as<kernels::Bf16>(16);
  auto* one_float = ctx.scratch->take_as<float>(1);
  auto* tokens_device = ctx.scratch->take_as<std::int32_t>(8 * 2048);
  MeasurementContext batched = ctx;
  batched.timing.min_batch_s = 0;  // each "launch" below is already a batch
  Overheads o;
  o.kernel_launch_s = median_seconds(
                          [&](int) {
                            for (int i = 0; i < kKernels; ++i) kernels::residual_add(x, x, x + 8, 8, ctx.stream);
                          },
                          1, batched) /
                      kKernels;
  const Graph many(kKernels, x, ctx.stream);
  o.graph_kernel_s =
      median_seconds([&](int) { SEXTANT_CUDA_CHECK(cudaGraphLaunch(many.exec(), ctx.stream)); }, 1, batched) / kKernels;
  const Graph one(1, x, ctx.stream);
  const double one_s = median_seconds(
                           [&](int) {
                             for (int i = 0; i < kKernels; ++i) SEXTANT_CUDA_CHECK(cudaGraphLaunch(one.exec(), ctx.stream));
                           },
                           1, batched) /
                       kKernels;
  o.graph_launch_s = std::max(0.0, one_s - o.graph_kernel_s);

  std::vector<std::int32_t> tokens(8 * 2048, 1);
  float loss = 0;
  std::vector<double> step_s;
  for (int r = 0; r < ctx.timing.repeats * 4; ++r) {
    const auto start = std::chrono::steady_clock::now();
    SEXTANT_CUDA_CHECK(cudaMemcpyAsync(tokens_device, tokens.data(), tokens.size() * sizeof(std::int32_t),
                                       cudaMemcpyHostToDevice, ctx.stream));
    kernels::residual_add(x, x, x + 8, 8, ctx.stream);
    SEXTANT_CUDA_CHECK(cudaMemcpyAsync(&loss, one_float, sizeof(float), cudaMemcpyDeviceToHost, ctx.stream));
    SEXTANT_CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
    step_s.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  o.host_step_s = median(step_s);
  return o;
}

}  // namespace sextant::engine::calibration
