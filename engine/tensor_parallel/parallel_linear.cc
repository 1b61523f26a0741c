#include "engine/tensor_parallel/parallel_linear.h"

#include <cstdint>

#include "kernels/bias_gradient.h"

namespace sextant::engine::tensor_parallel {
namespace {

using kernels::Bf16;
using kernels::GemmArgs;
using kernels::GemmEpilogue;
using kernels::GemmOutput;
using kernels::Transpose;

std::size_t to_size(std::int64_t n) { return static_cast<std::size_t>(n); }

// Rows [first_row, first_row + rows) of a product over T rows: A (not
// transposed), C, C's source and the GELU input are row-major with T rows,
// so a row block is a pointer offset (rows are independent in a GEMM).
GemmArgs row_block(const GemmArgs& g, int first_row, int rows) {
  GemmArgs part = g;
  const std::size_t a_offset = to_size(first_row) * to_size(g.k);
  const std::size_t c_offset = to_size(first_row) * to_size(g.n);
  part.m = rows;
  part.a = g.a + a_offset;
  part.c = static_cast<Bf16*>(g.c) + c_offset;
  if (g.c_source != nullptr) part.c_source = static_cast<const Bf16*>(g.c_source) + c_offset;
  if (g.gelu_input != nullptr) part.gelu_input = g.gelu_input + c_offset;
  return part;
}

// Whether every row block of `rows` rows starts 16-byte aligned, as cuBLASLt's
// operands must (kernels::gemm_check): rows·k and rows·n bf16 values a
// multiple of 8. Otherwise the product runs whole, after the last chunk.
bool row_blocks_aligned(const GemmArgs& g, int rows) {
  return (to_size(rows) * to_size(g.k)) % 8 == 0 && (to_size(rows) * to_size(g.n)) % 8 == 0;
}

}  // namespace

// Y (T, out) = X (T, in) W^T (+ b) (+ R): cuBLASLt with the bias in its
// epilogue and the residual R read as its C (beta 1).
GemmArgs Linear::forward_args(Bf16* y, const Bf16* x, const LinearParameters& p, const Bf16* residual) const {
  GemmArgs g;
  g.m = rows_;
  g.n = p.out_width;
  g.k = p.in_width;
  g.a = x;
  g.b = p.weight;
  g.transpose_b = Transpose::kYes;
  g.c = y;
  if (p.bias != nullptr) {
    g.epilogue = GemmEpilogue::kBias;
    g.bias = p.bias;
  }
  if (residual != nullptr) {
    g.c_source = residual;
    g.beta = 1.0f;
  }
  return g;
}

GemmArgs Linear::gelu_forward_args(Bf16* act, Bf16* gelu_input, const Bf16* x, const LinearParameters& p) const {
  GemmArgs g = forward_args(act, x, p);
  g.epilogue = p.bias != nullptr ? GemmEpilogue::kBiasGelu : GemmEpilogue::kGelu;
  g.gelu_input = gelu_input;
  return g;
}

void Linear::backward(Bf16* dx, const Bf16* dy, const Bf16* x, const LinearParameters& p, Bf16* gelu_input) {
  weight_gradient(dy, x, p);
  if (dx != nullptr) input_gradient(dx, dy, p, gelu_input);
}

void Linear::weight_gradient(const Bf16* dy, const Bf16* x, const LinearParameters& p) {
  // dW (out, in) (+)= dY^T (out, T) X (T, in), in fp32 (beta 1 accumulates).
  GemmArgs dw;
  dw.m = p.out_width;
  dw.n = p.in_width;
  dw.k = rows_;
  dw.a = dy;
  dw.transpose_a = Transpose::kYes;
  dw.b = x;
  dw.c = p.weight_gradient;
  dw.c_type = GemmOutput::kFp32;
  dw.beta = runtime_.accumulate_gradients ? 1.0f : 0.0f;
  run(dw);
  if (p.bias_gradient != nullptr) bias_gradient(runtime_, p.bias_gradient, dy, rows_, p.out_width);
}

GemmArgs Linear::input_gradient_args(Bf16* dx, const Bf16* dy, const LinearParameters& p, Bf16* gelu_input) const {
  // dX (T, in) = dY (T, out) W (out, in).
  GemmArgs g;
  g.m = rows_;
  g.n = p.in_width;
  g.k = p.out_width;
  g.a = dy;
  g.b = p.weight;
  g.c = dx;
  if (gelu_input != nullptr) {
    g.epilogue = GemmEpilogue::kGeluBackward;
    g.gelu_input = gelu_input;
  }
  return g;
}

void bias_gradient(const LinearRuntime& runtime, float* db, const Bf16* dy, int rows, int width) {
  kernels::bias_gradient(db, dy, rows, width, runtime.accumulate_gradients, runtime.bias_workspace,
                         runtime.bias_workspace_bytes, runtime.stream);
}

void Linear::run_on_gathered_chunks(const GemmArgs& g) {
  SequenceParallel& sp = *runtime_.sequence_parallel;
  const int rows = rows_ / sp.chunks();  // one rank's tokens
  const bool chunked = row_blocks_aligned(g, rows);
  for (int step = 0; step < sp.chunks(); ++step) {
    const int chunk = sp.wait_chunk(step);
    if (chunked) run(row_block(g, chunk * rows, rows));
  }
  if (!chunked) run(g);
}

void ColumnParallelLinear::forward(const GemmArgs& g) {
  SequenceParallel* sp = runtime().sequence_parallel;
  // Chunk by chunk in ring order (overlap_schedule.h): step i's GEMM runs on
  // the compute stream while step i + 1's chunk travels on the tp stream.
  if (sp != nullptr && sp->take_input_chunks())
    run_on_gathered_chunks(g);
  else
    run(g);
}

void ColumnParallelLinear::backward(Bf16* dx, const Bf16* dy, const Bf16* x, const LinearParameters& p) {
  SequenceParallel* sp = runtime().sequence_parallel;
  if (sp == nullptr || !sp->input_gather_pending()) {
    Linear::backward(dx, dy, x, p);
    return;
  }
  // The input gradient first; its reduce-scatter onto this rank's tokens (the
  // reduce-scatter task after the block waits for it) runs on the tp stream
  // while the weight gradient computes — Transformer Engine's bulk overlap of
  // the dgrad reduce-scatter with the wgrad GEMM (BULK_OVERLAP_RS in
  // transformer_engine/common/userbuffers/comm_gemm_overlap.h, which Megatron's
  // --tp-comm-overlap turns on for these layers); the collective is the
  // backward of Korthikanti et al. 2022's g operator (Sec. 4.2.2). The same
  // products and collective as Linear::backward and the reduce-scatter task,
  // in another order: the same results, bit for bit.
  input_gradient(dx, dy, p);
  sp->start_input_gradient_scatter(dx);
  sp->wait_input_gathered();  // x: the gathered input
  weight_gradient(dy, x, p);
}

void RowParallelLinear::forward(Bf16* y, const Bf16* x, const LinearParameters& p, const Bf16* residual) {
  const Collectives* group = runtime().group;
  if (group == nullptr || group->rank() == 0) {
    Linear::forward(y, x, p, residual);
    return;
  }
  LinearParameters partial = p;  // the other ranks: the product alone
  partial.bias = nullptr;
  Linear::forward(y, x, partial, nullptr);
}

void RowParallelLinear::forward_partial_sums(Bf16* partials, const Bf16* x, const LinearParameters& p) {
  LinearParameters product = p;  // the bias is added on the rank's tokens, after the sum
  product.bias = nullptr;
  const GemmArgs g = forward_args(partials, x, product);
  SequenceParallel& sp = *runtime().sequence_parallel;
  if (!sp.chunked()) {
    run(g);
    return;
  }
  // Chunk j's rows, then their partial sums off to rank j while chunk j + 1 computes.
  const int rows = static_cast<int>(g.m) / sp.chunks();
  const bool chunked = row_blocks_aligned(g, rows);
  if (!chunked) run(g);
  for (int chunk = 0; chunk < sp.chunks(); ++chunk) {
    if (chunked) run(row_block(g, chunk * rows, rows));
    sp.send_partial_chunk(chunk, partials);
  }
}

void RowParallelLinear::backward(Bf16* dx, const Bf16* dy, const Bf16* x, const LinearParameters& p,
                                 Bf16* gelu_input) {
  SequenceParallel* sp = runtime().sequence_parallel;
  if (sp == nullptr || !sp->take_gradient_chunks()) {
    Linear::backward(dx, dy, x, p, gelu_input);
    return;
  }
  // The input gradient's rows as the output gradient's chunks arrive (ring
  // order, as in the forward: Transformer Engine's split pipelined all-gather,
  // which Megatron's --tp-comm-overlap uses for proj's and fc2's dgrad), then
  // the weight gradient, which needs every token's.
  run_on_gathered_chunks(input_gradient_args(dx, dy, p, gelu_input));
  weight_gradient(dy, x, p);
}

}  // namespace sextant::engine::tensor_parallel
