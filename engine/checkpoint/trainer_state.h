// What a checkpoint holds of one rank's trainer: everything the next step
// reads, so that a trainer restored from it continues as the saved one would
// have, bit for bit. The gradients are not kept: every step overwrites them
// (the first micro-batch's backward writes, the rest add; trainer.h).
#pragma once

#include <cstdint>
#include <vector>

namespace sextant::engine::checkpoint {

struct TrainerState {
  /// Updates applied so far: the next step is steps_done + 1, which picks its
  /// learning rate (LrSchedule::at) and AdamW's bias corrections.
  std::int64_t steps_done = 0;
  std::vector<std::uint16_t> weights_bf16;  // the rank's flat bf16 weights, bits as stored (padding included)
  std::vector<float> master;  // fp32 master weights: all of them, or the rank's ZeRO-1 shard
  std::vector<float> adam_m;  // same length as master
  std::vector<float> adam_v;
  /// DeepSeek-V3's expert selection biases (engine/trainer.h), the same on every
  /// rank of a pipeline stage: (the stage's MoE layers, in chunk then layer
  /// order) x experts; empty when the run keeps none.
  std::vector<float> expert_biases;

  bool operator==(const TrainerState&) const = default;
};

}  // namespace sextant::engine::checkpoint
