#include "tools/planning_inputs.h"

#include "sim/core/config_error.h"
#include "sim/core/preset_catalog.h"

namespace sextant::tools {

PlanningInputs load_planning_inputs(const PlanningArguments& a) {
  const sim::PresetCatalog catalog(a.configs_dir);
  PlanningInputs in;
  in.model = catalog.model(a.model);
  if (a.seq_length > 0) in.model.seq_length = a.seq_length;
  in.cluster = catalog.cluster(a.cluster);
  in.profile = catalog.profile(a.profile, in.cluster.gpu.name);
  in.layout = sim::parse_layout(a.layout);
  if (a.global_batch > 0) {
    if (in.layout.gbs && *in.layout.gbs != a.global_batch) {
      throw sim::ConfigError({{"--global-batch", 0, 0, "",
                               "is " + std::to_string(a.global_batch) + " but --layout says gbs=" +
                                   std::to_string(*in.layout.gbs)}});
    }
    in.layout.gbs = a.global_batch;
  }
  if (!in.layout.gbs) {
    throw sim::ConfigError(
        {{"--global-batch", 0, 0, "",
          "the global batch is needed: give --global-batch N or gbs=N in --layout"}});
  }
  return in;
}

void check_gpu_count(long gpus, const sim::ClusterConfig& cluster) {
  if (gpus > cluster.total_gpus()) {
    throw sim::ConfigError({{"--gpus", 0, 0, "",
                             std::to_string(gpus) + " GPUs asked for; cluster '" + cluster.name +
                                 "' has " + std::to_string(cluster.total_gpus())}});
  }
}

}  // namespace sextant::tools
