#include "sim/analytic/fsdp_exposure.h"

#include <algorithm>

#include "sim/comm/fsdp_comm.h"
#include "sim/memory/parameter_count.h"
#include "sim/core/layer_shape.h"

namespace sextant::sim {

double fsdp_exposed_s(const ModelConfig& m, const ParallelLayout& l, const ClusterConfig& cluster,
                      const LinkRates& rates, const FsdpStepCompute& compute) {
  const FsdpBehaviour behaviour = fsdp_behaviour_of(m, l);
  auto comm = [&](const UnitParams& unit) {
    return fsdp_unit_comm(unit, behaviour, l, cluster, rates);
  };
  const FsdpUnitComm dense = comm(layer_params_per_gpu(m, l, false));
  const FsdpUnitComm moe = m.moe ? comm(layer_params_per_gpu(m, l, true)) : dense;

  // The first stage's parameters beyond its layers: the output layer's
  // vocabulary shard (untied, single stage) and the embedding (the rest), as
  // gradient_buckets.cc splits them.
  const int per_stage = m.num_layers / l.pp;
  const int dense_layers = std::clamp(m.dense_layers(), 0, per_stage);
  const int moe_layers = per_stage - dense_layers;
  const UnitParams dense_params = layer_params_per_gpu(m, l, false);
  const UnitParams moe_params = layer_params_per_gpu(m, l, true);
  const StageParams stage = stage_params_per_gpu(m, l, 0);
  const double extra =
      stage.dense - dense_layers * dense_params.dense - moe_layers * moe_params.dense;
  const double output_params =
      l.pp == 1 && !m.tie_embeddings
          ? vocab_rows_per_rank(m, l.tp) * static_cast<double>(m.hidden_size)
          : 0.0;
  const FsdpUnitComm embedding = comm({std::max(0.0, extra - output_params), 0.0});
  const FsdpUnitComm output = comm({output_params, 0.0});

  const double microbatches = static_cast<double>(l.num_microbatches());
  const FsdpUnitComm& first_layer = dense_layers > 0 ? dense : moe;
  if (behaviour.prefetch_units < 1) {
    // Every gather on the critical path (forward and backward, the embedding's
    // forward only). A unit's reduce-scatter starts with the next unit's
    // backward gather and shares the link with it: the gather takes g + min(g, r)
    // (both at half rate while both run), and what is left of the reduction
    // overlaps that unit's backward.
    auto unit = [&](const FsdpUnitComm& c, const UnitCompute& t) {
      const double g = c.gather_s, r = c.reduce_s;
      return g + g + std::min(g, r) + std::max(0.0, r - g - t.backward_s);
    };
    const double per_microbatch =
        dense_layers * unit(dense, compute.dense_layer) + moe_layers * unit(moe, compute.moe_layer) +
        unit(output, compute.output) + embedding.gather_s +
        std::max(0.0, embedding.reduce_s - compute.embedding.backward_s);
    return microbatches * per_microbatch + first_layer.reduce_s;
  }

  // Layers: the two-stage pipeline's excess, forward and backward.
  const double layers = per_stage;
  auto excess_f = [](const FsdpUnitComm& c, const UnitCompute& t) { return c.gather_s - t.forward_s; };
  auto excess_b = [](const FsdpUnitComm& c, const UnitCompute& t) {
    return c.gather_s + c.reduce_s - t.backward_s;
  };
  double per_microbatch =
      dense_layers * (std::max(0.0, excess_f(dense, compute.dense_layer)) +
                      std::max(0.0, excess_b(dense, compute.dense_layer))) +
      moe_layers * (std::max(0.0, excess_f(moe, compute.moe_layer)) +
                    std::max(0.0, excess_b(moe, compute.moe_layer)));
  // The link time a layer leaves free, forward and backward (layer average).
  auto free_s = [&](double dense_excess, double moe_excess) {
    return layers > 0 ? (dense_layers * std::max(0.0, -dense_excess) +
                         moe_layers * std::max(0.0, -moe_excess)) / layers
                      : 0.0;
  };
  const double free_f = free_s(excess_f(dense, compute.dense_layer), excess_f(moe, compute.moe_layer));
  const double free_b = free_s(excess_b(dense, compute.dense_layer), excess_b(moe, compute.moe_layer));
  // The output layer's gathers run ahead behind the last `prefetch` layers' forward;
  // its reduce-scatter queues behind the next `queue` layers' backward.
  const double ahead = std::min<double>(behaviour.prefetch_units, layers);
  const double queued = std::min<double>(behaviour.reduce_queue_units, layers);
  per_microbatch += std::max(0.0, excess_f(output, compute.output) - ahead * free_f) +
                    std::max(0.0, excess_b(output, compute.output) - queued * free_b);
  // The embedding's reduce-scatter queues behind the next micro-batch's forward
  // (the last micro-batch's is in `once`); its forward gather was prefetched
  // behind the previous backward, except in the first micro-batch.
  const double embedding_excess = embedding.reduce_s - compute.embedding.backward_s;
  per_microbatch += std::max(0.0, embedding_excess - queued * free_f);
  const double once = embedding.gather_s + first_layer.reduce_s +
                      std::max(0.0, embedding_excess) -
                      std::max(0.0, embedding_excess - queued * free_f);
  return microbatches * per_microbatch + once;
}

}  // namespace sextant::sim
