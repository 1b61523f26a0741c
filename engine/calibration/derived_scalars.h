// The scalar fields of sim::CostProfile from a profile's measured tables, so a
// simulator that reads only the scalars still describes the engine as measured.
//
// Each field is fitted to the simulator's own formulas (sim/compute/gemm_time.h
// for GEMMs, the flash-attention term of sim/compute/layer_time.cc), so the
// scalar model reproduces the tables as closely as its form allows; the
// comment beside each value says what it was fitted on and how well.
#pragma once

#include "engine/calibration/measured_profile.h"
#include "sim/core/cost_profile.h"
#include "sim/core/hardware_config.h"

namespace sextant::engine::calibration {

struct DerivationInputs {
  sim::GpuConfig gpu;                   // datasheet peaks (configs/gpus)
  sim::CostProfile datasheet_profile;   // configs/profiles/<gpu>.yaml: what cannot be measured here
  std::string datasheet_profile_path;   // named in "copied" comments
  double link_bandwidth_bytes_per_s = 0;  // NVLink per GPU per direction (cluster preset); 0: unknown
};

/// Fits and copies every field of ProfileScalars from `profile`'s tables.
/// Fields whose tables are empty (FP8, NCCL with one GPU, the network) are
/// copied from the datasheet profile and say so ("not measured: copied from ...").
ProfileScalars derive_scalars(const MeasuredProfile& profile, const DerivationInputs& inputs);

}  // namespace sextant::engine::calibration
