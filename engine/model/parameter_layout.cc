#include "engine/model/parameter_layout.h"

#include <numeric>
#include <stdexcept>

namespace sextant::engine {

namespace {
std::size_t round_up(std::size_t n, std::size_t multiple) {
  return (n + multiple - 1) / multiple * multiple;
}
}  // namespace

int ParameterLayout::add(std::string name, std::int64_t rows, std::int64_t cols, bool decay,
                         ParameterInit init) {
  ParameterTensor t;
  t.name = std::move(name);
  t.rows = rows;
  t.cols = cols;
  t.weight_decay = decay;
  t.init = init;
  tensors_.push_back(std::move(t));
  return static_cast<int>(tensors_.size()) - 1;
}

void ParameterLayout::split(int index, int dim, std::vector<std::int64_t> blocks) {
  ParameterTensor& t = tensors_[static_cast<std::size_t>(index)];
  t.split_over_tp = true;
  t.tp_split_dim = dim;
  t.tp_blocks = std::move(blocks);
}

ParameterLayout::ParameterLayout(const TransformerShape& s, const StageParts& parts)
    : holds_embedding_(parts.embedding) {
  const std::int64_t h = s.hidden;
  // Offsets in the order the forward reads the tensors: the embedding, each
  // layer's tensors together, the output. A data-parallel gradient bucket of
  // the Plan (consecutive layers of a chunk; sim/plan/gradient_buckets.h) is
  // then one contiguous range (engine/model/gradient_bucket_plan.h). Within a
  // layer the vectors come first — the ones replicated over tp (norms, the
  // biases added after the row-parallel reduction) side by side, so sequence
  // parallelism sums their partial gradients in one run per layer
  // (partial_gradient_runs.h), then the split biases — and the (decayed)
  // matrices after them, so AdamW runs twice per layer.
  // The last stage of a pipeline with tied embeddings holds its own copy of
  // wte as the output layer (Megatron's shared embedding weight), declared
  // first like the embedding's.
  if (parts.embedding || (parts.output && s.tie_embeddings))
    wte_ = add("wte", s.vocab, h, true, ParameterInit::kNormal);
  // The position table covers the whole sequence: seq is the rank's S/cp
  // tokens under context parallelism, whose positions span all S.
  if (parts.embedding && s.learned_positions)
    wpe_ = add("wpe", static_cast<std::int64_t>(s.seq) * s.cp, h, true, ParameterInit::kNormal);
  layers_.resize(static_cast<std::size_t>(s.num_layers));
  const std::vector<std::int64_t> qkv_blocks = {s.q_width(), s.kv_width(), s.kv_width()};
  const std::vector<std::int64_t> fc1_blocks =
      s.gelu ? std::vector<std::int64_t>{s.ffn_hidden} : std::vector<std::int64_t>{s.ffn_hidden, s.ffn_hidden};
  for (int i = 0; i < s.num_layers; ++i) {
    const std::string p = "layers." + std::to_string(parts.first_layer + i) + ".";
    LayerTensors& l = layers_[static_cast<std::size_t>(i)];
    l.norm1_gamma = add(p + "norm1_gamma", 1, h, false, ParameterInit::kOnes);
    if (s.layernorm) l.norm1_beta = add(p + "norm1_beta", 1, h, false, ParameterInit::kZeros);
    if (s.bias) l.proj_bias = add(p + "proj_bias", 1, h, false, ParameterInit::kZeros);
    l.norm2_gamma = add(p + "norm2_gamma", 1, h, false, ParameterInit::kOnes);
    if (s.layernorm) l.norm2_beta = add(p + "norm2_beta", 1, h, false, ParameterInit::kZeros);
    if (s.bias) {  // (an MoE model has none: transformer_shape_problems)
      l.fc2_bias = add(p + "fc2_bias", 1, h, false, ParameterInit::kZeros);
      l.qkv_bias = add(p + "qkv_bias", 1, s.qkv_width(), false, ParameterInit::kZeros);
      split(l.qkv_bias, 1, qkv_blocks);
      l.fc1_bias = add(p + "fc1_bias", 1, s.fc1_width(), false, ParameterInit::kZeros);
      split(l.fc1_bias, 1, fc1_blocks);
    }
    l.qkv_weight = add(p + "qkv_weight", s.qkv_width(), h, true, ParameterInit::kNormal);
    split(l.qkv_weight, 0, qkv_blocks);  // column-parallel: output rows
    l.proj_weight = add(p + "proj_weight", h, s.q_width(), true, ParameterInit::kScaledNormal);
    split(l.proj_weight, 1, {s.q_width()});  // row-parallel: input columns
    if (s.moe_layer(parts.first_layer + i)) {
      // Megatron-Core initialises the router and the experts' first linear
      // layers with init_method, their second with output_layer_init_method,
      // as the dense MLP's (moe/router.py, moe/experts.py).
      l.router_weight = add(p + "router_weight", s.experts, h, true, ParameterInit::kNormal);
      const std::int64_t experts = s.local_experts;
      l.expert_fc1_weight =
          add(p + "expert_fc1_weight", experts * s.expert_fc1_width(), h, true, ParameterInit::kNormal);
      l.expert_fc2_weight = add(p + "expert_fc2_weight", experts * h, s.expert_ffn_hidden, true,
                                ParameterInit::kScaledNormal);
      for (const int t : {l.expert_fc1_weight, l.expert_fc2_weight}) tensors_[static_cast<std::size_t>(t)].expert = true;
      continue;
    }
    l.fc1_weight = add(p + "fc1_weight", s.fc1_width(), h, true, ParameterInit::kNormal);
    split(l.fc1_weight, 0, fc1_blocks);
    l.fc2_weight = add(p + "fc2_weight", h, s.ffn_hidden, true, ParameterInit::kScaledNormal);
    split(l.fc2_weight, 1, {s.ffn_hidden});
  }
  if (parts.output) {
    final_norm_gamma_ = add("final_norm_gamma", 1, h, false, ParameterInit::kOnes);
    if (s.layernorm) final_norm_beta_ = add("final_norm_beta", 1, h, false, ParameterInit::kZeros);
    lm_head_ = s.tie_embeddings ? wte_ : add("lm_head", s.vocab, h, true, ParameterInit::kNormal);
  }
  if (s.tp > 1) {  // vocabulary-parallel embedding and output layer (Shoeybi et al. 2019, Sec. 3)
    // Rank r holds vocabulary rows [r·vocab, (r+1)·vocab) of the padded table (s.vocab: this rank's rows).
    if (wte_ != LayerTensors::kAbsent) split(wte_, 0, {s.vocab});
    if (lm_head_ != LayerTensors::kAbsent && lm_head_ != wte_) split(lm_head_, 0, {s.vocab});
  }
  if (s.sequence_parallel) {
    std::vector<int> partial = {final_norm_gamma_, final_norm_beta_};
    for (const LayerTensors& l : layers_)
      partial.insert(partial.end(), {l.norm1_gamma, l.norm1_beta, l.norm2_gamma, l.norm2_beta, l.proj_bias,
                                     l.fc2_bias});
    for (const int t : partial)
      if (t != LayerTensors::kAbsent) tensors_[static_cast<std::size_t>(t)].partial_gradient_over_tp = true;
  }

  // Decayed ranges include the alignment padding after a decayed tensor
  // (zeros that stay zero), so adjacent decayed tensors make one range.
  // Where the tensors change between expert weights and the rest (and at the
  // end) the next starts at the shape's expert_run_align_elements too, so
  // both kinds' runs can be sharded over their own groups.
  const std::size_t run_align =
      s.expert_run_align_elements == 0 ? kAlignElements : std::lcm(kAlignElements, s.expert_run_align_elements);
  std::size_t offset = 0;
  for (std::size_t i = 0; i < tensors_.size(); ++i) {
    ParameterTensor& t = tensors_[i];
    if (i > 0 && t.expert != tensors_[i - 1].expert) offset = round_up(offset, run_align);
    t.offset = offset;
    offset = round_up(t.offset + t.elements(), kAlignElements);
    if (t.weight_decay) {
      if (!decayed_.empty() && decayed_.back().second == t.offset)
        decayed_.back().second = offset;
      else
        decayed_.emplace_back(t.offset, offset);
    }
    parameter_count_ += static_cast<std::int64_t>(t.elements());
  }
  total_elements_ = round_up(offset, run_align);
}

const ParameterTensor& ParameterLayout::find(const std::string& name) const {
  for (const ParameterTensor& t : tensors_)
    if (t.name == name) return t;
  throw std::out_of_range("no parameter tensor called '" + name + "'");
}

}  // namespace sextant::engine
