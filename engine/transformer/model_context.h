// What every part of one Transformer shares (engine/transformer.h): its shape,
// where the parameters are, the compute stream and the GEMM runner, whether
// the backward writes or adds parameter gradients, and the tensor-parallel
// group with sequence parallelism's exchanges. The Transformer owns one and
// hands it to its parts (embedding, attention, MLP, output layer, norms);
// everything but the shape is set by bind().
#pragma once

#include <memory>

#include "engine/model/parameter_layout.h"
#include "engine/transformer/arena_buffers.h"
#include "engine/model/transformer_shape.h"
#include "engine/tensor_parallel/collectives.h"
#include "engine/tensor_parallel/parallel_linear.h"
#include "engine/tensor_parallel/sequence_parallel.h"
#include "kernels/bf16.h"
#include "kernels/gemm_cublaslt.h"

namespace sextant::engine {

namespace comm {
class Communicator;
}

using kernels::Bf16;

/// Where the parameters live: the flat buffers of parameter_layout.h.
struct ParameterBuffers {
  const Bf16* weights = nullptr;  // bf16 model weights
  float* gradients = nullptr;     // fp32, accumulated
};

namespace transformer {

inline std::size_t to_size(std::int64_t n) { return static_cast<std::size_t>(n); }

class ModelContext {
 public:
  explicit ModelContext(const TransformerShape& shape);

  /// The workspaces every linear layer uses: the bias gradients' column
  /// partials (for the widest layer) and cuBLASLt's.
  void reserve_bias_workspace(BufferReserver& r);
  void reserve_gemm_workspace(BufferReserver& r);
  /// After the arena is bound: points everything at the parameters and the
  /// stream. `tensor_parallel`: the rank's tp group (null or one rank: none);
  /// `expert_parallel`: its ep group (the same); `context_parallel`: its cp group (the same).
  void bind(const ParameterLayout& layout, ParameterBuffers parameters, cudaStream_t stream,
            comm::Communicator* tensor_parallel, comm::Communicator* expert_parallel = nullptr,
            comm::Communicator* context_parallel = nullptr);

  const TransformerShape& shape() const { return shape_; }
  const ParameterLayout& layout() const { return *layout_; }
  cudaStream_t stream() const { return runtime_.stream; }
  /// The bf16 weight and fp32 gradient of `tensor` (ParameterLayout's index);
  /// null for LayerTensors::kAbsent.
  const Bf16* weight(int tensor) const;
  float* gradient(int tensor) const;
  /// A linear layer's parameters: weight and bias tensors (the bias may be kAbsent).
  tensor_parallel::LinearParameters linear(int weight_tensor, int bias_tensor, int in_width, int out_width) const;

  /// What the linear layers run on (tensor_parallel/parallel_linear.h).
  const tensor_parallel::LinearRuntime& runtime() const { return runtime_; }
  kernels::CublasLtGemm& gemm() const { return *gemm_; }
  bool accumulate_gradients() const { return runtime_.accumulate_gradients; }
  void set_accumulate_gradients(bool accumulate) { runtime_.accumulate_gradients = accumulate; }

  /// The tp group's collectives; null without tensor parallelism.
  tensor_parallel::Collectives* tp() const { return tp_.get(); }
  /// Whether this rank adds the terms a sum over the tp group must count once
  /// (a row-parallel product's bias and residual, the positions' embedding):
  /// rank 0 of the group, or the only rank.
  bool adds_replicated_terms() const { return tp_ == nullptr || tp_->rank() == 0; }
  /// The ep group's exchanges, ordered with the compute stream as tp()'s are;
  /// null without expert parallelism.
  tensor_parallel::Collectives* ep() const { return ep_.get(); }
  /// The cp group's collectives (the attention core's K/V exchanges), ordered
  /// the same way; null without context parallelism.
  tensor_parallel::Collectives* cp() const { return cp_.get(); }
  /// Sequence parallelism's buffers and exchanges (its buffers exist when the
  /// shape is sequence-parallel; its exchanges after bind with tp > 1).
  tensor_parallel::SequenceParallel& sequence_parallel() { return sequence_parallel_; }

 private:
  TransformerShape shape_;
  const ParameterLayout* layout_ = nullptr;
  ParameterBuffers parameters_;
  std::unique_ptr<kernels::CublasLtGemm> gemm_;
  std::unique_ptr<tensor_parallel::Collectives> tp_;
  std::unique_ptr<tensor_parallel::Collectives> ep_;
  std::unique_ptr<tensor_parallel::Collectives> cp_;
  tensor_parallel::SequenceParallel sequence_parallel_;
  tensor_parallel::LinearRuntime runtime_;
  char* bias_workspace_ = nullptr;
  std::size_t bias_workspace_bytes_ = 0;
  char* gemm_workspace_ = nullptr;
};

}  // namespace transformer
}  // namespace sextant::engine
