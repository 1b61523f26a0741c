// The MoE layer's routing before its host sync (issue 25): moe_router_forward
// (top-k of the fp32 logits) and moe_routing_map (each pair's permuted row),
// over T in {2048, 8192} tokens, E in {8, 128} experts and top-k in {2, 8};
// the routing map dropless with blocks rounded to 8 rows (the engine's layout,
// engine/transformer/moe_layer.cc) and with a capacity (factor 1.0) under both
// drop policies. T = 2048, E = 128, k = 8 is moe-fine-tiny's micro-batch, whose
// kernels Nsight Compute measured in reports/measurements/
// 2026-11-28-h100-moe-step-kernels/.
//
// Two timings of each call, CUDA events around it on the device:
// - graph: 20 calls captured in a CUDA graph and replayed, the time per call:
//   the kernels back to back without launch gaps, what the GPU spends;
// - stream: one call launched from the host, as the engine does (the flush
//   before it gives the host time to queue its kernels, so gaps show only where
//   a kernel ends before the host has launched the next).
// Inputs: logits N(0, 1) drawn once on the host; the routing map's ids and
// weights are the router's on them (a balanced load, as a trained router's). The
// L2 is flushed before each timed region (a write of twice its size; in a graph
// only the first of its calls starts cold), unless --keep-l2 (the engine's case:
// the router GEMM has just written the logits).
//
// To time the code before a change, build this file against the older kernels
// (their signatures are the same).
//
// Usage: moe_routing_bench [--iterations N] [--keep-l2] [benchmark flags,
// e.g. --benchmark_filter=routing_map/dropless --benchmark_format=csv]
#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda_check.h"
#include "kernels/moe_router.h"
#include "kernels/moe_routing_map.h"
#include "tests/bench/kernels/device_buffer.h"

namespace sextant::kernels {
namespace {

struct Options {
  int iterations = 50;
  bool keep_l2 = false;
};

constexpr int kCallsPerGraph = 20;

enum class Kernel { kRouterForward, kRoutingMapDropless, kRoutingMapByPosition, kRoutingMapByProbs };
enum class Timing { kGraph, kStream };

const char* kernel_name(Kernel k) {
  switch (k) {
    case Kernel::kRouterForward: return "router_forward";
    case Kernel::kRoutingMapDropless: return "routing_map/dropless";
    case Kernel::kRoutingMapByPosition: return "routing_map/capacity_by_position";
    case Kernel::kRoutingMapByProbs: return "routing_map/capacity_by_probs";
  }
  return "?";
}

void run(benchmark::State& state, const Options& o, Kernel kernel, Timing timing, int tokens, int experts,
         int topk) {
  const std::size_t pairs = static_cast<std::size_t>(tokens) * topk;
  std::vector<float> logits(static_cast<std::size_t>(tokens) * experts);
  std::mt19937_64 rng(20261128);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float& x : logits) x = normal(rng);

  MoeRouterOptions router;
  router.topk = topk;
  MoeRoutingOptions routing;
  routing.rows_multiple = 8;
  if (kernel == Kernel::kRoutingMapByPosition || kernel == Kernel::kRoutingMapByProbs) {
    routing.capacity = moe_expert_capacity(tokens, topk, experts, 1.0);
    routing.drop_policy =
        kernel == Kernel::kRoutingMapByProbs ? MoeDropPolicy::kProbs : MoeDropPolicy::kPosition;
  }
  const std::size_t workspace_bytes = moe_routing_map_workspace_bytes(tokens, topk, experts);
  bench::Buffer d_logits(logits.size() * sizeof(float)), ids(pairs * sizeof(std::int32_t)),
      weights(pairs * sizeof(float)), lse(tokens * sizeof(float)), score_sum(tokens * sizeof(float)),
      counts(2 * experts * sizeof(std::int32_t)), kept(experts * sizeof(std::int32_t)),
      rows(pairs * sizeof(std::int32_t)), workspace(workspace_bytes), flush(2 * bench::l2_bytes());
  SEXTANT_CUDA_CHECK(
      cudaMemcpy(d_logits.as<void>(), logits.data(), logits.size() * sizeof(float), cudaMemcpyHostToDevice));
  cudaStream_t stream = nullptr;
  SEXTANT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaEvent_t begin = nullptr, end = nullptr;
  SEXTANT_CUDA_CHECK(cudaEventCreate(&begin));
  SEXTANT_CUDA_CHECK(cudaEventCreate(&end));

  auto route = [&] {
    moe_router_forward(ids.as<std::int32_t>(), weights.as<float>(), lse.as<float>(), score_sum.as<float>(),
                       counts.as<std::int32_t>(), d_logits.as<float>(), nullptr, tokens, experts, router, stream);
  };
  auto map = [&] {
    moe_routing_map(rows.as<std::int32_t>(), kept.as<std::int32_t>(), counts.as<std::int32_t>() + experts,
                    ids.as<std::int32_t>(), weights.as<float>(), tokens, topk, experts, routing,
                    workspace.as<void>(), workspace_bytes, stream);
  };
  const std::function<void()> call = kernel == Kernel::kRouterForward ? std::function<void()>(route) : map;
  route();  // the routing map's inputs, and the router's warm-up
  call();   // warm-up
  SEXTANT_CUDA_CHECK(cudaStreamSynchronize(stream));

  cudaGraphExec_t graph = nullptr;
  if (timing == Timing::kGraph) {
    cudaGraph_t captured = nullptr;
    SEXTANT_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < kCallsPerGraph; ++i) call();
    SEXTANT_CUDA_CHECK(cudaStreamEndCapture(stream, &captured));
    SEXTANT_CUDA_CHECK(cudaGraphInstantiate(&graph, captured, 0));
    SEXTANT_CUDA_CHECK(cudaGraphDestroy(captured));
    SEXTANT_CUDA_CHECK(cudaGraphLaunch(graph, stream));  // warm-up (uploads the graph)
    SEXTANT_CUDA_CHECK(cudaStreamSynchronize(stream));
  }
  const int calls = timing == Timing::kGraph ? kCallsPerGraph : 1;
  for (auto _ : state) {
    if (!o.keep_l2) SEXTANT_CUDA_CHECK(cudaMemsetAsync(flush.as<void>(), 0, 2 * bench::l2_bytes(), stream));
    SEXTANT_CUDA_CHECK(cudaEventRecord(begin, stream));
    if (timing == Timing::kGraph)
      SEXTANT_CUDA_CHECK(cudaGraphLaunch(graph, stream));
    else
      call();
    SEXTANT_CUDA_CHECK(cudaEventRecord(end, stream));
    SEXTANT_CUDA_CHECK(cudaEventSynchronize(end));
    float ms = 0;
    SEXTANT_CUDA_CHECK(cudaEventElapsedTime(&ms, begin, end));
    state.SetIterationTime(ms * 1e-3 / calls);
  }
  state.counters["pairs"] = static_cast<double>(pairs);
  if (graph != nullptr) cudaGraphExecDestroy(graph);
  cudaEventDestroy(begin);
  cudaEventDestroy(end);
  cudaStreamDestroy(stream);
}

// Strips this program's own flags from argv (Google Benchmark rejects unknown ones).
Options parse(int& argc, char** argv) {
  Options o;
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--iterations") == 0 && i + 1 < argc) {
      o.iterations = std::atoi(argv[++i]);
      continue;
    }
    if (std::strcmp(argv[i], "--keep-l2") == 0) {
      o.keep_l2 = true;
      continue;
    }
    argv[kept++] = argv[i];
  }
  argc = kept;
  if (o.iterations <= 0) {
    std::fprintf(stderr, "moe_routing_bench: --iterations must be positive\n");
    std::exit(2);
  }
  return o;
}

}  // namespace
}  // namespace sextant::kernels

int main(int argc, char** argv) {
  using namespace sextant::kernels;
  static const Options options = parse(argc, argv);
  for (const Kernel kernel : {Kernel::kRouterForward, Kernel::kRoutingMapDropless, Kernel::kRoutingMapByPosition,
                              Kernel::kRoutingMapByProbs})
    for (const Timing timing : {Timing::kGraph, Timing::kStream})
      for (const int tokens : {2048, 8192})
        for (const int experts : {8, 128})
          for (const int topk : {2, 8}) {
            if (topk > experts) continue;
            const std::string name = std::string(kernel_name(kernel)) +
                                     (timing == Timing::kGraph ? "/graph" : "/stream") +
                                     "/tokens:" + std::to_string(tokens) + "/experts:" + std::to_string(experts) +
                                     "/topk:" + std::to_string(topk);
            benchmark::RegisterBenchmark(name.c_str(),
                                         [=](benchmark::State& state) {
                                           try {
                                             run(state, options, kernel, timing, tokens, experts, topk);
                                           } catch (const std::exception& e) {
                                             state.SkipWithError(e.what());
                                           }
                                         })
                ->UseManualTime()
                ->Iterations(options.iterations)
                ->Unit(benchmark::kMicrosecond);
          }
  benchmark::Initialize(&argc, argv);
  benchmark::AddCustomContext("l2", options.keep_l2 ? "kept between calls" : "flushed before each timed region");
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
