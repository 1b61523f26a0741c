// Every matrix product of one transformer layer and the LM head, at a model's
// shapes (default GPT-1.3B at micro-batch 4: tokens 8192, hidden 2048, FFN
// 8192, vocabulary 51200), through kernels/gemm_cublaslt: the time of
// cuBLASLt's heuristic first choice beside the best of its first 8 candidates
// (CublasLtGemm::tune), and the epilogue variants the engine can fuse (bias,
// GELU with its input saved, GELU backward, a residual added through C) beside
// the plain product, so each fusion's cost shows.
//
// Method: operands filled with uniform noise (tensor cores run faster on
// zeros), one warm-up launch, then `repeats` launches between CUDA events per
// candidate. TFLOP/s = 2 m n k / time; the datasheet's dense bf16 peak
// (H100 SXM 989.4 TFLOP/s) is printed beside it.
//
// Usage: gemm_bench [--tokens T] [--hidden C] [--ffn F] [--vocab V] [--repeats R]
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "kernels/cuda_check.h"
#include "kernels/gemm_cublaslt.h"
#include "tests/bench/kernels/device_buffer.h"

namespace sextant::kernels {
namespace {

constexpr double kPeakFlopsPerS = 989.4e12;  // NVIDIA H100 SXM datasheet, dense bf16

struct Options {
  long long tokens = 8192, hidden = 2048, ffn = 8192, vocab = 51200;
  int repeats = 10;
};

using bench::Buffer;
using bench::fill_random_bf16;

void run(const Options& o) {
  const long long T = o.tokens, C = o.hidden, F = o.ffn, V = o.vocab;
  const long long widest = std::max({3 * C, F, V});
  Buffer x(2 * T * widest), w(2 * widest * std::max(C, F)), y(2 * T * widest), residual(2 * T * C),
      aux(2 * T * F), bias(2 * widest), ones(2 * T), dw(4 * widest * std::max(C, F)),
      workspace(kCublasLtWorkspaceBytes);
  fill_random_bf16(x, static_cast<std::size_t>(T * widest), 1.0f);
  fill_random_bf16(w, static_cast<std::size_t>(widest * std::max(C, F)), 1.0f);
  fill_random_bf16(residual, static_cast<std::size_t>(T * C), 1.0f);
  fill_random_bf16(aux, static_cast<std::size_t>(T * F), 1.0f);
  fill_random_bf16(bias, static_cast<std::size_t>(widest), 1.0f);
  {
    const std::vector<Bf16> host(static_cast<std::size_t>(T), Bf16{0x3f80});  // bf16 1.0
    SEXTANT_CUDA_CHECK(cudaMemcpy(ones.as<void>(), host.data(), host.size() * sizeof(Bf16), cudaMemcpyHostToDevice));
  }
  SEXTANT_CUDA_CHECK(cudaMemset(dw.as<void>(), 0, 4 * widest * std::max(C, F)));
  cudaStream_t stream = nullptr;
  SEXTANT_CUDA_CHECK(cudaStreamCreate(&stream));
  CublasLtGemm gemm(workspace.as<void>(), kCublasLtWorkspaceBytes);

  std::printf("%-34s %22s %10s %8s %10s %8s %5s\n", "product", "m n k", "first_ms", "TFLOP/s", "best_ms",
              "TFLOP/s", "pick");
  double total_first = 0, total_best = 0;
  auto product = [&](const char* name, long long m, long long n, long long k, bool ta, bool tb,
                     auto&& configure) {
    GemmArgs g;
    g.m = static_cast<int>(m), g.n = static_cast<int>(n), g.k = static_cast<int>(k);
    g.a = x.as<Bf16>(), g.transpose_a = ta ? Transpose::kYes : Transpose::kNo;
    g.b = w.as<Bf16>(), g.transpose_b = tb ? Transpose::kYes : Transpose::kNo;
    g.c = y.as<void>();
    configure(g);
    const std::string dims = std::to_string(m) + " " + std::to_string(n) + " " + std::to_string(k);
    try {
      const std::vector<float> ms = gemm.tune(g, stream, 8, o.repeats);
      int best = 0;
      for (std::size_t i = 0; i < ms.size(); ++i)
        if (!std::isnan(ms[i]) && (std::isnan(ms[static_cast<std::size_t>(best)]) || ms[i] < ms[static_cast<std::size_t>(best)]))
          best = static_cast<int>(i);
      const double flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
      const double first = ms[0], fastest = ms[static_cast<std::size_t>(best)];
      std::printf("%-34s %22s %10.4f %8.1f %10.4f %8.1f %2d/%zu\n", name, dims.c_str(), first,
                  flops / (first * 1e-3) / 1e12, fastest, flops / (fastest * 1e-3) / 1e12, best, ms.size());
      total_first += first;
      total_best += fastest;
    } catch (const std::exception& e) {
      std::printf("%-34s %22s unsupported: %s\n", name, dims.c_str(), e.what());
    }
  };
  auto none = [](GemmArgs&) {};
  auto with_bias = [&](GemmArgs& g) { g.epilogue = GemmEpilogue::kBias, g.bias = bias.as<Bf16>(); };
  auto with_bias_residual = [&](GemmArgs& g) {
    with_bias(g);
    g.c_source = residual.as<void>(), g.beta = 1.0f;
  };
  auto weight_grad = [&](GemmArgs& g) { g.c = dw.as<void>(), g.c_type = GemmOutput::kFp32, g.beta = 1.0f; };

  std::printf("-- forward (Y = X W^T)\n");
  product("qkv +bias", T, 3 * C, C, false, true, with_bias);
  product("proj +bias", T, C, C, false, true, with_bias);
  product("proj +bias +residual (C != D)", T, C, C, false, true, with_bias_residual);
  product("fc1", T, F, C, false, true, none);
  product("fc1 +bias", T, F, C, false, true, with_bias);
  product("fc1 +bias+GELU, input saved", T, F, C, false, true, [&](GemmArgs& g) {
    g.epilogue = GemmEpilogue::kBiasGelu, g.bias = bias.as<Bf16>(), g.gelu_input = aux.as<Bf16>();
  });
  product("fc2 +bias", T, C, F, false, true, with_bias);
  product("fc2 +bias +residual (C != D)", T, C, F, false, true, with_bias_residual);
  product("lm head", T, V, C, false, true, none);
  std::printf("-- input gradients (dX = dY W)\n");
  product("qkv dX", T, C, 3 * C, false, false, none);
  product("proj dX", T, C, C, false, false, none);
  product("fc1 dX", T, C, F, false, false, none);
  product("fc2 dX", T, F, C, false, false, none);
  product("fc2 dX +GELU backward", T, F, C, false, false, [&](GemmArgs& g) {
    g.epilogue = GemmEpilogue::kGeluBackward, g.gelu_input = aux.as<Bf16>();
  });
  product("lm head dX", T, C, V, false, false, none);
  std::printf("-- weight gradients (dW += dY^T X, fp32)\n");
  product("qkv dW", 3 * C, C, T, true, false, weight_grad);
  product("proj dW", C, C, T, true, false, weight_grad);
  product("fc1 dW", F, C, T, true, false, weight_grad);
  product("fc1 dW, beta 0", F, C, T, true, false, [&](GemmArgs& g) { weight_grad(g), g.beta = 0.0f; });
  product("fc2 dW", C, F, T, true, false, weight_grad);
  product("lm head dW", V, C, T, true, false, weight_grad);
  product("qkv dbias (ones . dY)", 1, 3 * C, T, false, false, [&](GemmArgs& g) {
    g.a = ones.as<Bf16>(), g.b = x.as<Bf16>(), weight_grad(g);
  });
  std::printf("sum of the rows above: heuristic first %.3f ms, best %.3f ms (peak %.1f TFLOP/s)\n", total_first,
              total_best, kPeakFlopsPerS / 1e12);
  cudaStreamDestroy(stream);
}

}  // namespace
}  // namespace sextant::kernels

int main(int argc, char** argv) {
  sextant::kernels::Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--tokens" && has_value) o.tokens = std::atoll(argv[++i]);
    else if (arg == "--hidden" && has_value) o.hidden = std::atoll(argv[++i]);
    else if (arg == "--ffn" && has_value) o.ffn = std::atoll(argv[++i]);
    else if (arg == "--vocab" && has_value) o.vocab = std::atoll(argv[++i]);
    else if (arg == "--repeats" && has_value) o.repeats = std::atoi(argv[++i]);
    else {
      std::fprintf(stderr, "usage: %s [--tokens T] [--hidden C] [--ffn F] [--vocab V] [--repeats R]\n", argv[0]);
      return 2;
    }
  }
  try {
    sextant::kernels::run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gemm_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
