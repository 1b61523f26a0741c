#include "sim/compute/layer_time.h"

#include "sim/compute/layer_kernels.h"

namespace sextant::sim {

PassTime layer_time(const ModelConfig& m, const ParallelLayout& l, const DeviceRates& r,
                    bool moe_layer) {
  // The engine has no MoE layers and no multi-head latent attention: those keep
  // Megatron's kernel list (its GEMMs still from the measured tables where they
  // cover the shapes).
  const bool engine = r.software == Software::kSextantEngine && !(moe_layer && m.moe) && !m.mla;
  return engine ? engine_layer_time(m, l, r, moe_layer) : megatron_layer_time(m, l, r, moe_layer);
}

PassTime output_layer_time(const ModelConfig& m, const ParallelLayout& l, const DeviceRates& r) {
  return r.software == Software::kSextantEngine ? engine_output_layer_time(m, l, r)
                                                : megatron_output_layer_time(m, l, r);
}

PassTime embedding_time(const ModelConfig& m, const ParallelLayout& l, const DeviceRates& r) {
  PassTime t = r.software == Software::kSextantEngine ? engine_embedding_time(m, l, r)
                                                      : megatron_embedding_time(m, l, r);
  t.forward_s += r.microbatch_overhead_s;
  return t;
}

double optimizer_step_time_s(double local_params, const DeviceRates& r) {
  return (r.software == Software::kSextantEngine ? engine_optimizer_step_time_s(local_params, r)
                                                 : megatron_optimizer_step_time_s(local_params, r)) +
         r.step_overhead_s;
}

}  // namespace sextant::sim
