// Does cuBLAS's grouped GEMM keep one kernel when the experts' rows differ? The
// weight gradient dW_e = dY_e^T X_e (bf16 out, as kernels/moe_grouped_gemm.cu
// calls it) and the forward Y_e = X_e W_e^T over E experts whose rows are
//   equal    every expert `mean` rows
//   varying  mean x (0.25, 0.5, ..., 1.75) in turn (the same total)
//   padded   the varying rows rounded up to a multiple of 64
//   one_zero equal rows, but the last expert has none
//   odd      the varying rows plus one (no multiple of 8: routed counts are any number)
//   odd_ws   odd, with cuBLAS given a 32 MiB workspace (cublasSetWorkspace, as the engine does)
// and, for comparison, the loop: one cublasGemmEx per expert (varying rows).
// GPU time per call from CUDA events over 20 calls after 3 warm-ups; host time
// per call. CSV on stdout: product,rows_kind,experts,mean_rows,in,out,gpu_us,host_us.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>
int main() {
  cudaStream_t st; cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking);
  cublasHandle_t h; cublasCreate(&h); cublasSetStream(h, st);
  const size_t max_elems = 64ull << 20;
  __nv_bfloat16 *x, *w, *y; cudaMalloc(&x, 2 * max_elems); cudaMalloc(&w, 2 * max_elems); cudaMalloc(&y, 2 * max_elems);
  cudaMemset(x, 0, 2 * max_elems); cudaMemset(w, 0, 2 * max_elems);
  void **ta, **tb, **tc; cudaMalloc(&ta, 8 * 256); cudaMalloc(&tb, 8 * 256); cudaMalloc(&tc, 8 * 256);
  const size_t kWorkspaceBytes = 32u << 20;
  void* workspace; cudaMalloc(&workspace, kWorkspaceBytes);
  cublasHandle_t h_ws; cublasCreate(&h_ws); cublasSetStream(h_ws, st); cublasSetWorkspace(h_ws, workspace, kWorkspaceBytes);
  cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
  printf("product,rows_kind,experts,mean_rows,in,out,gpu_us,host_us\n");
  const int shapes[][2] = {{512, 384}, {192, 512}, {1024, 7168}, {3584, 1024}};
  const char* kinds[] = {"equal", "varying", "padded", "one_zero", "loop", "odd", "odd_ws"};
  for (auto& s : shapes) for (int E : {8, 128}) for (int mean : {128, 512}) for (int prod = 0; prod < 2; ++prod) for (int kind = 0; kind < 7; ++kind) {
    const int in = s[0], out = s[1];
    std::vector<int> rows(E, mean);
    if (kind == 1 || kind == 2 || kind == 4 || kind >= 5) for (int e = 0; e < E; ++e) rows[e] = mean * (1 + 2 * (e % 7)) / 8;
    if (kind == 2) for (int& r : rows) r = (r + 63) / 64 * 64;
    if (kind == 3) rows[E - 1] = 0;
    if (kind >= 5) for (int& r : rows) r += 1;
    size_t total = 0; for (int r : rows) total += r;
    if (total * (in > out ? in : out) > max_elems || (size_t)E * in * out > max_elems) continue;
    // Column-major view as in kernels/moe_grouped_gemm.cu: D^T = op(B)^T op(A)^T.
    std::vector<cublasOperation_t> va(E), vb(E);
    std::vector<int> vm(E), vn(E), vk(E), vlda(E), vldb(E), vldc(E), gs(E, 1);
    std::vector<void*> ha(E), hb(E), hc(E);
    size_t row0 = 0;
    for (int e = 0; e < E; ++e) {
      const int r = rows[e];
      if (prod == 0) {  // forward: Y (r x out) = X (r x in) W^T
        va[e] = CUBLAS_OP_T; vb[e] = CUBLAS_OP_N; vm[e] = out; vn[e] = r; vk[e] = in;
        ha[e] = w + (size_t)e * in * out; vlda[e] = in; hb[e] = x + row0 * in; vldb[e] = in; hc[e] = y + row0 * out; vldc[e] = out;
      } else {  // weight gradient: dW (out x in) = dY^T X, inner r
        va[e] = CUBLAS_OP_N; vb[e] = CUBLAS_OP_T; vm[e] = in; vn[e] = out; vk[e] = r;
        ha[e] = x + row0 * in; vlda[e] = in; hb[e] = y + row0 * out; vldb[e] = out; hc[e] = w + (size_t)e * in * out; vldc[e] = in;
      }
      row0 += r;
    }
    cudaMemcpy(ta, ha.data(), 8 * E, cudaMemcpyHostToDevice); cudaMemcpy(tb, hb.data(), 8 * E, cudaMemcpyHostToDevice); cudaMemcpy(tc, hc.data(), 8 * E, cudaMemcpyHostToDevice);
    std::vector<float> al(E, 1.f), be(E, 0.f);
    auto call = [&] {
      if (kind == 4) {
        for (int e = 0; e < E; ++e) {
          if (vn[e] == 0 || vk[e] == 0 || vm[e] == 0) continue;
          cublasGemmEx(h, va[e], vb[e], vm[e], vn[e], vk[e], &al[e], ha[e], CUDA_R_16BF, vlda[e], hb[e], CUDA_R_16BF, vldb[e], &be[e], hc[e], CUDA_R_16BF, vldc[e], CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
        }
      } else {
        cublasGemmGroupedBatchedEx(kind == 6 ? h_ws : h, va.data(), vb.data(), vm.data(), vn.data(), vk.data(), al.data(), (const void**)ta, CUDA_R_16BF, vlda.data(), (const void**)tb, CUDA_R_16BF, vldb.data(), be.data(), tc, CUDA_R_16BF, vldc.data(), E, gs.data(), CUBLAS_COMPUTE_32F);
      }
    };
    for (int i = 0; i < 3; ++i) call();
    cudaStreamSynchronize(st);
    cudaEventRecord(e0, st);
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 20; ++i) call();
    auto t1 = std::chrono::steady_clock::now();
    cudaEventRecord(e1, st); cudaEventSynchronize(e1);
    float ms = 0; cudaEventElapsedTime(&ms, e0, e1);
    printf("%s,%s,%d,%d,%d,%d,%.2f,%.2f\n", prod == 0 ? "forward" : "weight_grad", kinds[kind], E, mean, in, out,
           1000.0 * ms / 20, std::chrono::duration<double, std::micro>(t1 - t0).count() / 20);
  }
  return 0;
}
