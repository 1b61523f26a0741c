// Where each parameter tensor lives in the engine's flat parameter buffers.
//
// The engine keeps four flat arrays of the same element layout — bf16 model
// weights, fp32 gradients, fp32 master weights, fp32 Adam moments — so the
// optimizer, the gradient norm and zeroing each run over contiguous ranges
// instead of once per tensor. The tensors lie in the order the forward reads
// them, a layer's together, so the Plan's gradient buckets (consecutive
// layers) are contiguous ranges; weight decay (the matrices and embeddings;
// not the biases and norm parameters: Megatron's rule) applies to
// decayed_ranges(), AdamW running once per range and once per gap.
//
// Names and shapes follow PyTorch's layout, W (out_features, in_features):
//   wte (vocab, hidden), wpe (seq, hidden) with learned positions,
//   layers.<i>.{norm1_gamma, norm1_beta, qkv_weight, qkv_bias, proj_weight,
//   proj_bias, norm2_gamma, norm2_beta, fc1_weight, fc1_bias, fc2_weight,
//   fc2_bias}, final_norm_gamma, final_norm_beta, lm_head (untied only);
//   an MoE layer has layers.<i>.{router_weight, expert_fc1_weight,
//   expert_fc2_weight} in place of its fc1 and fc2.
// Under tensor parallelism each rank holds its shard (TransformerShape): wte
// and lm_head (vocab / tp, hidden) rows of the padded vocabulary.
// qkv_weight's rows are [Q heads | K heads | V heads]; fc1_weight's rows for
// SwiGLU are [gate | up]. Betas and biases exist only for LayerNorm and
// --add-bias-linear models.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "engine/model/transformer_shape.h"

namespace sextant::engine {

/// [begin, end) elements of the flat parameter buffers.
using ElementRange = std::pair<std::size_t, std::size_t>;

/// How a tensor is initialised (Megatron's defaults: init_method_normal and
/// scaled_init_method_normal; Shoeybi et al. 2019, Sec. 3 / Radford et al. 2019).
enum class ParameterInit {
  kNormal,        // N(0, std)
  kScaledNormal,  // N(0, std / sqrt(2 * layers)): the output projections feeding the residual
  kOnes,          // norm gains
  kZeros,         // biases and norm shifts
};

struct ParameterTensor {
  std::string name;
  std::int64_t rows = 0;  // 1 for vectors
  std::int64_t cols = 0;
  std::size_t offset = 0;  // elements from the start of the flat buffers
  bool weight_decay = false;
  ParameterInit init = ParameterInit::kZeros;
  /// Under tensor parallelism each rank holds a block of it (qkv and fc1
  /// weights and biases by rows, proj and fc2 weights by columns; Shoeybi et
  /// al. 2019); otherwise every rank holds all of it (embeddings, norms, the
  /// biases added after the row-parallel all-reduce).
  bool split_over_tp = false;
  /// How, when split_over_tp: the dimension split (0: rows, 1: columns) and
  /// the blocks along it, in this rank's sizes — rank r of tp holds rows (or
  /// columns) [start_k + r·b_k, +b_k) of each block k of the whole tensor,
  /// whose block k is tp·b_k long and starts at start_k = tp·(b_0 + ... +
  /// b_{k-1}). QKV: [q_width, kv_width, kv_width]/tp (the heads' Q, K and V
  /// rows); SwiGLU's fc1: [ffn, ffn]/tp (gate, up); the others one block.
  /// Checkpoints use it to move a tensor between tp layouts
  /// (engine/checkpoint/reshard_plan.h).
  int tp_split_dim = -1;
  std::vector<std::int64_t> tp_blocks;
  /// Replicated over the tp group, but under sequence parallelism each rank
  /// computes its gradient from its own tokens only (the norms' gains and
  /// shifts, the biases of proj and fc2 added after the reduce-scatter): the
  /// gradient is summed over the group before it is used (Megatron's
  /// sequence_parallel parameters, whose gradients it all-reduces over tp).
  bool partial_gradient_over_tp = false;
  /// An expert's weights (expert_fc1_weight, expert_fc2_weight): split over the
  /// ep ranks by experts, their gradients reduced over the expert-data-parallel
  /// group instead of dp x cp (Megatron-Core's MoE parallel folding).
  bool expert = false;
  std::size_t elements() const { return static_cast<std::size_t>(rows * cols); }
};

/// Indices into ParameterLayout::tensors() of one transformer layer's tensors;
/// kAbsent for a tensor this model does not have.
struct LayerTensors {
  static constexpr int kAbsent = -1;
  int norm1_gamma = kAbsent, norm1_beta = kAbsent;
  int qkv_weight = kAbsent, qkv_bias = kAbsent;
  int proj_weight = kAbsent, proj_bias = kAbsent;
  int norm2_gamma = kAbsent, norm2_beta = kAbsent;
  int fc1_weight = kAbsent, fc1_bias = kAbsent;
  int fc2_weight = kAbsent, fc2_bias = kAbsent;
  // An MoE layer's MLP (TransformerShape::moe_layer) in place of fc1 and fc2:
  // the router's linear layer (experts, hidden), and the local experts'
  // weights one after another, (local experts x fc1 width, hidden) and
  // (local experts x hidden, expert ffn) — each expert's block PyTorch's
  // (out, in), as kernels/moe_grouped_gemm.h reads them.
  int router_weight = kAbsent;
  int expert_fc1_weight = kAbsent, expert_fc2_weight = kAbsent;

  /// Every index above, in this order (kAbsent where the model has none).
  std::array<int, 15> all() const {
    return {norm1_gamma, norm1_beta, qkv_weight, qkv_bias, proj_weight, proj_bias, norm2_gamma, norm2_beta,
            fc1_weight, fc1_bias, fc2_weight, fc2_bias, router_weight, expert_fc1_weight, expert_fc2_weight};
  }
};

/// The part of the model a pipeline stage's model chunk holds
/// (sim/core/pipeline_split.h): its transformer layers, numbered from
/// `first_layer` in the tensor names so they read as the whole model's, and
/// whether it holds the embedding (wte, wpe) and the output (final norm and
/// lm_head, or with tied embeddings a copy of wte). The default is the whole model.
struct StageParts {
  int first_layer = 0;
  bool embedding = true;
  bool output = true;
};

class ParameterLayout {
 public:
  /// Offsets are multiples of kAlignElements, so every tensor starts 256-byte
  /// aligned in an fp32 buffer and 128-byte aligned in a bf16 one; where the
  /// tensors change between expert weights and the rest, and at the end, of
  /// the shape's expert_run_align_elements too (when set).
  static constexpr std::size_t kAlignElements = 64;

  /// `shape.num_layers` layers; `parts`: which of the rest (default: all).
  explicit ParameterLayout(const TransformerShape& shape, const StageParts& parts = {});

  const std::vector<ParameterTensor>& tensors() const { return tensors_; }
  const ParameterTensor& tensor(int index) const { return tensors_.at(static_cast<std::size_t>(index)); }
  /// The tensor called `name`; throws std::out_of_range naming it when absent.
  const ParameterTensor& find(const std::string& name) const;
  const LayerTensors& layer(int i) const { return layers_.at(static_cast<std::size_t>(i)); }
  int num_layers() const { return static_cast<int>(layers_.size()); }
  int wte() const { return wte_; }  // kAbsent on a chunk without the embedding or a tied output
  /// Whether this chunk holds the embedding (StageParts::embedding); wte may
  /// also be the last stage's tied copy of it.
  bool holds_embedding() const { return holds_embedding_; }
  int wpe() const { return wpe_; }  // kAbsent with rotary embeddings
  int final_norm_gamma() const { return final_norm_gamma_; }
  int final_norm_beta() const { return final_norm_beta_; }
  /// The output layer's weight: wte when the embeddings are tied; kAbsent on a
  /// chunk without the output.
  int lm_head() const { return lm_head_; }

  /// Elements of the flat buffers, padding included.
  std::size_t total_elements() const { return total_elements_; }
  /// The decayed tensors' [begin, end) element ranges, sorted and disjoint,
  /// adjacent ones merged (with the alignment padding between them).
  const std::vector<ElementRange>& decayed_ranges() const { return decayed_; }
  /// Parameters without padding (what "1.3B parameters" counts).
  std::int64_t parameter_count() const { return parameter_count_; }

 private:
  int add(std::string name, std::int64_t rows, std::int64_t cols, bool decay, ParameterInit init);
  /// Marks tensor `index` split over tp along `dim` in `blocks` (ParameterTensor::tp_blocks).
  void split(int index, int dim, std::vector<std::int64_t> blocks);

  std::vector<ParameterTensor> tensors_;
  std::vector<LayerTensors> layers_;
  int wte_ = LayerTensors::kAbsent, wpe_ = LayerTensors::kAbsent;
  int final_norm_gamma_ = LayerTensors::kAbsent, final_norm_beta_ = LayerTensors::kAbsent;
  int lm_head_ = LayerTensors::kAbsent;
  bool holds_embedding_ = true;
  std::size_t total_elements_ = 0;
  std::vector<ElementRange> decayed_;
  std::int64_t parameter_count_ = 0;
};

}  // namespace sextant::engine
