// Bandwidth of the memory-bound kernels in kernels/ and throughput of the
// cuBLASLt products, at GPT-1.3B's shapes (hidden 2048, FFN 8192, vocabulary
// 51200, sequence 2048) on one GPU.
//
// Method (CUTLASS's and llm.c's): buffers allocated before timing; three
// warm-up launches; then `iters` launches between two CUDA events, so the time
// is device time per launch. Working sets are at least 2.5x the L2 cache (read
// from the device) so the data comes from HBM. Bytes are the napkin minimum a
// kernel must move (each input read once, each output written once); a kernel
// that reads something twice shows it as lower GB/s. The ceiling printed beside
// them is the datasheet's (H100 SXM: 3.35 TB/s, 989.4 TFLOP/s dense bf16;
// override with --peak-bytes-per-s / --peak-flops-per-s), and a device-to-device
// copy is measured as the practical ceiling.
//
// A plain program rather than Google Benchmark: the times come from CUDA events,
// and the GPU machine runs it without the benchmark library.
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <unordered_set>
#include <vector>

#include "kernels/adamw.h"
#include "kernels/cross_entropy.h"
#include "kernels/cuda_check.h"
#include "kernels/embedding.h"
#include "kernels/gelu.h"
#include "kernels/gemm_cublaslt.h"
#include "kernels/grad_norm.h"
#include "kernels/layernorm.h"
#include "kernels/residual.h"
#include "kernels/rmsnorm.h"
#include "tests/bench/kernels/device_buffer.h"
#include "kernels/rope.h"
#include "kernels/swiglu.h"

namespace sextant::kernels {
namespace {

struct Options {
  double peak_bytes_per_s = 3.35e12;   // NVIDIA H100 SXM datasheet, HBM3
  double peak_flops_per_s = 989.4e12;  // NVIDIA H100 SXM datasheet, dense bf16
  int iters = 20;
};

using bench::Buffer;
using bench::fill_random_bf16;

struct Row {
  std::string kernel, shape;
  double seconds, bytes, flops;
};

class Bench {
 public:
  explicit Bench(Options options) : options_(options) {
    SEXTANT_CUDA_CHECK(cudaEventCreate(&start_));
    SEXTANT_CUDA_CHECK(cudaEventCreate(&stop_));
  }
  ~Bench() {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
  }

  /// Times `launch` and records a row; bytes or flops may be 0.
  void time(const std::string& kernel, const std::string& shape, double bytes, double flops,
            const std::function<void()>& launch) {
    for (int i = 0; i < 3; ++i) launch();
    SEXTANT_CUDA_CHECK(cudaDeviceSynchronize());
    SEXTANT_CUDA_CHECK(cudaEventRecord(start_));
    for (int i = 0; i < options_.iters; ++i) launch();
    SEXTANT_CUDA_CHECK(cudaEventRecord(stop_));
    SEXTANT_CUDA_CHECK(cudaEventSynchronize(stop_));
    float ms = 0;
    SEXTANT_CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
    rows_.push_back({kernel, shape, ms * 1e-3 / options_.iters, bytes, flops});
    std::printf("  %-28s %-26s %9.1f us\n", kernel.c_str(), shape.c_str(),
                rows_.back().seconds * 1e6);
    std::fflush(stdout);
  }

  void print_table() const {
    std::printf("\n| kernel | shape | time (us) | GB/s | %% of %.2f TB/s | TFLOP/s | %% of %.0f TFLOP/s |\n",
                options_.peak_bytes_per_s / 1e12, options_.peak_flops_per_s / 1e12);
    std::printf("|---|---|---:|---:|---:|---:|---:|\n");
    for (const Row& r : rows_) {
      std::printf("| %s | %s | %.1f | ", r.kernel.c_str(), r.shape.c_str(), r.seconds * 1e6);
      if (r.bytes > 0)
        std::printf("%.0f | %.1f | ", r.bytes / r.seconds / 1e9,
                    100 * r.bytes / r.seconds / options_.peak_bytes_per_s);
      else
        std::printf("- | - | ");
      if (r.flops > 0)
        std::printf("%.0f | %.1f |\n", r.flops / r.seconds / 1e12,
                    100 * r.flops / r.seconds / options_.peak_flops_per_s);
      else
        std::printf("- | - |\n");
    }
  }

 private:
  Options options_;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
  std::vector<Row> rows_;
};

std::string dims(std::initializer_list<long long> values) {
  std::string s;
  for (long long v : values) {
    if (!s.empty()) s += 'x';
    s += std::to_string(v);
  }
  return s;
}

void run(const Options& options) {
  int device = 0;
  cudaDeviceProp prop{};
  SEXTANT_CUDA_CHECK(cudaGetDevice(&device));
  SEXTANT_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  std::printf("device: %s, %d SMs, L2 %.0f MiB, %.1f GiB\n", prop.name, prop.multiProcessorCount,
              prop.l2CacheSize / 1048576.0, prop.totalGlobalMem / 1073741824.0);

  Bench bench(options);
  cudaStream_t stream = nullptr;  // the default stream
  const long long T = 2048, C = 2048, F = 8192, V = 51200;
  const long long rows = 8 * T;  // micro-batch 8: 64 MiB per (rows, C) bf16 tensor
  const double act = 2.0 * rows * C;  // bytes of one (rows, C) bf16 tensor

  {  // practical ceiling
    const std::size_t bytes = std::size_t{1} << 30;
    Buffer a(bytes), b(bytes);
    bench.time("cudaMemcpy D2D", "1 GiB", 2.0 * bytes, 0, [&] {
      SEXTANT_CUDA_CHECK(cudaMemcpyAsync(b.as<char>(), a.as<char>(), bytes,
                                         cudaMemcpyDeviceToDevice, stream));
    });
  }
  {
    Buffer x(act), out(act), gamma(2 * C), beta(2 * C), mean(4 * rows), rstd(4 * rows),
        dout(act), dinp(act), dgamma(4 * C), dbeta(4 * C);
    const std::size_t ws_bytes = layernorm_backward_workspace_bytes(rows, C);
    Buffer ws(ws_bytes);
    const std::string shape = dims({rows, C});
    bench.time("layernorm_forward", shape, 2 * act + 8.0 * rows, 0, [&] {
      layernorm_forward(out.as<Bf16>(), mean.as<float>(), rstd.as<float>(), x.as<Bf16>(),
                        gamma.as<Bf16>(), beta.as<Bf16>(), rows, C, 1e-5f, stream);
    });
    bench.time("layernorm_backward", shape, 3 * act + 8.0 * rows, 0, [&] {
      layernorm_backward(dinp.as<Bf16>(), dgamma.as<float>(), dbeta.as<float>(), dout.as<Bf16>(),
                         x.as<Bf16>(), gamma.as<Bf16>(), mean.as<float>(), rstd.as<float>(), rows,
                         C, ws.as<void>(), ws_bytes, stream);
    });
    bench.time("rmsnorm_forward", shape, 2 * act + 4.0 * rows, 0, [&] {
      rmsnorm_forward(out.as<Bf16>(), rstd.as<float>(), x.as<Bf16>(), gamma.as<Bf16>(), rows, C,
                      1e-6f, stream);
    });
    bench.time("rmsnorm_backward", shape, 3 * act + 4.0 * rows, 0, [&] {
      rmsnorm_backward(dinp.as<Bf16>(), dgamma.as<float>(), dout.as<Bf16>(), x.as<Bf16>(),
                       gamma.as<Bf16>(), rstd.as<float>(), rows, C, ws.as<void>(), ws_bytes,
                       stream);
    });
    bench.time("residual_add", shape, 3 * act, 0, [&] {
      residual_add(out.as<Bf16>(), x.as<Bf16>(), dout.as<Bf16>(), rows * C, stream);
    });
  }
  {
    // The engine's fused form (engine/transformer.cc norm_backward) at micro-batch
    // 4 of GPT-1.3B: the residual stream's gradient added in place (residual_grad
    // = dinp), parameter gradients written (the first micro-batch), and dinp's
    // column sums (the next bias gradient). Bytes: dout, inp and the residual
    // read, dinp written, 4 (rows, C) bf16 tensors (134 MB, 2.5x a 50 MiB L2).
    // mean and rstd stay zero, so repeated in-place launches stay finite.
    const long long fused_rows = 4 * T;
    const double fused_act = 2.0 * fused_rows * C;
    Buffer x(fused_act), gamma(2 * C), mean(4 * fused_rows), rstd(4 * fused_rows),
        dout(fused_act), dinp(fused_act), dgamma(4 * C), dbeta(4 * C), dsum(4 * C);
    fill_random_bf16(x, fused_rows * C);
    fill_random_bf16(gamma, C);
    fill_random_bf16(dout, fused_rows * C);
    fill_random_bf16(dinp, fused_rows * C);
    const std::size_t ws_bytes = layernorm_backward_workspace_bytes(fused_rows, C);
    Buffer ws(ws_bytes);
    NormBackwardOptions fused;
    fused.residual_grad = dinp.as<Bf16>();
    fused.accumulate_param_grads = false;
    fused.dinp_column_sums = dsum.as<float>();
    const std::string shape = dims({fused_rows, C}) + " +res +dsum";
    bench.time("layernorm_backward (fused)", shape, 4 * fused_act, 0, [&] {
      layernorm_backward(dinp.as<Bf16>(), dgamma.as<float>(), dbeta.as<float>(), dout.as<Bf16>(),
                         x.as<Bf16>(), gamma.as<Bf16>(), mean.as<float>(), rstd.as<float>(),
                         fused_rows, C, ws.as<void>(), ws_bytes, stream, fused);
    });
    bench.time("rmsnorm_backward (fused)", shape, 4 * fused_act, 0, [&] {
      rmsnorm_backward(dinp.as<Bf16>(), dgamma.as<float>(), dout.as<Bf16>(), x.as<Bf16>(),
                       gamma.as<Bf16>(), rstd.as<float>(), fused_rows, C, ws.as<void>(), ws_bytes,
                       stream, fused);
    });
  }
  {
    const double h = 2.0 * rows * F;  // one (rows, F) bf16 tensor
    Buffer x(h), out(h), bias(2 * F), dout(h), dbias(4 * F);
    const std::size_t ws_bytes = gelu_backward_workspace_bytes(rows, F);
    Buffer ws(ws_bytes);
    const std::string shape = dims({rows, F});
    bench.time("gelu_forward (bias)", shape, 2 * h, 0, [&] {
      gelu_forward(out.as<Bf16>(), x.as<Bf16>(), bias.as<Bf16>(), rows, F, stream);
    });
    bench.time("gelu_backward (dbias)", shape, 3 * h, 0, [&] {
      gelu_backward(out.as<Bf16>(), dbias.as<float>(), dout.as<Bf16>(), x.as<Bf16>(),
                    bias.as<Bf16>(), rows, F, ws.as<void>(), ws_bytes, stream);
    });
  }
  {
    const long long half = F / 2;  // SwiGLU: fc1 writes 2 * half = F columns
    const double in = 2.0 * rows * F, o = 2.0 * rows * half;
    Buffer inp(in), out(o), dinp(in);
    const std::string shape = dims({rows, F}) + "->" + std::to_string(half);
    bench.time("swiglu_forward", shape, in + o, 0, [&] {
      swiglu_forward(out.as<Bf16>(), inp.as<Bf16>(), rows, half, stream);
    });
    bench.time("swiglu_backward", shape, 2 * in + o, 0, [&] {
      swiglu_backward(dinp.as<Bf16>(), out.as<Bf16>(), inp.as<Bf16>(), rows, half, stream);
    });
  }
  {
    // Llama-style GQA at micro-batch 4: 32 query and 8 key/value heads of 128,
    // so a (tokens, 48 * 128) fused row of which the 40 Q and K heads are read
    // and written in place. One buffer's Q and K (84 MB) are not 2.5x an H100's
    // L2, so the launches rotate over enough copies to be.
    RopeShape shape;
    shape.batch = 4, shape.seq = static_cast<int>(T), shape.heads = 32, shape.kv_heads = 8;
    shape.head_dim = 128;
    shape.row_stride = (shape.heads + 2 * shape.kv_heads) * shape.head_dim;
    const double tokens = static_cast<double>(shape.batch) * shape.seq;
    const double rotated = 2.0 * tokens * (shape.heads + shape.kv_heads) * shape.head_dim;
    const int copies = static_cast<int>(std::ceil(2.5 * prop.l2CacheSize / rotated));
    std::vector<std::unique_ptr<Buffer>> qkv;
    for (int i = 0; i < copies; ++i)
      qkv.push_back(std::make_unique<Buffer>(2.0 * tokens * shape.row_stride));
    int next = 0;
    bench.time("rope_forward", dims({static_cast<long long>(tokens), shape.heads, shape.kv_heads,
                                     shape.head_dim}),
               2 * rotated, 0, [&] {
                 rope_forward(qkv[next]->as<Bf16>(), shape, stream);
                 next = (next + 1) % copies;
               });
  }
  {
    const int batch = static_cast<int>(rows / T);
    std::vector<std::int32_t> tokens(rows);
    std::mt19937 rng(1);
    std::uniform_int_distribution<int> any(0, static_cast<int>(V) - 1);
    for (auto& t : tokens) t = any(rng);
    const double unique = static_cast<double>(std::unordered_set<int>(tokens.begin(), tokens.end()).size());
    Buffer d_tokens(4 * rows), wte(2 * V * C), wpe(2 * T * C), out(act), dwte(4 * V * C),
        dwpe(4 * T * C);
    SEXTANT_CUDA_CHECK(cudaMemcpy(d_tokens.as<void>(), tokens.data(), 4 * rows, cudaMemcpyHostToDevice));
    const std::size_t ws_bytes = embedding_backward_workspace_bytes(batch, T, V);
    Buffer ws(ws_bytes);
    const std::string shape = dims({rows, C}) + " V" + std::to_string(V);
    bench.time("embedding_forward", shape, 2 * act + 2.0 * T * C + 4.0 * rows, 0, [&] {
      embedding_forward(out.as<Bf16>(), d_tokens.as<std::int32_t>(), wte.as<Bf16>(),
                        wpe.as<Bf16>(), batch, T, C, stream);
    });
    // dout once, plus read-modify-write of the touched fp32 rows of dwte and of dwpe.
    bench.time("embedding_backward", shape, act + 8.0 * unique * C + 8.0 * T * C, 0, [&] {
      embedding_backward(dwte.as<float>(), dwpe.as<float>(), out.as<Bf16>(),
                         d_tokens.as<std::int32_t>(), batch, T, V, C, ws.as<void>(), ws_bytes,
                         stream);
    });
  }
  {
    const long long ce_rows = 4 * T;  // micro-batch 4, as issue 4's GPT-1.3B runs
    const double logits_bytes = 2.0 * ce_rows * V;
    Buffer logits(logits_bytes), targets(4 * ce_rows), losses(4 * ce_rows);
    bench.time("softmax_cross_entropy", dims({ce_rows, V}) + " in place", 2 * logits_bytes, 0, [&] {
      softmax_cross_entropy(losses.as<float>(), logits.as<Bf16>(), logits.as<Bf16>(),
                            targets.as<std::int32_t>(), ce_rows, V, 1.0f / ce_rows, stream);
    });
  }
  {
    const std::size_t n = std::size_t{1} << 28;  // 268M parameters per launch
    Buffer master(4 * n), weights(2 * n), m(4 * n), v(4 * n), grads(4 * n), sum(4), norm(4),
        scale(4), ws(grad_sum_squares_workspace_bytes());
    const std::string shape = std::to_string(n >> 20) + " Mi params";
    AdamWStep step;
    bench.time("adamw_update", shape, 30.0 * n, 0, [&] {
      adamw_update(master.as<float>(), weights.as<Bf16>(), m.as<float>(), v.as<float>(),
                   grads.as<float>(), n, step, nullptr, stream);
    });
    bench.time("grad_sum_squares_accumulate", shape, 4.0 * n, 0, [&] {
      grad_sum_squares_accumulate(sum.as<float>(), grads.as<float>(), n, ws.as<void>(),
                                  grad_sum_squares_workspace_bytes(), stream);
    });
  }
  {
    const long long tokens = 4 * T;
    Buffer workspace(kCublasLtWorkspaceBytes);
    CublasLtGemm gemm(workspace.as<void>(), kCublasLtWorkspaceBytes);
    Buffer x(2 * tokens * F), w(2 * F * F), y(4 * tokens * F), bias(2 * F), pre(2 * tokens * F),
        dw(4 * F * F);
    fill_random_bf16(x, tokens * F);
    fill_random_bf16(w, F * F);
    auto product = [&](const char* name, int m, int n, int k, Transpose ta, Transpose tb,
                       GemmOutput out, GemmEpilogue epilogue, float beta) {
      GemmArgs g;
      g.m = m, g.n = n, g.k = k;
      g.a = x.as<Bf16>(), g.transpose_a = ta;
      g.b = w.as<Bf16>(), g.transpose_b = tb;
      g.c = out == GemmOutput::kFp32 ? dw.as<void>() : y.as<void>();
      g.c_type = out;
      g.beta = beta;
      g.epilogue = epilogue;
      if (epilogue == GemmEpilogue::kBiasGelu) g.bias = bias.as<Bf16>(), g.gelu_input = pre.as<Bf16>();
      bench.time(name, dims({m, n, k}), 0, 2.0 * m * n * k, [&] { gemm.run(g, stream); });
    };
    product("gemm fc1 fwd NT", tokens, F, C, Transpose::kNo, Transpose::kYes, GemmOutput::kBf16,
            GemmEpilogue::kNone, 0.0f);
    product("gemm fc1 fwd NT +bias+GELU", tokens, F, C, Transpose::kNo, Transpose::kYes,
            GemmOutput::kBf16, GemmEpilogue::kBiasGelu, 0.0f);
    product("gemm qkv fwd NT", tokens, 3 * C, C, Transpose::kNo, Transpose::kYes,
            GemmOutput::kBf16, GemmEpilogue::kNone, 0.0f);
    product("gemm fc2 dX NN", tokens, F, C, Transpose::kNo, Transpose::kNo, GemmOutput::kBf16,
            GemmEpilogue::kNone, 0.0f);
    product("gemm fc1 dW TN fp32 +=", C, F, tokens, Transpose::kYes, Transpose::kNo,
            GemmOutput::kFp32, GemmEpilogue::kNone, 1.0f);
  }
  bench.print_table();
}

}  // namespace
}  // namespace sextant::kernels

int main(int argc, char** argv) {
  sextant::kernels::Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--peak-bytes-per-s" && i + 1 < argc) {
      options.peak_bytes_per_s = std::strtod(argv[++i], nullptr);
    } else if (arg == "--peak-flops-per-s" && i + 1 < argc) {
      options.peak_flops_per_s = std::strtod(argv[++i], nullptr);
    } else if (arg == "--iters" && i + 1 < argc) {
      options.iters = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr,
                   "usage: %s [--peak-bytes-per-s B] [--peak-flops-per-s F] [--iters N]\n",
                   argv[0]);
      return 2;
    }
  }
  try {
    sextant::kernels::run(options);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kernel_bandwidth_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
