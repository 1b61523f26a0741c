#include "engine/transformer/model_context.h"

#include <algorithm>

#include "engine/comm/communicator.h"
#include "kernels/bias_gradient.h"

namespace sextant::engine::transformer {

ModelContext::ModelContext(const TransformerShape& shape)
    : shape_(shape), sequence_parallel_(to_size(shape.norm_tokens() * shape.hidden)) {}

void ModelContext::reserve_bias_workspace(BufferReserver& r) {
  const int widest_bias = std::max({shape_.qkv_width(), shape_.fc1_width(), shape_.hidden});
  bias_workspace_bytes_ = kernels::bias_gradient_workspace_bytes(static_cast<int>(shape_.tokens()), widest_bias);
  r.shared(bias_workspace_, "workspace.bias_gradient", MemoryCategory::kOther, bias_workspace_bytes_);
}

void ModelContext::reserve_gemm_workspace(BufferReserver& r) {
  r.shared(gemm_workspace_, "workspace.cublaslt", MemoryCategory::kOther, kernels::kCublasLtWorkspaceBytes);
}

void ModelContext::bind(const ParameterLayout& layout, ParameterBuffers parameters, cudaStream_t stream,
                        comm::Communicator* tensor_parallel, comm::Communicator* expert_parallel,
                        comm::Communicator* context_parallel) {
  if (tensor_parallel != nullptr && tensor_parallel->size() > 1)
    tp_ = std::make_unique<tensor_parallel::Collectives>(*tensor_parallel, stream);
  if (expert_parallel != nullptr && expert_parallel->size() > 1)
    ep_ = std::make_unique<tensor_parallel::Collectives>(*expert_parallel, stream);
  if (context_parallel != nullptr && context_parallel->size() > 1)
    cp_ = std::make_unique<tensor_parallel::Collectives>(*context_parallel, stream);
  layout_ = &layout;
  parameters_ = parameters;
  gemm_ = std::make_unique<kernels::CublasLtGemm>(gemm_workspace_, kernels::kCublasLtWorkspaceBytes);
  runtime_.gemm = gemm_.get();
  runtime_.stream = stream;
  runtime_.bias_workspace = bias_workspace_;
  runtime_.bias_workspace_bytes = bias_workspace_bytes_;
  runtime_.group = tp_.get();
  if (tp_ != nullptr && shape_.sequence_parallel) {
    sequence_parallel_.bind(*tp_, shape_.tp_comm_overlap);
    runtime_.sequence_parallel = &sequence_parallel_;
  }
}

const Bf16* ModelContext::weight(int tensor) const {
  if (tensor == LayerTensors::kAbsent) return nullptr;
  return parameters_.weights + layout_->tensor(tensor).offset;
}

float* ModelContext::gradient(int tensor) const {
  if (tensor == LayerTensors::kAbsent) return nullptr;
  return parameters_.gradients + layout_->tensor(tensor).offset;
}

tensor_parallel::LinearParameters ModelContext::linear(int weight_tensor, int bias_tensor, int in_width,
                                                       int out_width) const {
  tensor_parallel::LinearParameters p;
  p.weight = weight(weight_tensor);
  p.bias = weight(bias_tensor);
  p.weight_gradient = gradient(weight_tensor);
  p.bias_gradient = gradient(bias_tensor);
  p.in_width = in_width;
  p.out_width = out_width;
  return p;
}

}  // namespace sextant::engine::transformer
