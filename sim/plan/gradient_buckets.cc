#include "sim/plan/gradient_buckets.h"

#include <algorithm>

#include "sim/comm/fsdp_comm.h"
#include "sim/memory/parameter_count.h"
#include "sim/core/layer_shape.h"

namespace sextant::sim {

namespace {

bool is_moe_layer(const ModelConfig& m, int layer) { return layer >= m.dense_layers(); }

}  // namespace

double default_bucket_params(const ParallelLayout& l) {
  return std::max(40e6, 1e6 * l.dp * l.cp);
}

std::vector<GradientBucket> stage_gradient_buckets(const ModelConfig& m, const ParallelLayout& l,
                                                   const PlanShape& shape, int stage,
                                                   double bucket_params) {
  const UnitParams dense_layer = layer_params_per_gpu(m, l, false);
  const UnitParams moe_layer = layer_params_per_gpu(m, l, true);
  auto share_of = [&](int layer) { return is_moe_layer(m, layer) ? moe_layer : dense_layer; };

  // What the stage holds beyond its layers (embedding on the first stage,
  // final norm and output layer on the last) is stage_params_per_gpu's total
  // less the layers. On a single stage the output layer's share is its
  // vocabulary shard (the final norm's 2h parameters go with the embedding).
  const StageParams stage_total = stage_params_per_gpu(m, l, shape.split.stage(stage));
  double layers_dense = 0;
  for (int c = 0; c < shape.vpp; ++c) {
    for (int j = 0; j < layers_in_chunk(shape, stage, c); ++j) {
      layers_dense += share_of(global_layer(shape, stage, c, j)).dense;
    }
  }
  const double extra = stage_total.dense - layers_dense;
  const bool first = stage == 0, last = stage == shape.pp - 1;
  double output_params = 0, embedding_params = 0;
  if (first && last) {
    output_params = m.tie_embeddings ? 0.0 : vocab_rows_per_rank(m, l.tp) * static_cast<double>(m.hidden_size);
    embedding_params = extra - output_params;
  } else if (last) {
    output_params = extra;
  } else if (first) {
    embedding_params = extra;
  }

  std::vector<GradientBucket> out;
  for (int c = shape.vpp - 1; c >= 0; --c) {
    // ZeRO-3 / FSDP: every layer is its own unit (bucket_params is ignored).
    const bool fsdp = l.zero >= 3;
    const bool bucketed = fsdp || (c == 0 && stage == 0 && l.overlap_grad_reduce);
    GradientBucket open;
    bool has_open = false;
    auto start = [&] {
      open = GradientBucket{};
      open.stage = stage;
      open.chunk = c;
      open.first_layer = 0;
      open.last_layer = -1;
      has_open = true;
    };
    auto close = [&] {
      open.index_in_stage = static_cast<int>(out.size());
      out.push_back(open);
      has_open = false;
    };
    auto full = [&] {
      return bucketed && (fsdp || open.dense_params + open.expert_params >= bucket_params);
    };
    start();
    if (last && c == shape.vpp - 1 && output_params > 0) {
      open.output_layer = true;
      open.dense_params += output_params;
      if (full()) close();
    }
    for (int j = layers_in_chunk(shape, stage, c) - 1; j >= 0; --j) {
      if (!has_open) start();
      const int layer = global_layer(shape, stage, c, j);
      const UnitParams share = share_of(layer);
      if (open.last_layer < open.first_layer) open.last_layer = layer;
      open.first_layer = layer;
      open.dense_params += share.dense;
      open.expert_params += share.expert;
      if (full()) close();
    }
    if (first && c == 0 && embedding_params > 0) {
      if (!has_open) start();
      open.embedding = true;
      open.dense_params += embedding_params;
    }
    if (has_open && (open.dense_params + open.expert_params) > 0) close();
  }
  return out;
}

}  // namespace sextant::sim
