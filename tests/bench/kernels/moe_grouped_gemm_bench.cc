// The experts' grouped GEMMs (kernels/moe_grouped_gemm.h), cuBLAS's grouped GEMM
// against a loop of cuBLASLt products, over tokens per expert 16 ... 16k and 8,
// 32 and 128 experts, every expert with the same rows: the data to choose the
// backend by (issue 25) and to cost MoE layers from.
//
// Default shape: Qwen3-30B-A3B's experts (Hugging Face Qwen/Qwen3-30B-A3B
// config.json: hidden_size 2048, moe_intermediate_size 768), their first
// SwiGLU layer: in = 2048, out = 2 x 768 = 1536. Products: forward Y = X W^T,
// input gradient dX = dY W, weight gradient dW = dY^T X into fp32 (accumulated,
// beta 1: the engine's gradients; the grouped backend adds a bf16 staging pass)
// and into bf16 (beta 0: both backends' plain product).
//
// Method: operands filled with noise before the loop (tensor cores run faster on
// zeros); one warm-up call (cuBLAS's setup, cuBLASLt's heuristic per shape);
// then each iteration flushes the L2 (a write of twice its size, read from the
// device) outside the timed region, and CUDA events time the call on the device
// (so a loop that launches slower than the GPU runs shows its idle gaps).
// TFLOP/s = 2 x rows x in x out / mean time; the H100 SXM datasheet's dense bf16
// peak, 989.4 TFLOP/s, is in the context for comparison.
//
// Usage: moe_grouped_gemm_bench [--in N] [--out N] [--iterations N] [benchmark flags,
// e.g. --benchmark_filter=fwd --benchmark_format=csv]
#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cuda_check.h"
#include "kernels/moe_grouped_gemm.h"
#include "tests/bench/kernels/device_buffer.h"

namespace sextant::kernels {
namespace {

struct Options {
  int in = 2048, out = 1536, iterations = 20;
};

enum class Product { kForward, kInputGrad, kWeightGradFp32, kWeightGradBf16 };

const char* product_name(Product p) {
  switch (p) {
    case Product::kForward: return "fwd";
    case Product::kInputGrad: return "dgrad";
    case Product::kWeightGradFp32: return "wgrad_fp32";
    case Product::kWeightGradBf16: return "wgrad_bf16";
  }
  return "?";
}

// Fills `count` bf16 with noise: 1 Mi values made on the host, then doubled on
// the device (a multi-GB operand would take seconds to make on the host).
void fill_noise(const bench::Buffer& buffer, std::size_t count) {
  constexpr std::size_t kSeed = std::size_t{1} << 20;
  const std::size_t first = std::min(count, kSeed);
  bench::fill_random_bf16(buffer, first, 1.0f);
  auto* base = buffer.as<Bf16>();
  for (std::size_t done = first; done < count;) {
    const std::size_t n = std::min(done, count - done);
    SEXTANT_CUDA_CHECK(cudaMemcpy(base + done, base, n * sizeof(Bf16), cudaMemcpyDeviceToDevice));
    done += n;
  }
}

void run(benchmark::State& state, const Options& o, MoeGemmBackend backend, Product product, int experts,
         int tokens_per_expert) {
  const std::vector<std::int32_t> rows(static_cast<std::size_t>(experts), tokens_per_expert);
  const std::size_t total_rows = static_cast<std::size_t>(experts) * tokens_per_expert;
  const std::size_t weights = static_cast<std::size_t>(experts) * o.out * o.in;
  const std::size_t in_elements = total_rows * o.in, out_elements = total_rows * o.out;
  bench::Buffer x(in_elements * sizeof(Bf16)), y(out_elements * sizeof(Bf16)), w(weights * sizeof(Bf16)),
      dw(weights * sizeof(float)), staging(weights * sizeof(Bf16)),
      workspace(MoeGroupedGemm::workspace_bytes(experts)), flush(2 * bench::l2_bytes());
  fill_noise(x, in_elements);
  fill_noise(y, out_elements);
  fill_noise(w, weights);
  cudaStream_t stream = nullptr;
  SEXTANT_CUDA_CHECK(cudaStreamCreate(&stream));
  cudaEvent_t begin = nullptr, end = nullptr;
  SEXTANT_CUDA_CHECK(cudaEventCreate(&begin));
  SEXTANT_CUDA_CHECK(cudaEventCreate(&end));
  MoeGroupedGemm gemm(backend, experts, workspace.as<void>(), MoeGroupedGemm::workspace_bytes(experts));

  auto call = [&] {
    switch (product) {
      case Product::kForward:
        gemm.forward(y.as<Bf16>(), x.as<Bf16>(), w.as<Bf16>(), rows, o.in, o.out, stream);
        break;
      case Product::kInputGrad:
        gemm.backward_input(x.as<Bf16>(), y.as<Bf16>(), w.as<Bf16>(), rows, o.in, o.out, stream);
        break;
      case Product::kWeightGradFp32:
        gemm.backward_weight(dw.as<void>(), GemmOutput::kFp32, 1.0f, y.as<Bf16>(), x.as<Bf16>(), rows, o.in, o.out,
                             staging.as<Bf16>(), stream);
        break;
      case Product::kWeightGradBf16:
        gemm.backward_weight(w.as<void>(), GemmOutput::kBf16, 0.0f, y.as<Bf16>(), x.as<Bf16>(), rows, o.in, o.out,
                             nullptr, stream);
        break;
    }
  };
  call();  // warm-up
  SEXTANT_CUDA_CHECK(cudaStreamSynchronize(stream));
  double total_s = 0;
  for (auto _ : state) {
    SEXTANT_CUDA_CHECK(cudaMemsetAsync(flush.as<void>(), 0, 2 * bench::l2_bytes(), stream));
    SEXTANT_CUDA_CHECK(cudaEventRecord(begin, stream));
    call();
    SEXTANT_CUDA_CHECK(cudaEventRecord(end, stream));
    SEXTANT_CUDA_CHECK(cudaEventSynchronize(end));
    float ms = 0;
    SEXTANT_CUDA_CHECK(cudaEventElapsedTime(&ms, begin, end));
    state.SetIterationTime(ms * 1e-3);
    total_s += ms * 1e-3;
  }
  const double flops = 2.0 * static_cast<double>(total_rows) * o.in * o.out;
  state.counters["TFLOP/s"] = flops * static_cast<double>(state.iterations()) / total_s / 1e12;
  state.counters["rows"] = static_cast<double>(total_rows);
  cudaEventDestroy(begin);
  cudaEventDestroy(end);
  cudaStreamDestroy(stream);
}

// Strips this program's own flags from argv (Google Benchmark rejects unknown ones).
Options parse(int& argc, char** argv) {
  Options o;
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    auto value = [&](const char* flag, int& out) {
      if (std::strcmp(argv[i], flag) != 0 || i + 1 >= argc) return false;
      out = std::atoi(argv[++i]);
      return true;
    };
    if (value("--in", o.in) || value("--out", o.out) || value("--iterations", o.iterations)) continue;
    argv[kept++] = argv[i];
  }
  argc = kept;
  if (o.in <= 0 || o.out <= 0 || o.in % 8 != 0 || o.out % 8 != 0 || o.iterations <= 0) {
    std::fprintf(stderr, "moe_grouped_gemm_bench: --in and --out must be positive multiples of 8, "
                         "--iterations positive\n");
    std::exit(2);
  }
  return o;
}

}  // namespace
}  // namespace sextant::kernels

int main(int argc, char** argv) {
  using namespace sextant::kernels;
  static const Options options = parse(argc, argv);
  for (const Product product :
       {Product::kForward, Product::kInputGrad, Product::kWeightGradFp32, Product::kWeightGradBf16})
    for (const MoeGemmBackend backend : {MoeGemmBackend::kCublasGrouped, MoeGemmBackend::kCublasLtLoop})
      for (const int experts : {8, 32, 128})
        for (const int tokens : {16, 64, 256, 1024, 4096, 16384}) {
          const std::string name = std::string(product_name(product)) + "/" + to_string(backend) + "/experts:" +
                                   std::to_string(experts) + "/tokens_per_expert:" + std::to_string(tokens);
          benchmark::RegisterBenchmark(name.c_str(),
                                       [=](benchmark::State& state) {
                                         try {  // e.g. out of memory on a smaller GPU: say so, go on
                                           run(state, options, backend, product, experts, tokens);
                                         } catch (const std::exception& e) {
                                           state.SkipWithError(e.what());
                                         }
                                       })
              ->UseManualTime()
              ->Iterations(options.iterations)
              ->Unit(benchmark::kMicrosecond);
        }
  benchmark::Initialize(&argc, argv);
  benchmark::AddCustomContext("shape", "in " + std::to_string(options.in) + ", out " + std::to_string(options.out));
  benchmark::AddCustomContext("peak_bf16_dense_tflops", "989.4 (NVIDIA H100 SXM datasheet)");
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
