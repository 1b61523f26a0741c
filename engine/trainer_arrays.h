// What the trainer does with their flat per-parameter arrays (parameter_layout.h): draw the
// initial values, set up AdamW's step, copy the arrays to and from a
// checkpoint state and the host, and average a global batch's per-token
// losses in the order one GPU sums them.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/checkpoint/trainer_state.h"
#include "engine/data_parallel/optimizer_buffers.h"
#include "engine/device_arena.h"
#include "engine/model/parameter_layout.h"
#include "engine/trainer.h"
#include "kernels/adamw.h"
#include "kernels/bf16.h"
#include "kernels/cuda_check.h"
#include "kernels/stream.h"

namespace sextant::engine {

/// The optimizer's buffers (data_parallel::OptimizerBuffers) as blocks of a
/// trainer's ArenaPlan: bf16 weights and fp32 gradients of `elements`, fp32
/// master weights and Adam moments of `master_elements` (the rank's 1/dp of
/// them under the distributed optimizer, `dp_shards` > 1, which their names
/// say), the gradient norm's scalars and workspace.
struct OptimizerSlots {
  ArenaPlan::Slot weights = -1, gradients = -1, master = -1, adam_m = -1, adam_v = -1, norm_scalars = -1,
                  norm_workspace = -1;
  std::size_t norm_workspace_bytes = 0, elements = 0, master_elements = 0;
};
OptimizerSlots plan_optimizer_buffers(ArenaPlan& plan, std::size_t elements, std::size_t master_elements,
                                      int dp_shards);
/// The buffers where `arena` (made from the plan) put them.
data_parallel::OptimizerBuffers bind_optimizer_buffers(const DeviceArena& arena, const OptimizerSlots& slots);

/// The weights, masters and Adam moments as a checkpoint keeps them, after
/// `steps_done` updates; waits for `stream`.
checkpoint::TrainerState read_trainer_state(const data_parallel::OptimizerBuffers& arrays, std::int64_t steps_done,
                                            cudaStream_t stream);

/// Puts read_trainer_state's arrays back; waits for `stream`. Throws
/// std::invalid_argument, its message starting with `who`, naming the array
/// whose length differs (another model or layout) or a negative steps_done.
void write_trainer_state(const data_parallel::OptimizerBuffers& arrays, const checkpoint::TrainerState& state,
                         const std::string& who, cudaStream_t stream);

/// Tensor `t`'s initial values into `out` (fp32, t.elements()) as its
/// ParameterInit says — N(0, init_std), N(0, init_std / sqrt(2 · num_layers))
/// (Megatron's scaled_init_method_normal), ones — drawn from random stream
/// `random_stream` of the options' seed (the tensor's index in the whole
/// model's layout) at each element's index in the WHOLE tensor: for tp rank
/// `tp_rank` of `tp` > 1 a tensor split over tp gets its shard's blocks
/// (ParameterTensor::tp_blocks) of the values one GPU draws, so the model does
/// not depend on the layout; an expert tensor on ep rank `ep_rank` gets its
/// experts' rows, rows [ep_rank·rows, +rows) of the whole (all experts) tensor.
/// kZeros leaves `out` as it is.
void draw_initial_values(float* out, const ParameterTensor& t, std::size_t random_stream, int tp, int tp_rank,
                         int ep_rank, const TrainerOptions& options, int num_layers, cudaStream_t stream);

/// AdamW's settings for update `step` (1-based): the options' betas, eps,
/// weight decay and the schedule's learning rate.
kernels::AdamWStep adamw_step(const TrainerOptions& options, int step);

/// The mean of a global batch's per-token losses: `losses` holds dp blocks,
/// block j dp rank j's micro-batches j, j+dp, ... (`microbatches_per_rank` of
/// `per_microbatch` tokens each), summed in global micro-batch order, as one
/// rank would.
double mean_loss_in_global_order(const std::vector<float>& losses, int microbatches_per_rank, int dp,
                                 std::size_t per_microbatch);

/// n values from the device, waiting for `stream`.
template <typename T>
std::vector<T> download_array(const T* device, std::size_t n, cudaStream_t stream) {
  std::vector<T> host(n);
  SEXTANT_CUDA_CHECK(cudaMemcpyAsync(host.data(), device, n * sizeof(T), cudaMemcpyDeviceToHost, stream));
  SEXTANT_CUDA_CHECK(cudaStreamSynchronize(stream));
  return host;
}
std::vector<float> download_bf16_as_floats(const kernels::Bf16* device, std::size_t n, cudaStream_t stream);

}  // namespace sextant::engine
