// The buffers the trainer's optimizer reads and writes (engine/trainer.h;
// the distributed optimizer's queue_step).
#pragma once

#include <cstddef>

#include "kernels/bf16.h"

namespace sextant::engine::data_parallel {

/// What a trainer's optimizer reads and writes, all on the device: the flat
/// per-parameter arrays (parameter_layout.h) and the gradient norm's scratch.
/// Every trainer holds one (engine/trainer_arrays.h plans and binds it).
struct OptimizerBuffers {
  kernels::Bf16* weights = nullptr;  // full length
  float* gradients = nullptr;        // full length; with ZeRO-1 this rank's blocks hold the group's sum
  float* master = nullptr;           // full length, or with ZeRO-1 shard_elements()
  float* adam_m = nullptr;
  float* adam_v = nullptr;
  float* norm_scalars = nullptr;     // 3 floats: sum of squares, norm, clip scale
  char* norm_workspace = nullptr;
  std::size_t norm_workspace_bytes = 0;
  std::size_t elements = 0;         // of weights and gradients
  std::size_t master_elements = 0;  // of master, adam_m and adam_v
};

}  // namespace sextant::engine::data_parallel
