#include "sim/compute/layer_time.h"

#include "sim/compute/layer_kernels.h"
#include "sim/memory/parameter_count.h"

namespace sextant::sim {

namespace {

// A framework that sums micro-batch gradients in a pass of its own
// (GradientAccumulation::kSeparatePass) runs it over the `params` this GPU
// holds after every micro-batch's backward: memory-bound, one kernel per
// weight tensor (DeepSpeed loops over them), `tensors` of them.
void add_separate_accumulation(PassTime& t, double params, int tensors, const DeviceRates& r) {
  if (r.gradient_accumulation_bytes_per_param <= 0 || params <= 0) return;
  const double s = params * r.gradient_accumulation_bytes_per_param / r.memory_bytes_per_s +
                   tensors * r.kernel_overhead_s;
  t.backward_s += s;
  t.weight_gradient_s += s;
}

}  // namespace

PassTime layer_time(const ModelConfig& m, const ParallelLayout& l, const DeviceRates& r,
                    bool moe_layer) {
  // The engine's MoE block (engine_moe_kernels.h) runs on one tensor-parallel
  // rank (each expert whole: etp = 1), without a shared expert; other MoE
  // layouts, and multi-head latent attention, which the engine does not run,
  // keep Megatron's kernel list (its GEMMs still from the measured tables where
  // they cover the shapes).
  const bool engine_moe = l.tp == 1 && l.etp == 1 &&
                          m.moe && m.moe->shared_expert_ffn_hidden_size == 0;
  const bool engine = r.software == Software::kSextantEngine &&
                      (!(moe_layer && m.moe) || engine_moe) && !m.mla;
  PassTime t =
      engine ? engine_layer_time(m, l, r, moe_layer) : megatron_layer_time(m, l, r, moe_layer);
  if (r.gradient_accumulation_bytes_per_param > 0) {
    const LayerParams p = layer_params(m, moe_layer && m.moe);
    const double local = (p.attention + p.dense_mlp) / l.tp + p.norms + p.router +
                         p.experts / (static_cast<double>(l.ep) * l.etp);
    // QKV, projection, fc1, fc2 weights (and biases), two norms.
    add_separate_accumulation(t, local, m.add_bias_linear ? 10 : 6, r);
  }
  return t;
}

PassTime output_layer_time(const ModelConfig& m, const ParallelLayout& l, const DeviceRates& r) {
  PassTime t = r.software == Software::kSextantEngine ? engine_output_layer_time(m, l, r)
                                                      : megatron_output_layer_time(m, l, r);
  if (r.gradient_accumulation_bytes_per_param > 0) {
    // The output layer's weight (with pp > 1 the last stage's copy of a tied
    // embedding; with one stage that is the embedding's own) and the final norm.
    const double vocab_weight = static_cast<double>(m.vocab_size) * m.hidden_size;
    const double weight = !m.tie_embeddings ? vocab_weight : (l.pp > 1 ? vocab_weight : 0.0);
    add_separate_accumulation(t, weight / l.tp + 2.0 * static_cast<double>(m.hidden_size), 2, r);
  }
  return t;
}

PassTime embedding_time(const ModelConfig& m, const ParallelLayout& l, const DeviceRates& r) {
  PassTime t = r.software == Software::kSextantEngine ? engine_embedding_time(m, l, r)
                                                      : megatron_embedding_time(m, l, r);
  add_separate_accumulation(t, embedding_params(m) / l.tp, 2, r);
  t.forward_s += r.microbatch_overhead_s;
  return t;
}

double optimizer_step_time_s(double local_params, const DeviceRates& r) {
  return (r.software == Software::kSextantEngine ? engine_optimizer_step_time_s(local_params, r)
                                                 : megatron_optimizer_step_time_s(local_params, r)) +
         r.step_overhead_s;
}

}  // namespace sextant::sim
