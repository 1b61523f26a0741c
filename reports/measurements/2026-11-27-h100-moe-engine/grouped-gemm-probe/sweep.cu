// cuBLAS grouped GEMM (cublasGemmGroupedBatchedEx) over expert shapes: GPU time per call (CUDA
// events over 20 calls after 3 warm-ups) and host time per call, for the forward (Y = X W^T),
// input gradient (dX = dY W) and weight gradient (dW = dY^T X, bf16 out), every expert with the
// same rows. CSV on stdout: product,experts,rows,in,out,gpu_us,host_us,tflops.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <chrono>
#include <cstdio>
#include <vector>
int main() {
  cudaStream_t st; cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking);
  cublasHandle_t h; cublasCreate(&h); cublasSetStream(h, st);
  const size_t max_elems = 128ull * 2048 * 7168;
  __nv_bfloat16 *x, *w, *y; cudaMalloc(&x, 2 * max_elems); cudaMalloc(&w, 2 * max_elems); cudaMalloc(&y, 2 * max_elems);
  cudaMemset(x, 0, 2 * max_elems); cudaMemset(w, 0, 2 * max_elems);
  void **ta, **tb, **tc; cudaMalloc(&ta, 8 * 128); cudaMalloc(&tb, 8 * 128); cudaMalloc(&tc, 8 * 128);
  cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
  printf("product,experts,rows,in,out,gpu_us,host_us,tflops\n");
  const int shapes[][2] = {{512, 384}, {192, 512}, {1024, 7168}, {3584, 1024}, {2048, 1536}};
  for (auto& s : shapes) for (int E : {8, 32, 128}) for (int rows : {16, 64, 128, 256, 512, 1024, 2048}) for (int prod = 0; prod < 3; ++prod) {
    const int in = s[0], out = s[1];
    if ((size_t)E * rows * (in > out ? in : out) > max_elems || (size_t)E * in * out > max_elems) continue;
    // Column-major view as in kernels/moe_grouped_gemm.cu: D^T = op(B)^T op(A)^T.
    cublasOperation_t oa, ob; int m, n, k, lda, ldb, ldc; __nv_bfloat16 *A, *B, *C; size_t sa, sb, sc;
    if (prod == 0) { oa = CUBLAS_OP_T; ob = CUBLAS_OP_N; m = out; n = rows; k = in; A = w; lda = in; B = x; ldb = in; C = y; ldc = out; sa = (size_t)in * out; sb = (size_t)rows * in; sc = (size_t)rows * out; }
    else if (prod == 1) { oa = CUBLAS_OP_N; ob = CUBLAS_OP_N; m = in; n = rows; k = out; A = w; lda = in; B = x; ldb = out; C = y; ldc = in; sa = (size_t)in * out; sb = (size_t)rows * out; sc = (size_t)rows * in; }
    else { oa = CUBLAS_OP_N; ob = CUBLAS_OP_T; m = in; n = out; k = rows; A = x; lda = in; B = w; ldb = out; C = y; ldc = in; sa = (size_t)rows * in; sb = (size_t)rows * out; sc = (size_t)in * out; }
    std::vector<void*> ha(E), hb(E), hc(E);
    for (int e = 0; e < E; ++e) { ha[e] = A + e * sa; hb[e] = B + e * sb; hc[e] = C + e * sc; }
    cudaMemcpy(ta, ha.data(), 8 * E, cudaMemcpyHostToDevice); cudaMemcpy(tb, hb.data(), 8 * E, cudaMemcpyHostToDevice); cudaMemcpy(tc, hc.data(), 8 * E, cudaMemcpyHostToDevice);
    std::vector<cublasOperation_t> va(E, oa), vb(E, ob);
    std::vector<int> vm(E, m), vn(E, n), vk(E, k), vlda(E, lda), vldb(E, ldb), vldc(E, ldc), gs(E, 1);
    std::vector<float> al(E, 1.f), be(E, 0.f);
    auto call = [&] { cublasGemmGroupedBatchedEx(h, va.data(), vb.data(), vm.data(), vn.data(), vk.data(), al.data(), (const void**)ta, CUDA_R_16BF, vlda.data(), (const void**)tb, CUDA_R_16BF, vldb.data(), be.data(), tc, CUDA_R_16BF, vldc.data(), E, gs.data(), CUBLAS_COMPUTE_32F); };
    for (int i = 0; i < 3; ++i) call();
    cudaStreamSynchronize(st);
    cudaEventRecord(e0, st);
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 20; ++i) call();
    auto t1 = std::chrono::steady_clock::now();
    cudaEventRecord(e1, st); cudaEventSynchronize(e1);
    float ms = 0; cudaEventElapsedTime(&ms, e0, e1);
    const double gpu_us = 1000.0 * ms / 20, host_us = std::chrono::duration<double, std::micro>(t1 - t0).count() / 20;
    const double flops = 2.0 * E * rows * (double)in * out;
    printf("%s,%d,%d,%d,%d,%.2f,%.2f,%.1f\n", prod == 0 ? "forward" : prod == 1 ? "input_grad" : "weight_grad", E, rows, in, out, gpu_us, host_us, flops / (gpu_us * 1e-6) / 1e12);
  }
  return 0;
}
