// AdamW (Loshchilov & Hutter 2019) on fp32 master weights, writing the bf16
// copy the forward pass reads. The arithmetic follows torch.optim.AdamW
// (decoupled decay p *= 1 - lr * wd, bias-corrected moments, eps added to
// sqrt(v) / sqrt(1 - beta2^t)), so a PyTorch reference run matches it.
#pragma once

#include <cstddef>

#include "kernels/bf16.h"
#include "kernels/stream.h"

namespace sextant::kernels {

/// Hyper-parameters of one update. Defaults are PyTorch's, except weight_decay
/// (PyTorch 0.01; GPT-3 and Megatron's examples use 0.1, passed explicitly).
struct AdamWStep {
  float learning_rate = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.01f;  // 0 for biases and norm parameters
  int step = 1;                // 1-based count of updates, for the bias correction
};

/// For each i < n:
///   g = grads[i] * (*grad_scale)          (grad_scale: device scalar, e.g. the clip
///                                          factor from grad_norm.h; null means 1)
///   m = beta1 m + (1 - beta1) g;  v = beta2 v + (1 - beta2) g^2
///   master = master (1 - lr wd) - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
///   weights[i] = bf16(master)             (round to nearest even; weights may be null)
/// master, grads, m, v: (n) fp32; weights: (n) bf16. All 16-byte aligned.
/// Reading the scale from the device keeps the step free of host syncs. A
/// non-finite *grad_scale (grad_clip_scale's answer to a non-finite gradient
/// norm) skips the update: nothing is read or written.
/// max_blocks > 0 caps the grid (1024 threads a block, looping over n): an
/// update that runs beside other kernels on a few multiprocessors; 0 gives one
/// thread per four elements.
void adamw_update(float* master, Bf16* weights, float* m, float* v, const float* grads,
                  std::size_t n, const AdamWStep& step, const float* grad_scale,
                  cudaStream_t stream, int max_blocks = 0);

}  // namespace sextant::kernels
