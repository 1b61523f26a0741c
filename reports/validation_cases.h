// Published training runs to check the simulator against, read from a cases
// file in the format of validation/dev_cases.yaml.
//
// A case gives the model's dimensions, the published parallel layout (null for
// what was not published), the GPU and the measured iteration time. Knobs the
// format does not carry are read from what the case does say:
//  - the overlap flags (--overlap-grad-reduce, --overlap-param-gather,
//    --tp-comm-overlap) from the Megatron arguments its notes quote;
//  - the attention kernel from the source's date: Megatron-LM gained flash
//    attention (--use-flash-attn) in 2022, so runs published before 2022 used
//    the unfused softmax path.
#pragma once

#include <string>
#include <vector>

#include "sim/core/model_config.h"
#include "sim/core/parallel_layout.h"

namespace sextant::reports {

struct ValidationCase {
  std::string id;
  std::string gpu;              // as the case names it, e.g. "H100-SXM-80GB"
  std::string cluster_preset;   // the cluster preset for that GPU, e.g. "dgx-h100"
  std::string framework;        // configs/frameworks preset that ran it; empty: the profile's own
  std::string source_group;     // the publication, e.g. "NVIDIA/NeMo docs/source/..." (validation_groups.h)
  long num_gpus = 0;
  sim::ModelConfig model;
  sim::PartialLayout layout;    // unpublished knobs left empty, for the search
  double measured_step_time_s = 0;
};

/// Throws sim::ConfigError naming file:line:col for every malformed case.
std::vector<ValidationCase> load_validation_cases(const std::string& path);

/// The DGX cluster preset of the GPU preset a case's GPU name describes
/// (sim/core/gpu_preset_name.h): "dgx-h100" for "H100-SXM-80GB"; empty when none.
std::string cluster_for_gpu(const std::string& gpu);

}  // namespace sextant::reports
