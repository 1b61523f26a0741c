#include "sim/comm/fsdp_comm.h"

#include <algorithm>

#include "sim/memory/parameter_count.h"

namespace sextant::sim {

namespace {
constexpr double kBf16Bytes = 2.0;
}  // namespace

UnitParams layer_params_per_gpu(const ModelConfig& m, const ParallelLayout& l, bool moe_layer) {
  const LayerParams p = layer_params(m, moe_layer);
  return {(p.attention + p.dense_mlp) / l.tp + p.attention_replicated + p.norms + p.router,
          p.experts / (static_cast<double>(l.ep) * l.etp)};
}

FsdpBehaviour fsdp_behaviour_of(const ModelConfig& m, const ParallelLayout& l) {
  const double dense = layer_params_per_gpu(m, l, false).total();
  const double moe = m.moe ? layer_params_per_gpu(m, l, true).total() : 0.0;
  return fsdp_behaviour(l.fsdp, std::max(dense, moe), l.precision);
}

FsdpUnitComm fsdp_unit_comm(const UnitParams& unit, const FsdpBehaviour& b,
                            const ParallelLayout& l, const ClusterConfig& c,
                            const LinkRates& r) {
  FsdpUnitComm out;
  const int n = c.gpus_per_node;
  auto sync = [&](double params, const GroupPlacement& group) {
    if (group.size <= 1 || params <= 0) return;
    const double k = b.gathers_per_unit;
    out.gather_s += k * all_gather_time_s(kBf16Bytes * params / k, group, r);
    out.reduce_s += reduce_scatter_time_s(b.gradient_bytes_per_param * params, group, r);
  };
  sync(unit.dense, place_group(l.dp * l.cp, l.tp, n));
  sync(unit.expert, place_group(l.expert_dp(), l.etp * l.ep, n));
  return out;
}

}  // namespace sextant::sim
