#include "engine/calibration/linear.h"

#include <algorithm>
#include <vector>

namespace sextant::engine::calibration {

namespace {

using kernels::Bf16;
using kernels::GemmArgs;
using kernels::GemmOutput;
using kernels::Transpose;

// One buffer set: x (T, in), W (out, in), y = dy (T, out), dx (T, in) bf16; dW (out, in) fp32;
// for the epilogues: the residual r (T, out), GELU's saved input aux (T, max(in, out)) and
// the bias (out) bf16.
struct LinearSet {
  Bf16* x;
  Bf16* w;
  Bf16* y;
  Bf16* dx;
  float* dw;
  Bf16* r;
  Bf16* aux;
  Bf16* bias;
};

std::size_t set_bytes(const LinearShape& s) {
  const std::size_t t = static_cast<std::size_t>(s.tokens), i = static_cast<std::size_t>(s.in_width),
                    o = static_cast<std::size_t>(s.out_width);
  return aligned_bytes(t * i * 2) + aligned_bytes(o * i * 2) + aligned_bytes(t * o * 2) +
         aligned_bytes(t * i * 2) + aligned_bytes(o * i * 4) + aligned_bytes(t * o * 2) +
         aligned_bytes(t * std::max(i, o) * 2) + aligned_bytes(o * 2);
}

// The engine's calls (engine/tensor_parallel/parallel_linear.cc: Linear's forward_args,
// gelu_forward_args, weight_gradient and input_gradient_args).
GemmArgs forward_args(const LinearShape& s, const LinearSet& b) {
  GemmArgs g;
  g.m = static_cast<int>(s.tokens), g.n = static_cast<int>(s.out_width), g.k = static_cast<int>(s.in_width);
  g.a = b.x;
  g.b = b.w;
  g.transpose_b = Transpose::kYes;
  g.c = b.y;
  return g;
}

GemmArgs forward_bias_args(const LinearShape& s, const LinearSet& b) {
  GemmArgs g = forward_args(s, b);
  g.epilogue = kernels::GemmEpilogue::kBias;
  g.bias = b.bias;
  return g;
}

GemmArgs forward_residual_args(const LinearShape& s, const LinearSet& b) {
  GemmArgs g = forward_args(s, b);
  g.c_source = b.r;
  g.beta = 1.0f;
  return g;
}

GemmArgs forward_bias_residual_args(const LinearShape& s, const LinearSet& b) {
  GemmArgs g = forward_residual_args(s, b);
  g.epilogue = kernels::GemmEpilogue::kBias;
  g.bias = b.bias;
  return g;
}

GemmArgs forward_bias_gelu_args(const LinearShape& s, const LinearSet& b) {
  GemmArgs g = forward_args(s, b);
  g.epilogue = kernels::GemmEpilogue::kBiasGelu;
  g.bias = b.bias;
  g.gelu_input = b.aux;
  return g;
}

GemmArgs input_gradient_args(const LinearShape& s, const LinearSet& b) {
  GemmArgs g;
  g.m = static_cast<int>(s.tokens), g.n = static_cast<int>(s.in_width), g.k = static_cast<int>(s.out_width);
  g.a = b.y;
  g.b = b.w;
  g.c = b.dx;
  return g;
}

GemmArgs input_gradient_dgelu_args(const LinearShape& s, const LinearSet& b) {
  GemmArgs g = input_gradient_args(s, b);
  g.epilogue = kernels::GemmEpilogue::kGeluBackward;
  g.gelu_input = b.aux;
  return g;
}

GemmArgs weight_gradient_args(const LinearShape& s, const LinearSet& b) {
  GemmArgs g;
  g.m = static_cast<int>(s.out_width), g.n = static_cast<int>(s.in_width), g.k = static_cast<int>(s.tokens);
  g.a = b.y;
  g.transpose_a = Transpose::kYes;
  g.b = b.x;
  g.c = b.dw;
  g.c_type = GemmOutput::kFp32;
  g.beta = 1.0f;
  return g;
}

}  // namespace

std::size_t linear_scratch_bytes(const LinearShape& shape, std::size_t l2_bytes) {
  return set_bytes(shape) * static_cast<std::size_t>(rotations_for(set_bytes(shape), l2_bytes));
}

double linear_estimate_s(const LinearShape& s) {
  const double flops = 2.0 * s.tokens * s.in_width * s.out_width;
  return flops / 600e12 + static_cast<double>(set_bytes(s)) / 3e12 + 5e-6;
}

LinearPoint measure_linear(const LinearShape& shape, kernels::CublasLtGemm& gemm, const MeasurementContext& ctx) {
  const int rotations = rotations_for(set_bytes(shape), ctx.l2_bytes);
  ctx.scratch->reset();
  std::vector<LinearSet> sets;
  const std::size_t t = static_cast<std::size_t>(shape.tokens), i = static_cast<std::size_t>(shape.in_width),
                    o = static_cast<std::size_t>(shape.out_width);
  for (int r = 0; r < rotations; ++r) {
    LinearSet b;
    b.x = ctx.scratch->take_as<Bf16>(t * i);
    b.w = ctx.scratch->take_as<Bf16>(o * i);
    b.y = ctx.scratch->take_as<Bf16>(t * o);
    b.dx = ctx.scratch->take_as<Bf16>(t * i);
    b.dw = ctx.scratch->take_as<float>(o * i);
    b.r = ctx.scratch->take_as<Bf16>(t * o);
    b.aux = ctx.scratch->take_as<Bf16>(t * std::max(i, o));
    b.bias = ctx.scratch->take_as<Bf16>(o);
    sets.push_back(b);
  }
  // The engine tunes each problem over cuBLASLt's first 16 heuristic candidates
  // (CublasLtGemm::set_tune_new_problems: 3 timed launches each); here each is
  // timed once, which keeps the whole calibration within minutes.
  constexpr int candidates = 16;
  auto time_product = [&](GemmArgs (*args_of)(const LinearShape&, const LinearSet&)) {
    gemm.tune(args_of(shape, sets[0]), ctx.stream, candidates, 1);
    return median_seconds_in_graph([&](int set) { gemm.run(args_of(shape, sets[static_cast<std::size_t>(set)]), ctx.stream); },
                          rotations, ctx);
  };
  LinearPoint p;
  p.tokens = shape.tokens;
  p.in_width = shape.in_width;
  p.out_width = shape.out_width;
  p.forward_s = time_product(forward_args);
  p.input_gradient_s = time_product(input_gradient_args);
  p.weight_gradient_s = time_product(weight_gradient_args);
  p.forward_bias_s = time_product(forward_bias_args);
  p.forward_residual_s = time_product(forward_residual_args);
  p.forward_bias_residual_s = time_product(forward_bias_residual_args);
  p.forward_bias_gelu_s = time_product(forward_bias_gelu_args);
  p.input_gradient_dgelu_s = time_product(input_gradient_dgelu_args);
  return p;
}

}  // namespace sextant::engine::calibration
