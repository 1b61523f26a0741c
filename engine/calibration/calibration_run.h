// `sextant calibrate` without its command line: plan the points, allocate one
// scratch buffer for the largest, measure every kind in turn with a progress
// bar, and return the tables with their provenance. The scalar fields and the
// name are filled by the caller (it knows the presets: derived_scalars.h).
#pragma once

#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "engine/calibration/calibration_shapes.h"
#include "engine/calibration/measured_profile.h"
#include "engine/calibration/timing.h"

namespace sextant::engine::calibration {

struct CalibrationPlan {
  std::vector<LinearShape> linear;
  std::vector<AttentionShape> attention;
  std::vector<std::pair<std::string, std::vector<ElementwiseShape>>> elementwise;  // by kernel
  bool overheads = true;
  bool nccl = true;  // when more than one GPU is present
};

/// Every point for `models` (linear_shapes, attention_shapes, elementwise_shapes).
CalibrationPlan plan_calibration(const std::vector<sim::ModelConfig>& models, const ShapeOptions& options);

struct CalibrationSettings {
  int device = 0;
  bool quick = false;            // passed to the NCCL sizes
  TimingSettings timing;
  std::string command_line;      // recorded in the provenance
  bool progress = true;          // draw the bar on `progress_out`
};

/// Measures `plan` on `settings.device` (and, for NCCL, on every GPU present).
/// Fills the tables and `measurement:`; leaves name, gpu, source and scalars empty.
/// Throws CudaError / KernelArgumentError from the kernels, std::runtime_error
/// from NCCL.
MeasuredProfile run_calibration(const CalibrationPlan& plan, const CalibrationSettings& settings,
                                std::ostream& progress_out);

}  // namespace sextant::engine::calibration
