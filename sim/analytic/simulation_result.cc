#include "sim/analytic/simulation_result.h"

#include <algorithm>
#include <array>
#include <utility>

#include "sim/flops/model_flops.h"

namespace sextant::sim {

std::string_view to_string(Limiter value) {
  switch (value) {
    case Limiter::kCompute: return "compute";
    case Limiter::kTensorParallelComm: return "tensor-parallel communication";
    case Limiter::kContextParallelComm: return "context-parallel communication";
    case Limiter::kExpertParallelComm: return "expert-parallel all-to-all";
    case Limiter::kPipelineComm: return "pipeline send/recv";
    case Limiter::kDataParallelComm: return "data-parallel gradient/parameter sync";
    case Limiter::kPipelineBubble: return "pipeline bubble";
    case Limiter::kOptimizer: return "optimizer step";
  }
  return "?";
}

Limiter limiter_of(const SimulationResult& r) {
  const std::array<std::pair<double, Limiter>, 7> costs{{
      {r.exposed_tp_s, Limiter::kTensorParallelComm},
      {r.exposed_cp_s, Limiter::kContextParallelComm},
      {r.exposed_ep_s, Limiter::kExpertParallelComm},
      {r.exposed_pp_s, Limiter::kPipelineComm},
      {r.exposed_dp_s, Limiter::kDataParallelComm},
      {r.time.pipeline_bubble_s, Limiter::kPipelineBubble},
      {r.time.optimizer_s, Limiter::kOptimizer},
  }};
  const auto worst = std::max_element(costs.begin(), costs.end());
  return worst->first > 0.05 * r.step_time_s ? worst->second : Limiter::kCompute;
}

void complete_from_step_time(SimulationResult& r, const ModelConfig& m, const ClusterConfig& cluster) {
  const ParallelLayout& l = r.layout;
  const double gpus = l.total_gpus();
  const double tokens = static_cast<double>(l.gbs) * static_cast<double>(m.seq_length);
  r.tokens_per_s = tokens / r.step_time_s;
  r.tokens_per_s_per_gpu = r.tokens_per_s / gpus;
  const StepFlops flops = step_flops(m, l);
  r.model_flops_per_step = flops.model_flops;
  r.hardware_flops_per_step = flops.hardware_flops;
  const double peak = gpus * cluster.gpu.peak_bf16_flops_per_s * r.step_time_s;
  r.mfu = flops.model_flops / peak;
  r.hfu = flops.hardware_flops / peak;
  r.fits_memory = r.memory.total() <= static_cast<double>(cluster.gpu.memory_bytes);
  r.limiter = limiter_of(r);
}

}  // namespace sextant::sim
