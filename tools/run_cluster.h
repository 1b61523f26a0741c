// Which cluster preset `sextant run --compare` and `--layout best` predict for
// when --cluster is not given: the one whose GPU this machine has.
#pragma once

#include <string>

#include "sim/core/preset_catalog.h"

namespace sextant::tools {

/// The first cluster preset, by name, whose GPU preset is `gpu_preset`
/// ("dgx-h200" for "h200-sxm-141gb"); "" when `gpu_preset` is empty or no
/// cluster has that GPU.
std::string cluster_of_gpu(const sim::PresetCatalog& catalog, const std::string& gpu_preset);

/// The cluster run predicts for, and a note for the user when it is worth one.
struct RunCluster {
  std::string name;
  std::string note;  // "" when the choice needs no comment
};

/// `given`: --cluster ("" when left out). `device_name`, `gpu_preset`: the GPU
/// this run trains on, as the CUDA runtime names it and as
/// sim/core/gpu_preset_name.h maps it ("" and "" without a GPU).
/// Left out, the cluster follows the GPU, else dgx-h100 with a note saying so;
/// given, it is kept, with a note when its GPU is not this one.
RunCluster run_cluster(const sim::PresetCatalog& catalog, const std::string& given,
                       const std::string& device_name, const std::string& gpu_preset);

}  // namespace sextant::tools
