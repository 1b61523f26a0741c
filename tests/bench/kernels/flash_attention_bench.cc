// Throughput of causal flash attention forward and backward
// (kernels/flash_attention.h).
//
// Method as kernel_bandwidth_bench.cc's: buffers allocated and filled before
// timing, three warm-up launches, then `iters` launches between two CUDA
// events (device time per launch). FLOPs are the causal count of the two
// products, 4 * b * h * s^2 * d / 2 (the convention FlashAttention-2's
// benchmark uses), and 2.5 times that for the backward (five products instead
// of two: S and dP recomputed, dV, dK, dQ), printed beside the H100 SXM datasheet's dense bf16 peak,
// 989.4 TFLOP/s. Attention is compute-bound at these shapes (each K/V block is
// reused by s/64 query blocks), so inputs are not rotated past the L2.
// Rows marked "fused" read Q, K, V from (and write dQ, dK, dV to) column
// slices of one (b*s, (h + 2*kv)*d) buffer, the engine's QKV GEMM layout.
//
// Usage: flash_attention_bench [iters]
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "kernels/bf16.h"
#include "kernels/cuda_check.h"
#include "kernels/flash_attention.h"

namespace sextant::kernels {
namespace {

constexpr double kPeakFlopsPerS = 989.4e12;  // NVIDIA H100 SXM datasheet, dense bf16

class DeviceBf16 {
 public:
  explicit DeviceBf16(std::size_t n, std::mt19937_64& rng) {
    SEXTANT_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&data_), n * sizeof(Bf16)));
    std::normal_distribution<float> dist(0.f, 1.f);
    std::vector<Bf16> host(n);
    for (auto& x : host) x = from_float(dist(rng));
    SEXTANT_CUDA_CHECK(cudaMemcpy(data_, host.data(), n * sizeof(Bf16), cudaMemcpyHostToDevice));
  }
  ~DeviceBf16() { cudaFree(data_); }
  DeviceBf16(const DeviceBf16&) = delete;
  DeviceBf16& operator=(const DeviceBf16&) = delete;
  Bf16* get() { return data_; }

 private:
  Bf16* data_ = nullptr;
};

/// Device time per call of `launch`, after three warm-up calls.
template <typename Launch>
double time_per_call_s(int iters, Launch launch) {
  for (int i = 0; i < 3; ++i) launch();
  cudaEvent_t start, stop;
  SEXTANT_CUDA_CHECK(cudaEventCreate(&start));
  SEXTANT_CUDA_CHECK(cudaEventCreate(&stop));
  SEXTANT_CUDA_CHECK(cudaEventRecord(start, nullptr));
  for (int i = 0; i < iters; ++i) launch();
  SEXTANT_CUDA_CHECK(cudaEventRecord(stop, nullptr));
  SEXTANT_CUDA_CHECK(cudaEventSynchronize(stop));
  float ms = 0;
  SEXTANT_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ms * 1e-3 / iters;
}

void print_row(const char* pass, const FlashAttentionShape& s, double flops, double time_s) {
  std::printf("| %s | b=%d h=%d kv=%d s=%d d=%d%s | %.1f | %.1f | %.1f |\n", pass, s.batch,
              s.heads, s.kv_heads, s.seq, s.head_dim, s.q_row_stride != 0 ? " fused" : "",
              time_s * 1e6, flops / time_s / 1e12, 100 * flops / time_s / kPeakFlopsPerS);
}

/// Times forward and backward at `s`; with `fused`, Q, K, V and their
/// gradients are slices of one (b*s, (h + 2*kv)*d) buffer each.
void time_attention(FlashAttentionShape s, bool fused, int iters, std::mt19937_64& rng) {
  const std::size_t tokens = static_cast<std::size_t>(s.batch) * s.seq;
  const std::size_t q_width = static_cast<std::size_t>(s.heads) * s.head_dim;
  const std::size_t kv_width = static_cast<std::size_t>(s.kv_heads) * s.head_dim;
  const std::size_t q_elems = tokens * q_width;
  const std::size_t kv_elems = tokens * kv_width;
  const std::size_t qkv_elems = tokens * (q_width + 2 * kv_width);
  if (fused) s.q_row_stride = s.kv_row_stride = static_cast<int>(q_width + 2 * kv_width);
  // Unfused: q, k, v back to back in one allocation, as are dq, dk, dv.
  DeviceBf16 qkv(qkv_elems, rng), dqkv(qkv_elems, rng), out(q_elems, rng), dout(q_elems, rng);
  Bf16* q = qkv.get();
  Bf16* k = q + (fused ? q_width : q_elems);
  Bf16* v = k + (fused ? kv_width : kv_elems);
  Bf16* dq = dqkv.get();
  Bf16* dk = dq + (fused ? q_width : q_elems);
  Bf16* dv = dk + (fused ? kv_width : kv_elems);
  float* lse = nullptr;
  void* workspace = nullptr;
  const std::size_t workspace_bytes = flash_attention_backward_workspace_bytes(s);
  SEXTANT_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&lse),
                                static_cast<std::size_t>(s.batch) * s.heads * s.seq * sizeof(float)));
  SEXTANT_CUDA_CHECK(cudaMalloc(&workspace, workspace_bytes));
  const double forward_flops = 4.0 * s.batch * s.heads * double(s.seq) * s.seq * s.head_dim / 2;
  print_row("forward", s, forward_flops, time_per_call_s(iters, [&] {
              flash_attention_forward(out.get(), lse, q, k, v, s, nullptr);
            }));
  print_row("backward", s, 2.5 * forward_flops, time_per_call_s(iters, [&] {
              flash_attention_backward(dq, dk, dv, dout.get(), q, k, v, out.get(), lse, s,
                                       workspace, workspace_bytes, nullptr);
            }));
  cudaFree(workspace);
  cudaFree(lse);
}

}  // namespace
}  // namespace sextant::kernels

int main(int argc, char** argv) {
  using sextant::kernels::FlashAttentionShape;
  const int iters = argc > 1 ? std::atoi(argv[1]) : 20;
  cudaDeviceProp prop{};
  SEXTANT_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s, %d SMs; %d timed launches after 3 warm-up\n\n", prop.name,
              prop.multiProcessorCount, iters);
  std::printf("| pass | shape | time (us) | TFLOP/s | %% of 989.4 peak |\n|---|---|---:|---:|---:|\n");
  std::mt19937_64 rng(2026);
  for (const FlashAttentionShape& s :
       {FlashAttentionShape{4, 2048, 0, 16, 16, 128}, FlashAttentionShape{4, 2048, 0, 16, 16, 64},
        FlashAttentionShape{4, 2048, 0, 16, 4, 128}, FlashAttentionShape{1, 8192, 0, 16, 16, 128},
        FlashAttentionShape{8, 1024, 0, 16, 16, 128}})
    sextant::kernels::time_attention(s, /*fused=*/false, iters, rng);
  sextant::kernels::time_attention({4, 2048, 0, 16, 16, 128}, /*fused=*/true, iters, rng);
  // A longer sequence at the same token count as the first row.
  sextant::kernels::time_attention({2, 4096, 0, 16, 16, 128}, /*fused=*/false, iters, rng);
  // head_dim 64 (the Hopper backward's 128-query tiles on an H100/H200): MHA
  // and Llama 3.2 1B's GQA (32 heads over 8), at 2048 tokens (key blocks
  // launched per head) and 8192 (key blocks outermost).
  for (const FlashAttentionShape& s :
       {FlashAttentionShape{4, 2048, 0, 32, 8, 64}, FlashAttentionShape{4, 8192, 0, 16, 16, 64},
        FlashAttentionShape{4, 8192, 0, 32, 8, 64}})
    sextant::kernels::time_attention(s, /*fused=*/false, iters, rng);
  sextant::kernels::time_attention({4, 2048, 0, 32, 8, 64}, /*fused=*/true, iters, rng);
  return 0;
}
