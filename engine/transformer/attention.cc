#include "engine/transformer/attention.h"

#include "engine/transformer/context_parallel_attention_core.h"
#include "engine/transformer/context_parallel_ring_attention_core.h"
#include "engine/transformer/flash_attention_core.h"
#include "engine/transformer/local_positions.h"
#include "engine/transformer/padded_heads.h"
#include "kernels/rope.h"

namespace sextant::engine::transformer {
namespace {

constexpr auto kAct = MemoryCategory::kActivations;

// Each local token rotated by its position in the whole sequence (under
// context parallelism, its chunk's place: local_positions.h).
kernels::RopeShape rope_shape(const ModelContext& context) {
  const TransformerShape& s = context.shape();
  kernels::RopeShape r{};
  r.batch = s.micro_batch;
  r.seq = s.seq;
  r.heads = s.heads;
  r.kv_heads = s.kv_heads;
  r.head_dim = s.head_dim;
  r.row_stride = s.qkv_width();
  r.theta = s.rope_theta;
  r.positions = local_positions(context);
  return r;
}

}  // namespace

std::unique_ptr<AttentionCore> make_attention_core(ModelContext& context) {
  const TransformerShape& s = context.shape();
  if (s.cp > 1 && s.cp_comm_type == sim::CpCommType::kP2p)
    return std::make_unique<ContextParallelRingAttentionCore>(context);
  if (s.cp > 1) return std::make_unique<ContextParallelAttentionCore>(context);
  return std::make_unique<FlashAttentionCore>(context);
}

SelfAttention::SelfAttention(ModelContext& context, ResidualStream& stream, Norm& norm)
    : ResidualBlock(context, stream, norm, "norm1"),
      stored_(to_size(context.shape().num_layers)),
      qkv_linear_(context.runtime(), static_cast<int>(context.shape().tokens())),
      proj_linear_(context.runtime(), static_cast<int>(context.shape().tokens())),
      core_(make_attention_core(context)) {}

ResidualBlock::Ends SelfAttention::ends(int layer) const {
  const LayerTensors& w = context_.layout().layer(layer);
  Ends e;
  e.input = stream_.input[to_size(layer)];
  e.output = stream_.mid[to_size(layer)];
  e.norm_gamma = w.norm1_gamma;
  e.norm_beta = w.norm1_beta;
  e.output_bias = w.proj_bias;
  e.input_bias = layer > 0 ? context_.layout().layer(layer - 1).fc2_bias : LayerTensors::kAbsent;
  return e;
}

void SelfAttention::reserve_stored(int layer, BufferReserver& r) {
  const TransformerShape& s = context_.shape();
  const std::size_t T = to_size(s.tokens());
  // Widths in the attention kernels' layout (padded heads: padded_heads.h).
  const std::size_t q_heads_width = to_size(s.heads) * to_size(s.attention_head_dim());
  const std::size_t kv_heads_width = to_size(s.kv_heads) * to_size(s.attention_head_dim());
  Stored& a = stored_[to_size(layer)];
  const std::string p = layer_prefix(layer);
  if (s.attention_padded()) {
    r.own(a.q, p + "q", kAct, T * q_heads_width);
    r.own(a.k, p + "k", kAct, T * kv_heads_width);
    r.own(a.v, p + "v", kAct, T * kv_heads_width);
  } else {
    r.own(a.qkv, p + "qkv", kAct, T * to_size(s.qkv_width()));  // q, k, v: bind()
  }
  r.own(a.attn, p + "attn", kAct, T * q_heads_width);
  r.own(a.lse, p + "lse", kAct, T * to_size(s.heads));
}

void SelfAttention::reserve_pass(BufferReserver& r) {
  const TransformerShape& s = context_.shape();
  const std::size_t T = to_size(s.tokens());
  const std::size_t q_heads_width = to_size(s.heads) * to_size(s.attention_head_dim());
  const std::size_t kv_heads_width = to_size(s.kv_heads) * to_size(s.attention_head_dim());
  r.shared(dattn_, "grad.attn", kAct, T * to_size(s.q_width()));
  r.shared(qkv_, "qkv (fused, and its gradient)", kAct, T * to_size(s.qkv_width()));
  if (s.attention_padded()) {
    r.shared(dq_, "grad.q", kAct, T * q_heads_width);
    r.shared(dk_, "grad.k", kAct, T * kv_heads_width);
    r.shared(dv_, "grad.v", kAct, T * kv_heads_width);
    r.shared(attn_flat_, "attn (unpadded)", kAct, T * to_size(s.q_width()));
    r.shared(dattn_padded_, "grad.attn (padded)", kAct, T * q_heads_width);
  }
}

void SelfAttention::bind(bool full_recompute) {
  ResidualBlock::bind(full_recompute);
  const TransformerShape& s = context_.shape();
  if (!s.attention_padded()) {
    for (Stored& a : stored_) {
      if (a.qkv == nullptr) continue;  // full recomputation: set from layer 0 below
      a.q = a.qkv;
      a.k = a.qkv + s.q_width();
      a.v = a.k + s.kv_width();
    }
  }
  if (full_recompute)
    for (std::size_t i = 1; i < stored_.size(); ++i) stored_[i] = stored_[0];
}

const Bf16* SelfAttention::projection_input(const Stored& a) {
  if (!context_.shape().attention_padded()) return a.attn;
  unpad_heads(attn_flat_, a.attn, context_.shape(), context_.stream());
  return attn_flat_;
}

void SelfAttention::forward(int layer, bool /*recompute*/) {
  const TransformerShape& s = context_.shape();
  const LayerTensors& w = context_.layout().layer(layer);
  Stored& a = stored_[to_size(layer)];
  const Bf16* x = normed_input(layer);
  Bf16* qkv = s.attention_padded() ? qkv_ : a.qkv;
  qkv_linear_.forward(
      qkv_linear_.forward_args(qkv, x, context_.linear(w.qkv_weight, w.qkv_bias, s.hidden, s.qkv_width())));
  if (!s.learned_positions) kernels::rope_forward(qkv, rope_shape(context_), context_.stream());
  if (s.attention_padded()) split_padded_heads(a.q, a.k, a.v, qkv_, s, context_.stream());
  core_->forward(a.attn, a.lse, a.q, a.k, a.v);
  const Bf16* proj_in = projection_input(a);
  project_to_output(proj_linear_, layer, proj_in, context_.linear(w.proj_weight, w.proj_bias, s.q_width(), s.hidden));
}

void SelfAttention::backward(int layer) {
  const TransformerShape& s = context_.shape();
  const LayerTensors& w = context_.layout().layer(layer);
  const Stored& a = stored_[to_size(layer)];
  const Bf16* dy = output_gradient();
  const Bf16* proj_in = projection_input(a);
  proj_linear_.backward(dattn_, dy, proj_in,
                        context_.linear(w.proj_weight, output_bias_in_backward(layer), s.q_width(), s.hidden));
  // Padded heads: the output's gradient padded, the core's gradients into the
  // padded arrays, then merged into the fused row; otherwise straight into
  // their columns of the fused gradient.
  const bool padded = s.attention_padded();
  const Bf16* dout = dattn_;
  if (padded) {
    pad_heads(dattn_padded_, dattn_, s, context_.stream());
    dout = dattn_padded_;
  }
  Bf16* dq = padded ? dq_ : qkv_;
  Bf16* dk = padded ? dk_ : qkv_ + s.q_width();
  Bf16* dv = padded ? dv_ : qkv_ + s.q_width() + s.kv_width();
  core_->backward(dq, dk, dv, dout, a.q, a.k, a.v, a.attn, a.lse);
  if (padded) merge_padded_gradients(qkv_, dq_, dk_, dv_, s, context_.stream());
  if (!s.learned_positions) kernels::rope_backward(qkv_, rope_shape(context_), context_.stream());
  qkv_linear_.backward(stream_.scratch, qkv_, stored_normed_input(layer),
                       context_.linear(w.qkv_weight, w.qkv_bias, s.hidden, s.qkv_width()));
  // Column-parallel QKV under tp: the collective task after this one sums the
  // input gradient and runs the norm's backward.
  finish_backward(layer);
}

}  // namespace sextant::engine::transformer
