// The MLP block of each layer, Megatron-Core's MLP: norm2, fc1
// (column-parallel: ffn divided by tp), GELU (Hendrycks and Gimpel 2016;
// GPT) or SwiGLU (Shazeer 2020; Llama: fc1's output is [gate | up]), and fc2
// (row-parallel) back into the residual stream, with the residual add riding
// on its GEMM. GELU runs in fc1's epilogue with the bias (Megatron's bias_gelu
// fusion) and its backward in fc2's input-gradient epilogue (cuBLASLt's DGELU,
// the forward's GELU input read as its auxiliary). An MoE layer
// (Megatron-Core's MoELayer) is another block in this place.
//
// Stored per layer for the backward (with the norm's output and statistics,
// residual_block.h): fc1's output (GELU's input, or SwiGLU's [gate | up]) and
// fc2's input.
#pragma once

#include <vector>

#include "engine/tensor_parallel/parallel_linear.h"
#include "engine/transformer/residual_block.h"

namespace sextant::engine::transformer {

class Mlp : public ResidualBlock {
 public:
  Mlp(ModelContext& context, ResidualStream& stream, Norm& norm);

  /// The activation's gradients.
  void reserve_pass(BufferReserver& r) override;
  void bind(bool full_recompute) override;

  /// recompute: the block again without fc2 (the next layer's input is stored).
  void forward(int layer, bool recompute) override;
  void backward(int layer) override;

 protected:
  Ends ends(int layer) const override;
  void reserve_stored(int layer, BufferReserver& r) override;
  bool recompute_writes_output() const override { return false; }

 private:
  struct Stored {
    Bf16* fc1_out = nullptr;  // (T, fc1_width): GELU's input, or SwiGLU's [gate | up]
    Bf16* act = nullptr;      // (T, ffn), fc2's input
  };
  std::vector<Stored> stored_;  // per layer
  tensor_parallel::ColumnParallelLinear fc1_;
  tensor_parallel::RowParallelLinear fc2_;
  Bf16* dact_ = nullptr;  // (T, ffn)
  Bf16* dfc1_ = nullptr;  // (T, fc1_width), SwiGLU only
};

}  // namespace sextant::engine::transformer
