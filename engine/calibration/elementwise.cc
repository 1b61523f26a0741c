#include "engine/calibration/elementwise.h"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <vector>

#include "kernels/adamw.h"
#include "kernels/bias_gradient.h"
#include "kernels/cross_entropy.h"
#include "kernels/cuda_check.h"
#include "kernels/embedding.h"
#include "kernels/gelu.h"
#include "kernels/grad_norm.h"
#include "kernels/layernorm.h"
#include "kernels/residual.h"
#include "kernels/rmsnorm.h"
#include "kernels/rope.h"
#include "kernels/swiglu.h"

namespace sextant::engine::calibration {

namespace {

using kernels::Bf16;

constexpr int kSequence = 2048;     // RoPE and embedding rows are whole sequences of this length
constexpr int kEmbeddingVocab = 51200;  // GPT-2's padded vocabulary (configs/models/gpt-*.yaml)
constexpr int kRopeHeadDim = 128;

// A kernel's buffers: `per_set` rotated (one pointer each per set), `shared` once.
struct Layout {
  std::vector<std::size_t> per_set;
  std::vector<std::size_t> shared;
};

struct Buffers {
  std::vector<std::vector<void*>> sets;  // [set][i]
  std::vector<void*> shared;
};

Layout layout_of(const std::string& kernel, const ElementwiseShape& s) {
  const std::size_t R = static_cast<std::size_t>(s.rows), W = static_cast<std::size_t>(s.width), n = R * W;
  const int rows = static_cast<int>(s.rows), cols = static_cast<int>(s.width);
  const std::size_t bf = sizeof(Bf16), f = sizeof(float);
  if (kernel == "layernorm_forward") return {{n * bf, n * bf, R * f, R * f}, {W * bf, W * bf}};
  if (kernel == "layernorm_backward")
    return {{n * bf, n * bf, n * bf, R * f, R * f, n * bf},
            {W * bf, W * f, W * f, W * f, kernels::layernorm_backward_workspace_bytes(rows, cols)}};
  if (kernel == "rmsnorm_forward") return {{n * bf, n * bf, R * f}, {W * bf}};
  if (kernel == "rmsnorm_backward")
    return {{n * bf, n * bf, n * bf, R * f, n * bf}, {W * bf, W * f, kernels::rmsnorm_backward_workspace_bytes(rows, cols)}};
  if (kernel == "gelu_forward") return {{n * bf, n * bf}, {W * bf}};
  if (kernel == "swiglu_forward") return {{n * bf, 2 * n * bf}, {}};
  if (kernel == "swiglu_backward") return {{2 * n * bf, n * bf, 2 * n * bf}, {}};
  if (kernel == "rope_forward" || kernel == "rope_backward") return {{n * bf}, {}};
  if (kernel == "embedding_forward")
    return {{n * bf}, {R * sizeof(std::int32_t), kEmbeddingVocab * W * bf, kSequence * W * bf}};
  if (kernel == "embedding_backward")
    return {{n * bf},
            {R * sizeof(std::int32_t), kEmbeddingVocab * W * f, kSequence * W * f,
             kernels::embedding_backward_workspace_bytes(rows / kSequence, kSequence, kEmbeddingVocab)}};
  if (kernel == "cross_entropy") return {{n * bf}, {R * sizeof(std::int32_t), R * f}};
  if (kernel == "bias_gradient")
    return {{n * bf}, {W * f, kernels::bias_gradient_workspace_bytes(rows, cols)}};
  if (kernel == "residual_add") return {{n * bf, n * bf, n * bf}, {}};
  if (kernel == "adamw") return {{n * f, n * bf, n * f, n * f, n * f}, {}};
  if (kernel == "grad_norm") return {{n * f}, {f, kernels::grad_sum_squares_workspace_bytes()}};
  throw std::invalid_argument("elementwise: unknown kernel '" + kernel + "'");
}

std::size_t sum_aligned(const std::vector<std::size_t>& sizes) {
  std::size_t total = 0;
  for (const std::size_t b : sizes) total += aligned_bytes(b);
  return total;
}

// Tokens spread over [0, bound) (a 64-bit LCG, Knuth's MMIX constants, as the
// trainer's GEMM tuning draws them): one token everywhere would make the
// embedding backward one long run.
void upload_tokens(void* device, std::size_t count, int bound) {
  std::vector<std::int32_t> tokens(count);
  std::uint64_t state = 0x9e3779b97f4a7c15ULL;
  for (auto& t : tokens) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    t = static_cast<std::int32_t>((state >> 33) % static_cast<std::uint64_t>(bound));
  }
  SEXTANT_CUDA_CHECK(cudaMemcpy(device, tokens.data(), count * sizeof(std::int32_t), cudaMemcpyHostToDevice));
}

kernels::RopeShape rope_shape(const ElementwiseShape& s) {
  kernels::RopeShape r;
  r.batch = static_cast<int>(s.rows / kSequence);
  r.seq = kSequence;
  r.heads = static_cast<int>(s.width / (3 * kRopeHeadDim));
  r.kv_heads = r.heads;
  r.head_dim = kRopeHeadDim;
  r.row_stride = static_cast<int>(s.width);
  return r;
}

using Launch = std::function<void(const std::vector<void*>& set)>;

Launch launch_of(const std::string& kernel, const ElementwiseShape& s, const std::vector<void*>& sh,
                 cudaStream_t stream) {
  const int rows = static_cast<int>(s.rows), cols = static_cast<int>(s.width);
  const std::size_t n = static_cast<std::size_t>(s.rows) * static_cast<std::size_t>(s.width);
  auto bf = [](void* p) { return static_cast<Bf16*>(p); };
  auto fl = [](void* p) { return static_cast<float*>(p); };
  constexpr float kEps = 1e-5f;
  if (kernel == "layernorm_forward")
    return [=](const std::vector<void*>& b) {
      kernels::layernorm_forward(bf(b[0]), fl(b[2]), fl(b[3]), bf(b[1]), bf(sh[0]), bf(sh[1]), rows, cols, kEps, stream);
    };
  if (kernel == "layernorm_backward")
    return [=](const std::vector<void*>& b) {
      // As the engine calls it for GPT: the residual's gradient added, and the next
      // linear layer's bias gradient summed in the same pass where the width allows.
      kernels::NormBackwardOptions o;
      o.residual_grad = bf(b[5]);
      if (cols <= kernels::kNormBackwardMaxSummedCols) o.dinp_column_sums = fl(sh[3]);
      const std::size_t workspace_bytes = kernels::layernorm_backward_workspace_bytes(rows, cols);
      kernels::layernorm_backward(bf(b[0]), fl(sh[1]), fl(sh[2]), bf(b[1]), bf(b[2]), bf(sh[0]), fl(b[3]), fl(b[4]),
                                  rows, cols, sh[4], workspace_bytes, stream, o);
    };
  if (kernel == "rmsnorm_forward")
    return [=](const std::vector<void*>& b) {
      kernels::rmsnorm_forward(bf(b[0]), fl(b[2]), bf(b[1]), bf(sh[0]), rows, cols, kEps, stream);
    };
  if (kernel == "rmsnorm_backward")
    return [=](const std::vector<void*>& b) {
      kernels::NormBackwardOptions o;  // Llama: no biases, so no column sums
      o.residual_grad = bf(b[4]);
      kernels::rmsnorm_backward(bf(b[0]), fl(sh[1]), bf(b[1]), bf(b[2]), bf(sh[0]), fl(b[3]), rows, cols, sh[2],
                                kernels::rmsnorm_backward_workspace_bytes(rows, cols), stream, o);
    };
  if (kernel == "gelu_forward")
    return [=](const std::vector<void*>& b) { kernels::gelu_forward(bf(b[0]), bf(b[1]), bf(sh[0]), rows, cols, stream); };
  if (kernel == "swiglu_forward")
    return [=](const std::vector<void*>& b) { kernels::swiglu_forward(bf(b[0]), bf(b[1]), rows, cols, stream); };
  if (kernel == "swiglu_backward")
    return [=](const std::vector<void*>& b) {
      kernels::swiglu_backward(bf(b[0]), bf(b[1]), bf(b[2]), rows, cols, stream);
    };
  if (kernel == "rope_forward" || kernel == "rope_backward") {
    const kernels::RopeShape r = rope_shape(s);
    if (kernel == "rope_forward") return [=](const std::vector<void*>& b) { kernels::rope_forward(bf(b[0]), r, stream); };
    return [=](const std::vector<void*>& b) { kernels::rope_backward(bf(b[0]), r, stream); };
  }
  if (kernel == "embedding_forward")
    return [=](const std::vector<void*>& b) {
      kernels::embedding_forward(bf(b[0]), static_cast<const std::int32_t*>(sh[0]), bf(sh[1]), bf(sh[2]),
                                 rows / kSequence, kSequence, cols, stream);
    };
  if (kernel == "embedding_backward")
    return [=](const std::vector<void*>& b) {
      const std::size_t workspace_bytes =
          kernels::embedding_backward_workspace_bytes(rows / kSequence, kSequence, kEmbeddingVocab);
      kernels::embedding_backward(fl(sh[1]), fl(sh[2]), bf(b[0]), static_cast<const std::int32_t*>(sh[0]),
                                  rows / kSequence, kSequence, kEmbeddingVocab, cols, sh[3], workspace_bytes, stream);
    };
  if (kernel == "cross_entropy")
    return [=](const std::vector<void*>& b) {
      // In place, as the engine's output layer calls it.
      kernels::softmax_cross_entropy(fl(sh[1]), bf(b[0]), bf(b[0]), static_cast<const std::int32_t*>(sh[0]), rows,
                                     cols, 1.0f / static_cast<float>(rows), stream);
    };
  if (kernel == "bias_gradient")
    return [=](const std::vector<void*>& b) {
      kernels::bias_gradient(fl(sh[0]), bf(b[0]), rows, cols, true, sh[1],
                             kernels::bias_gradient_workspace_bytes(rows, cols), stream);
    };
  if (kernel == "residual_add")
    return [=](const std::vector<void*>& b) { kernels::residual_add(bf(b[0]), bf(b[1]), bf(b[2]), n, stream); };
  if (kernel == "adamw")
    return [=](const std::vector<void*>& b) {
      kernels::AdamWStep step;
      step.weight_decay = 0.1f;
      kernels::adamw_update(fl(b[0]), bf(b[1]), fl(b[2]), fl(b[3]), fl(b[4]), n, step, nullptr, stream);
    };
  if (kernel == "grad_norm")
    return [=](const std::vector<void*>& b) {
      kernels::grad_sum_squares_accumulate(fl(sh[0]), fl(b[0]), n, sh[1], kernels::grad_sum_squares_workspace_bytes(),
                                           stream);
    };
  throw std::invalid_argument("elementwise: unknown kernel '" + kernel + "'");
}

}  // namespace

std::size_t elementwise_scratch_bytes(const std::string& kernel, const ElementwiseShape& shape, std::size_t l2_bytes) {
  const Layout l = layout_of(kernel, shape);
  const std::size_t set = sum_aligned(l.per_set);
  return set * static_cast<std::size_t>(rotations_for(set, l2_bytes)) + sum_aligned(l.shared);
}

double elementwise_estimate_s(const std::string& kernel, const ElementwiseShape& shape) {
  const Layout l = layout_of(kernel, shape);
  double bytes = 0;
  for (const std::size_t b : l.per_set) bytes += static_cast<double>(b);
  return bytes / 3e12 + 5e-6;
}

ElementwisePoint measure_elementwise(const std::string& kernel, const ElementwiseShape& shape,
                                     const MeasurementContext& ctx) {
  const Layout l = layout_of(kernel, shape);
  const int rotations = rotations_for(sum_aligned(l.per_set), ctx.l2_bytes);
  ctx.scratch->reset();
  Buffers buffers;
  for (const std::size_t b : l.shared) buffers.shared.push_back(ctx.scratch->take(b));
  for (int r = 0; r < rotations; ++r) {
    std::vector<void*> set;
    for (const std::size_t b : l.per_set) set.push_back(ctx.scratch->take(b));
    buffers.sets.push_back(set);
  }
  if (kernel == "embedding_forward" || kernel == "embedding_backward")
    upload_tokens(buffers.shared[0], static_cast<std::size_t>(shape.rows), kEmbeddingVocab);
  if (kernel == "cross_entropy")
    upload_tokens(buffers.shared[0], static_cast<std::size_t>(shape.rows), static_cast<int>(shape.width));
  const Launch launch = launch_of(kernel, shape, buffers.shared, ctx.stream);
  ElementwisePoint p;
  p.rows = shape.rows;
  p.width = shape.width;
  p.seconds = median_seconds_in_graph([&](int set) { launch(buffers.sets[static_cast<std::size_t>(set)]); }, rotations, ctx);
  return p;
}

}  // namespace sextant::engine::calibration
