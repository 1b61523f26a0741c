#include "engine/tensor_parallel/parallel_linear.h"

namespace sextant::engine::tensor_parallel {
namespace {

using kernels::Bf16;
using kernels::GemmArgs;
using kernels::GemmOutput;
using kernels::Transpose;

// y (tokens, out) = x (tokens, in) · wᵀ   (w is (out, in))
void forward_product(kernels::CublasLtGemm& gemm, cudaStream_t stream, const LinearShard& s,
                     const Bf16* x, const Bf16* w, Bf16* y) {
  GemmArgs a;
  a.m = s.tokens, a.n = s.out_local, a.k = s.in_local;
  a.a = x;
  a.b = w, a.transpose_b = Transpose::kYes;
  a.c = y;
  gemm.run(a, stream);
}

// dx (tokens, in) = dy (tokens, out) · w (out, in)
void input_gradient(kernels::CublasLtGemm& gemm, cudaStream_t stream, const LinearShard& s,
                    const Bf16* dy, const Bf16* w, Bf16* dx) {
  GemmArgs a;
  a.m = s.tokens, a.n = s.in_local, a.k = s.out_local;
  a.a = dy;
  a.b = w;
  a.c = dx;
  gemm.run(a, stream);
}

// dw (out, in) += dyᵀ (out, tokens) · x (tokens, in), fp32
void weight_gradient(kernels::CublasLtGemm& gemm, cudaStream_t stream, const LinearShard& s,
                     const Bf16* dy, const Bf16* x, float* dw) {
  GemmArgs a;
  a.m = s.out_local, a.n = s.in_local, a.k = s.tokens;
  a.a = dy, a.transpose_a = Transpose::kYes;
  a.b = x;
  a.c = dw, a.c_type = GemmOutput::kFp32;
  a.beta = 1.0f;
  gemm.run(a, stream);
}

}  // namespace

void column_parallel_forward(kernels::CublasLtGemm& gemm, comm::Communicator& tp,
                             const LinearShard& s, const Bf16* x, const Bf16* w, Bf16* y) {
  forward_product(gemm, tp.stream(), s, x, w, y);
}

void column_parallel_backward(kernels::CublasLtGemm& gemm, comm::Communicator& tp,
                              const LinearShard& s, const Bf16* dy, const Bf16* x, const Bf16* w,
                              Bf16* dx, float* dw) {
  input_gradient(gemm, tp.stream(), s, dy, w, dx);
  // Each rank's dx is its output block's share of the gradient: sum them.
  tp.all_reduce_sum(dx, dx, static_cast<std::size_t>(s.tokens) * s.in_local, comm::DataType::kBf16);
  weight_gradient(gemm, tp.stream(), s, dy, x, dw);
}

void row_parallel_forward(kernels::CublasLtGemm& gemm, comm::Communicator& tp,
                          const LinearShard& s, const Bf16* x, const Bf16* w, Bf16* y) {
  forward_product(gemm, tp.stream(), s, x, w, y);
  // Each rank multiplied its input block: the partial products sum to Y.
  tp.all_reduce_sum(y, y, static_cast<std::size_t>(s.tokens) * s.out_local, comm::DataType::kBf16);
}

void row_parallel_backward(kernels::CublasLtGemm& gemm, comm::Communicator& tp,
                           const LinearShard& s, const Bf16* dy, const Bf16* x, const Bf16* w,
                           Bf16* dx, float* dw) {
  input_gradient(gemm, tp.stream(), s, dy, w, dx);
  weight_gradient(gemm, tp.stream(), s, dy, x, dw);
}

namespace {

// Elements of one rank's token shard of a (tokens, width) activation.
std::size_t shard_elements(const comm::Communicator& tp, int tokens, int width) {
  return static_cast<std::size_t>(tokens / tp.size()) * width;
}

}  // namespace

void column_parallel_forward_sp(kernels::CublasLtGemm& gemm, comm::Communicator& tp,
                                const LinearShard& s, const Bf16* x_shard, Bf16* x_gathered,
                                const Bf16* w, Bf16* y) {
  tp.all_gather(x_shard, x_gathered, shard_elements(tp, s.tokens, s.in_local), comm::DataType::kBf16);
  forward_product(gemm, tp.stream(), s, x_gathered, w, y);
}

void column_parallel_backward_sp(kernels::CublasLtGemm& gemm, comm::Communicator& tp,
                                 const LinearShard& s, const Bf16* dy, const Bf16* x_gathered,
                                 const Bf16* w, Bf16* dx_full, Bf16* dx_shard, float* dw) {
  input_gradient(gemm, tp.stream(), s, dy, w, dx_full);
  tp.reduce_scatter_sum(dx_full, dx_shard, shard_elements(tp, s.tokens, s.in_local),
                        comm::DataType::kBf16);
  weight_gradient(gemm, tp.stream(), s, dy, x_gathered, dw);
}

void row_parallel_forward_sp(kernels::CublasLtGemm& gemm, comm::Communicator& tp,
                             const LinearShard& s, const Bf16* x, const Bf16* w, Bf16* y_full,
                             Bf16* y_shard) {
  forward_product(gemm, tp.stream(), s, x, w, y_full);
  tp.reduce_scatter_sum(y_full, y_shard, shard_elements(tp, s.tokens, s.out_local),
                        comm::DataType::kBf16);
}

void row_parallel_backward_sp(kernels::CublasLtGemm& gemm, comm::Communicator& tp,
                              const LinearShard& s, const Bf16* dy_shard, Bf16* dy_gathered,
                              const Bf16* x, const Bf16* w, Bf16* dx, float* dw) {
  tp.all_gather(dy_shard, dy_gathered, shard_elements(tp, s.tokens, s.out_local),
                comm::DataType::kBf16);
  row_parallel_backward(gemm, tp, s, dy_gathered, x, w, dx, dw);
}

}  // namespace sextant::engine::tensor_parallel
