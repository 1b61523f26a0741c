// The residual stream of a Transformer's layers — what Megatron-Core's
// TransformerLayer passes from sublayer to sublayer — and its gradient: each
// layer's input, the stream between its attention and MLP blocks, and the
// last layer's output, (T, h) per micro-batch, or under sequence parallelism
// (T/tp, h) on this rank's tokens. The Transformer owns it; each residual
// block (residual_block.h) reads its input from it and writes its output to it.
#pragma once

#include <vector>

#include "kernels/bf16.h"

namespace sextant::engine::transformer {

struct ResidualStream {
  /// Per layer: the stream entering it, and `mid`, its input plus the
  /// attention block's output (under full recomputation every layer > 0 shares
  /// layer 0's `mid`: the recomputed forward rewrites it).
  std::vector<kernels::Bf16*> input;
  std::vector<kernels::Bf16*> mid;
  kernels::Bf16* final_input = nullptr;  // the last layer's output, the final norm's input
  /// dL/d(stream), rewritten by each block's backward on the way down (a
  /// pipeline stage's send and receive buffer).
  kernels::Bf16* gradient = nullptr;
  /// (T, h), one micro-batch's, reused by every block: the row-parallel
  /// products' partial sums under sequence parallelism and the norms' input
  /// gradients in the backward.
  kernels::Bf16* scratch = nullptr;

  /// The stream entering layer `layer` + 1 (the final norm's input after the last).
  kernels::Bf16* next_input(int layer) const {
    return layer + 1 < static_cast<int>(input.size()) ? input[static_cast<std::size_t>(layer + 1)] : final_input;
  }
  /// The first layer's input: what the embedding writes or the previous stage sends.
  kernels::Bf16* first_input() const { return input.empty() ? final_input : input[0]; }
};

}  // namespace sextant::engine::transformer
