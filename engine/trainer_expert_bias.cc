// DeepSeek-V3's auxiliary-loss-free balancing in the trainer (trainer.h):
// the stage's MoE layers' selection biases and the step's loads they are
// updated from — where they live, when the loads start from zero, the update
// after the optimizer, and the biases in and out of a checkpoint's state.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/comm/communicator.h"
#include "engine/trainer.h"
#include "engine/trainer_arrays.h"
#include "kernels/cuda_check.h"
#include "kernels/moe_load_balancing.h"

namespace sextant::engine {

namespace {

// Each chunk's MoE layers, in its layer order.
int moe_layers_of(const TransformerShape& shape, const StageParts& parts) {
  int count = 0;
  for (int layer = 0; layer < shape.num_layers; ++layer) count += shape.moe_layer(parts.first_layer + layer) ? 1 : 0;
  return count;
}

// A (layers x experts) array as one vector per layer.
template <typename T>
std::vector<std::vector<T>> rows_of(const std::vector<T>& all, std::size_t experts) {
  std::vector<std::vector<T>> rows;
  for (std::size_t row = 0; row < all.size(); row += experts)
    rows.emplace_back(all.begin() + static_cast<std::ptrdiff_t>(row),
                      all.begin() + static_cast<std::ptrdiff_t>(row + experts));
  return rows;
}

}  // namespace

int Trainer::stage_moe_layers() const {
  int count = 0;
  for (const Chunk& chunk : chunks_) count += moe_layers_of(chunk.shape, chunk.parts);
  return count;
}

std::size_t Trainer::expert_bias_values() const {
  if (!balances_experts()) return 0;
  return static_cast<std::size_t>(stage_moe_layers()) * static_cast<std::size_t>(shape_.experts);
}

void Trainer::plan_expert_balancing(ArenaPlan& memory) {
  const std::size_t values = expert_bias_values();
  if (values == 0) return;  // off, or a pipeline stage of dense layers only
  // Tiny (layers x experts 4-byte values) and kept across steps, as the
  // optimizer's state is, but no parameter's: the memory plan lists them by name.
  expert_biases_slot_ = memory.add("MoE expert selection biases (fp32, DeepSeek-V3)", MemoryCategory::kOther,
                                    values * sizeof(float));
  expert_load_slot_ = memory.add("MoE expert loads of the step (int32)", MemoryCategory::kOther,
                                 values * sizeof(std::int32_t));
}

void Trainer::bind_expert_balancing() {
  const std::size_t values = expert_bias_values();
  if (values == 0) return;
  expert_biases_ = arena_->get<float>(expert_biases_slot_);
  expert_load_ = arena_->get<std::int32_t>(expert_load_slot_);
  // The biases start at zero (DeepSeek-V3 and Megatron-Core initialise them so).
  SEXTANT_CUDA_CHECK(cudaMemsetAsync(expert_biases_, 0, values * sizeof(float), stream_));
  SEXTANT_CUDA_CHECK(cudaMemsetAsync(expert_load_, 0, values * sizeof(std::int32_t), stream_));
  // A chunk's rows follow the previous chunks'; its slots share them (they
  // run the same layers on other micro-batches).
  const std::size_t E = static_cast<std::size_t>(shape_.experts);
  std::size_t row = 0;
  for (Chunk& chunk : chunks_) {
    for (auto& slot : chunk.slots) slot->bind_expert_balancing(expert_biases_ + row * E, expert_load_ + row * E);
    row += static_cast<std::size_t>(moe_layers_of(chunk.shape, chunk.parts));
  }
  SEXTANT_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void Trainer::reset_expert_load() {
  const std::size_t values = expert_bias_values();
  if (values > 0) SEXTANT_CUDA_CHECK(cudaMemsetAsync(expert_load_, 0, values * sizeof(std::int32_t), stream_));
}

void Trainer::update_expert_biases() {
  const std::size_t values = expert_bias_values();
  if (values == 0) return;  // every rank of the dp x cp group holds the same stage: all skip alike
  // The load of the whole step: every rank of the dp x cp group routes other
  // tokens through the same layers (trainer.h), in one exact int32 sum.
  if (replicas_ != nullptr)
    on_group(*replicas_,
             [&] { replicas_->all_reduce_sum(expert_load_, expert_load_, values, comm::DataType::kInt32); });
  const std::size_t E = static_cast<std::size_t>(shape_.experts);
  for (std::size_t row = 0; row < values; row += E)
    kernels::moe_expert_bias_update(expert_biases_ + row, expert_load_ + row, shape_.experts,
                                    static_cast<float>(options_.moe.expert_bias_update_rate), stream_);
}

void Trainer::restore_expert_biases(const std::vector<float>& biases) {
  // A run without the balancing ignores a checkpoint's biases (it turns them off).
  if (!balances_experts()) return;
  const std::size_t values = expert_bias_values();
  if (biases.empty()) {  // a checkpoint of a run without them: they start at zero, as in a new run
    if (values > 0) SEXTANT_CUDA_CHECK(cudaMemsetAsync(expert_biases_, 0, values * sizeof(float), stream_));
  } else {
    if (biases.size() != values)
      throw std::invalid_argument("Trainer::restore: the state holds " + std::to_string(biases.size()) +
                                  " expert biases; this rank's " + std::to_string(stage_moe_layers()) +
                                  " MoE layers of " + std::to_string(shape_.experts) + " experts have " +
                                  std::to_string(values));
    SEXTANT_CUDA_CHECK(
        cudaMemcpyAsync(expert_biases_, biases.data(), values * sizeof(float), cudaMemcpyHostToDevice, stream_));
  }
  SEXTANT_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

std::vector<std::vector<float>> Trainer::expert_biases() const {
  const std::size_t values = expert_bias_values();
  if (values == 0) return {};
  return rows_of(download_array(expert_biases_, values, stream_), static_cast<std::size_t>(shape_.experts));
}

std::vector<std::vector<std::int32_t>> Trainer::expert_loads() const {
  const std::size_t values = expert_bias_values();
  if (values == 0) return {};
  return rows_of(download_array(expert_load_, values, stream_), static_cast<std::size_t>(shape_.experts));
}

}  // namespace sextant::engine
