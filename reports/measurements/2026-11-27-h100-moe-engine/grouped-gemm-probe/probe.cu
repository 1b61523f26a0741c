// Does cublasGemmGroupedBatchedEx wait on the host for work queued before it?
// Queue a 50 ms spin kernel, then time the host side of one grouped call, then of
// one cublasGemmEx and one cudaMemsetAsync, each after a fresh spin.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <chrono>
#include <cstdio>
#include <vector>
__global__ void spin(long long cycles) { long long s = clock64(); while (clock64() - s < cycles) {} }
int main() {
  cudaStream_t st; cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking);
  cublasHandle_t h; cublasCreate(&h); cublasSetStream(h, st);
  const int E = 128, rows = 128, in = 512, out = 384;
  __nv_bfloat16 *x, *w, *y; cudaMalloc(&x, 2ull*E*rows*in); cudaMalloc(&w, 2ull*E*in*out); cudaMalloc(&y, 2ull*E*rows*out);
  void **ta, **tb, **tc; cudaMalloc(&ta, 8*E); cudaMalloc(&tb, 8*E); cudaMalloc(&tc, 8*E);
  std::vector<void*> ha(E), hb(E), hc(E);
  for (int e = 0; e < E; ++e) { ha[e] = w + (size_t)e*in*out; hb[e] = x + (size_t)e*rows*in; hc[e] = y + (size_t)e*rows*out; }
  cudaMemcpy(ta, ha.data(), 8*E, cudaMemcpyHostToDevice); cudaMemcpy(tb, hb.data(), 8*E, cudaMemcpyHostToDevice); cudaMemcpy(tc, hc.data(), 8*E, cudaMemcpyHostToDevice);
  std::vector<cublasOperation_t> opa(E, CUBLAS_OP_T), opb(E, CUBLAS_OP_N);
  std::vector<int> m(E, out), n(E, rows), k(E, in), lda(E, in), ldb(E, in), ldc(E, out), gs(E, 1);
  std::vector<float> al(E, 1.f), be(E, 0.f);
  int clock_khz = 0; cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0);
  const long long cycles = (long long)clock_khz * 50;  // 50 ms
  auto grouped = [&] { cublasGemmGroupedBatchedEx(h, opa.data(), opb.data(), m.data(), n.data(), k.data(), al.data(), (const void**)ta, CUDA_R_16BF, lda.data(), (const void**)tb, CUDA_R_16BF, ldb.data(), be.data(), tc, CUDA_R_16BF, ldc.data(), E, gs.data(), CUBLAS_COMPUTE_32F); };
  float one = 1, zero = 0;
  auto single = [&] { cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, out, rows, in, &one, w, CUDA_R_16BF, in, x, CUDA_R_16BF, in, &zero, y, CUDA_R_16BF, out, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT); };
  grouped(); single(); cudaStreamSynchronize(st);
  for (int rep = 0; rep < 3; ++rep) {
    for (int which = 0; which < 3; ++which) {
      spin<<<1, 1, 0, st>>>(cycles);
      auto t0 = std::chrono::steady_clock::now();
      if (which == 0) grouped(); else if (which == 1) single(); else cudaMemsetAsync(y, 0, 1024, st);
      auto t1 = std::chrono::steady_clock::now();
      cudaStreamSynchronize(st);
      auto t2 = std::chrono::steady_clock::now();
      printf("%-28s host call %8.3f ms, then until done %8.3f ms\n", which == 0 ? "cublasGemmGroupedBatchedEx" : which == 1 ? "cublasGemmEx" : "cudaMemsetAsync",
             std::chrono::duration<double, std::milli>(t1 - t0).count(), std::chrono::duration<double, std::milli>(t2 - t1).count());
    }
  }
  // Host time per grouped call without a spin, 100 calls back to back.
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 100; ++i) grouped();
  auto t1 = std::chrono::steady_clock::now();
  cudaStreamSynchronize(st);
  auto t2 = std::chrono::steady_clock::now();
  printf("100 grouped calls: host %.3f ms, GPU done after %.3f ms more\n", std::chrono::duration<double, std::milli>(t1 - t0).count(), std::chrono::duration<double, std::milli>(t2 - t1).count());
  return 0;
}
