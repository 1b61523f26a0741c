#include "sim/comm/data_parallel_volume.h"

#include <algorithm>

#include "sim/comm/fsdp_comm.h"
#include "sim/comm/parallel_comm.h"
#include "sim/memory/parameter_count.h"
#include "sim/core/layer_shape.h"

namespace sextant::sim {

namespace {
constexpr double kBf16Bytes = 2.0;
}  // namespace

double data_parallel_bytes_per_step(const ModelConfig& m, const ParallelLayout& l) {
  StageParams params = stage_params_per_gpu(m, l, 0);
  for (int s = 1; s < l.pp; ++s) {
    const StageParams p = stage_params_per_gpu(m, l, s);
    if (p.total() > params.total()) params = p;
  }
  const double microbatches = static_cast<double>(l.num_microbatches());
  const FsdpBehaviour fsdp = fsdp_behaviour_of(m, l);
  const double gradient_bytes =
      l.zero >= 3 ? fsdp.gradient_bytes_per_param : l.gradient_bytes_per_param();
  // The embedding's weights (first stage, vocab-parallel) are gathered for its
  // forward only under ZeRO-3.
  const double embedding_dense = vocab_rows_per_rank(m, l.tp) * static_cast<double>(m.hidden_size);

  auto group_bytes = [&](double p, int ranks, double gather_once_params) {
    if (ranks <= 1 || p <= 0) return 0.0;
    const double share = (ranks - 1.0) / ranks;
    const double gradients = gradient_bytes * p;
    const double weights = kBf16Bytes * p;
    switch (l.zero) {
      case 0: return share * 2.0 * gradients;
      case 1: return share * (gradients + weights);
      case 2: return share * (microbatches * gradients + weights);
      default:
        return share * microbatches *
               (gradients + 2.0 * weights - kBf16Bytes * gather_once_params);
    }
  };
  const double embedding_here = std::min(embedding_dense, params.dense);
  return group_bytes(params.dense, l.dp * l.cp, embedding_here) +
         group_bytes(params.expert, l.expert_dp(), 0.0);
}

}  // namespace sextant::sim
