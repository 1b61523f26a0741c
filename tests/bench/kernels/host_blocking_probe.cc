// Which of the MoE layer's host calls wait for the GPU (issue 25): each call is
// made while the stream is held by a 2 ms gpu_wait (kernels/gpu_wait.h), and the
// host's time in the call is printed. A call that returns in microseconds is
// asynchronous; one that takes the ~2 ms waits for the stream's earlier work (a
// drain: the GPU then idles while the host queues what follows).
//
// The question it answers: the 2026-12-07 CUPTI profile of moe-fine-tiny counted
// about one cudaMemcpyAsync per cublasGemmGroupedBatchedEx call, 66 us each on
// average on the host (reports/measurements/2026-12-07-h100-moe-empty-experts).
// Whether the grouped call drains the stream, and whether pinned host arguments
// change that, is measured here rather than inferred. The pinned case also says
// whether cuBLAS reads the host arrays after the call returns: alpha is set to 0
// in the pinned arrays right after the call, so an output of zeros means a late
// (asynchronous) read, and the arrays would have to stay untouched until the
// stream passes the call.
//
// Usage: host_blocking_probe [--wait-us N] [--experts N] [--repeats N]
// Prints one table row per call: the median host time over the repeats.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "kernels/cuda_check.h"
#include "kernels/gpu_wait.h"
#include "kernels/moe_grouped_gemm.h"
#include "tests/bench/kernels/device_buffer.h"

namespace sextant::kernels {
namespace {

struct Options {
  int wait_us = 2000, experts = 64, repeats = 5;
  int rows = 128, in = 512, out = 384;  // moe-fine-tiny's fc1: 128 rows an expert, 512 -> 2 x 192
};

void check_cublas(cublasStatus_t status, const char* what) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  std::fprintf(stderr, "host_blocking_probe: %s failed: %s\n", what, cublasGetStatusString(status));
  std::exit(1);
}

// Host arrays for one cublasGemmGroupedBatchedEx call of `groups` groups of one
// product each, in memory the caller chose (pageable or pinned).
struct GroupedArgs {
  cublasOperation_t* op_a;
  cublasOperation_t* op_b;
  int *m, *n, *k, *lda, *ldb, *ldc, *group_size;
  float *alpha, *beta;
};

template <typename T>
T* carve(char*& at, int count) {
  T* p = reinterpret_cast<T*>(at);
  at += (sizeof(T) * count + 63) / 64 * 64;
  return p;
}

std::size_t grouped_args_bytes(int groups) { return 16 * (static_cast<std::size_t>(groups) * 8 + 64); }

GroupedArgs carve_args(char* base, int groups) {
  char* at = base;
  GroupedArgs a{};
  a.op_a = carve<cublasOperation_t>(at, groups);
  a.op_b = carve<cublasOperation_t>(at, groups);
  a.m = carve<int>(at, groups), a.n = carve<int>(at, groups), a.k = carve<int>(at, groups);
  a.lda = carve<int>(at, groups), a.ldb = carve<int>(at, groups), a.ldc = carve<int>(at, groups);
  a.group_size = carve<int>(at, groups);
  a.alpha = carve<float>(at, groups), a.beta = carve<float>(at, groups);
  return a;
}

// Column-major C (out, rows) = W^T(out, in) X(in, rows): our row-major Y = X W^T.
void fill_args(const GroupedArgs& a, const Options& o) {
  for (int g = 0; g < o.experts; ++g) {
    a.op_a[g] = CUBLAS_OP_T, a.op_b[g] = CUBLAS_OP_N;
    a.m[g] = o.out, a.n[g] = o.rows, a.k[g] = o.in;
    a.lda[g] = o.in, a.ldb[g] = o.in, a.ldc[g] = o.out;
    a.group_size[g] = 1, a.alpha[g] = 1.0f, a.beta[g] = 0.0f;
  }
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int run(const Options& o) {
  cudaStream_t stream = nullptr;
  SEXTANT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const auto wait_ns = static_cast<std::int64_t>(o.wait_us) * 1000;
  constexpr std::size_t kSmallBytes = 256;  // the routing read-back's size at 32 experts

  std::vector<char> pageable(kSmallBytes);
  char* pinned = nullptr;
  SEXTANT_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&pinned), kSmallBytes));
  bench::Buffer small(kSmallBytes);

  const std::size_t x_elems = static_cast<std::size_t>(o.experts) * o.rows * o.in;
  const std::size_t w_elems = static_cast<std::size_t>(o.experts) * o.out * o.in;
  const std::size_t y_elems = static_cast<std::size_t>(o.experts) * o.rows * o.out;
  bench::Buffer x(x_elems * sizeof(Bf16)), w(w_elems * sizeof(Bf16)), y(y_elems * sizeof(Bf16));
  bench::fill_random_bf16(x, x_elems);
  bench::fill_random_bf16(w, w_elems);
  bench::Buffer tables(3 * sizeof(void*) * static_cast<std::size_t>(o.experts));
  {
    std::vector<void*> host(3 * static_cast<std::size_t>(o.experts));
    for (int g = 0; g < o.experts; ++g) {
      host[g] = w.as<Bf16>() + static_cast<std::size_t>(g) * o.out * o.in;
      host[o.experts + g] = x.as<Bf16>() + static_cast<std::size_t>(g) * o.rows * o.in;
      host[2 * o.experts + g] = y.as<Bf16>() + static_cast<std::size_t>(g) * o.rows * o.out;
    }
    SEXTANT_CUDA_CHECK(cudaMemcpy(tables.as<void>(), host.data(), host.size() * sizeof(void*), cudaMemcpyHostToDevice));
  }
  auto** table = tables.as<void*>();
  cublasHandle_t cublas = nullptr;
  check_cublas(cublasCreate(&cublas), "cublasCreate");
  check_cublas(cublasSetStream(cublas, stream), "cublasSetStream");
  bench::Buffer cublas_workspace(kCublasLtWorkspaceBytes);
  check_cublas(cublasSetWorkspace(cublas, cublas_workspace.as<void>(), kCublasLtWorkspaceBytes), "cublasSetWorkspace");

  std::vector<char> pageable_args(grouped_args_bytes(o.experts));
  char* pinned_args = nullptr;
  SEXTANT_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&pinned_args), grouped_args_bytes(o.experts)));
  const GroupedArgs pageable_grouped = carve_args(pageable_args.data(), o.experts);
  const GroupedArgs pinned_grouped = carve_args(pinned_args, o.experts);
  auto grouped = [&](const GroupedArgs& a) {
    check_cublas(cublasGemmGroupedBatchedEx(cublas, a.op_a, a.op_b, a.m, a.n, a.k, a.alpha,
                                            const_cast<const void**>(table), CUDA_R_16BF, a.lda,
                                            const_cast<const void**>(table + o.experts), CUDA_R_16BF, a.ldb,
                                            a.beta, table + 2 * o.experts, CUDA_R_16BF, a.ldc, o.experts,
                                            a.group_size, CUBLAS_COMPUTE_32F),
                 "cublasGemmGroupedBatchedEx");
  };

  void* engine_workspace = nullptr;
  SEXTANT_CUDA_CHECK(cudaMalloc(&engine_workspace, MoeGroupedGemm::workspace_bytes(o.experts)));
  MoeGroupedGemm engine(MoeGemmBackend::kCublasGrouped, o.experts, engine_workspace,
                        MoeGroupedGemm::workspace_bytes(o.experts));
  const std::vector<std::int32_t> rows(static_cast<std::size_t>(o.experts), o.rows);

  struct Case {
    const char* name;
    std::function<void()> call;
  };
  const std::vector<Case> cases = {
      {"kernel launch (gpu_wait 0)", [&] { gpu_wait(0, stream); }},
      {"cudaMemcpyAsync H2D 256 B pageable",
       [&] { SEXTANT_CUDA_CHECK(cudaMemcpyAsync(small.as<void>(), pageable.data(), kSmallBytes, cudaMemcpyHostToDevice, stream)); }},
      {"cudaMemcpyAsync H2D 256 B pinned",
       [&] { SEXTANT_CUDA_CHECK(cudaMemcpyAsync(small.as<void>(), pinned, kSmallBytes, cudaMemcpyHostToDevice, stream)); }},
      {"cudaMemcpyAsync D2H 256 B pageable",
       [&] { SEXTANT_CUDA_CHECK(cudaMemcpyAsync(pageable.data(), small.as<void>(), kSmallBytes, cudaMemcpyDeviceToHost, stream)); }},
      {"cudaMemcpyAsync D2H 256 B pinned",
       [&] { SEXTANT_CUDA_CHECK(cudaMemcpyAsync(pinned, small.as<void>(), kSmallBytes, cudaMemcpyDeviceToHost, stream)); }},
      {"cublasGemmGroupedBatchedEx, pageable args", [&] { fill_args(pageable_grouped, o); grouped(pageable_grouped); }},
      {"cublasGemmGroupedBatchedEx, pinned args", [&] { fill_args(pinned_grouped, o); grouped(pinned_grouped); }},
      {"MoeGroupedGemm::forward (the engine's call)",
       [&] { engine.forward(y.as<Bf16>(), x.as<Bf16>(), w.as<Bf16>(), rows, o.in, o.out, stream); }},
  };

  // Warm-up: cuBLAS's first grouped call picks its kernels.
  for (const Case& c : cases) c.call();
  SEXTANT_CUDA_CHECK(cudaStreamSynchronize(stream));

  std::printf("host time in each call made while the stream waits %d us on the GPU (median of %d)\n", o.wait_us,
              o.repeats);
  std::printf("%-46s %12s  %s\n", "call", "host us", "waits for the GPU");
  for (const Case& c : cases) {
    std::vector<double> host_us;
    for (int r = 0; r < o.repeats; ++r) {
      gpu_wait(wait_ns, stream);
      const auto t0 = std::chrono::steady_clock::now();
      c.call();
      const auto t1 = std::chrono::steady_clock::now();
      SEXTANT_CUDA_CHECK(cudaStreamSynchronize(stream));
      host_us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    }
    const double us = median(host_us);
    std::printf("%-46s %12.1f  %s\n", c.name, us, us > 0.5 * o.wait_us ? "yes (drains the stream)" : "no");
  }

  // Does cuBLAS read the pinned host arrays after it returns? alpha -> 0 right after the call.
  SEXTANT_CUDA_CHECK(cudaMemset(y.as<void>(), 0x3c, y_elems * sizeof(Bf16)));  // bf16 0x3c3c ~ 0.0115
  fill_args(pinned_grouped, o);
  gpu_wait(wait_ns, stream);
  grouped(pinned_grouped);
  for (int g = 0; g < o.experts; ++g) pinned_grouped.alpha[g] = 0.0f;
  SEXTANT_CUDA_CHECK(cudaStreamSynchronize(stream));
  std::vector<Bf16> out(y_elems);
  SEXTANT_CUDA_CHECK(cudaMemcpy(out.data(), y.as<void>(), y_elems * sizeof(Bf16), cudaMemcpyDeviceToHost));
  const auto zeros = static_cast<std::size_t>(std::count_if(out.begin(), out.end(), [](Bf16 v) { return to_float(v) == 0.0f; }));
  std::printf("pinned args overwritten after the call: %zu of %zu outputs are 0 -> cuBLAS read its host arrays %s\n",
              zeros, out.size(), zeros * 2 > out.size() ? "after returning (asynchronously)" : "before returning");

  cudaFreeHost(pinned);
  cudaFreeHost(pinned_args);
  cudaFree(engine_workspace);
  cublasDestroy(cublas);
  cudaStreamDestroy(stream);
  return 0;
}

int int_flag(int argc, char** argv, int& i, const char* name) {
  if (i + 1 >= argc) {
    std::fprintf(stderr, "host_blocking_probe: %s needs a value\n", name);
    std::exit(2);
  }
  const int v = std::atoi(argv[++i]);
  if (v < 1) {
    std::fprintf(stderr, "host_blocking_probe: %s must be a positive integer, got '%s'\n", name, argv[i]);
    std::exit(2);
  }
  return v;
}

}  // namespace
}  // namespace sextant::kernels

int main(int argc, char** argv) {
  sextant::kernels::Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--wait-us") o.wait_us = sextant::kernels::int_flag(argc, argv, i, "--wait-us");
    else if (a == "--experts") o.experts = sextant::kernels::int_flag(argc, argv, i, "--experts");
    else if (a == "--repeats") o.repeats = sextant::kernels::int_flag(argc, argv, i, "--repeats");
    else {
      std::fprintf(stderr, "usage: host_blocking_probe [--wait-us N] [--experts N] [--repeats N]\n");
      return 2;
    }
  }
  try {
    return sextant::kernels::run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "host_blocking_probe: %s\n", e.what());
    return 1;
  }
}
