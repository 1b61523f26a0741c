#include "engine/trainer_arrays.h"

#include <cuda_runtime_api.h>

#include <cmath>
#include <stdexcept>

#include "kernels/cuda_check.h"
#include "kernels/grad_norm.h"
#include "kernels/parameter_init.h"

namespace sextant::engine {

OptimizerSlots plan_optimizer_buffers(ArenaPlan& plan, std::size_t elements, std::size_t master_elements,
                                      int dp_shards) {
  const std::string shard = dp_shards > 1 ? ", this rank's 1/" + std::to_string(dp_shards) : "";
  OptimizerSlots s;
  s.weights = plan.add("weights (bf16)", MemoryCategory::kParameters, elements * sizeof(kernels::Bf16));
  s.gradients = plan.add("gradients (fp32)", MemoryCategory::kGradients, elements * sizeof(float));
  s.master = plan.add("master weights (fp32" + shard + ")", MemoryCategory::kOptimizerStates,
                      master_elements * sizeof(float));
  s.adam_m = plan.add("adam m (fp32" + shard + ")", MemoryCategory::kOptimizerStates, master_elements * sizeof(float));
  s.adam_v = plan.add("adam v (fp32" + shard + ")", MemoryCategory::kOptimizerStates, master_elements * sizeof(float));
  s.norm_scalars = plan.add("gradient norm scalars", MemoryCategory::kOther, 4 * sizeof(float));
  s.norm_workspace_bytes = kernels::grad_sum_squares_workspace_bytes();
  s.norm_workspace = plan.add("workspace.grad_norm", MemoryCategory::kOther, s.norm_workspace_bytes);
  s.elements = elements;
  s.master_elements = master_elements;
  return s;
}

data_parallel::OptimizerBuffers bind_optimizer_buffers(const DeviceArena& arena, const OptimizerSlots& s) {
  data_parallel::OptimizerBuffers b;
  b.weights = arena.get<kernels::Bf16>(s.weights);
  b.gradients = arena.get<float>(s.gradients);
  b.master = arena.get<float>(s.master);
  b.adam_m = arena.get<float>(s.adam_m);
  b.adam_v = arena.get<float>(s.adam_v);
  b.norm_scalars = arena.get<float>(s.norm_scalars);
  b.norm_workspace = arena.get<char>(s.norm_workspace);
  b.norm_workspace_bytes = s.norm_workspace_bytes;
  b.elements = s.elements;
  b.master_elements = s.master_elements;
  return b;
}

std::vector<float> download_bf16_as_floats(const kernels::Bf16* device, std::size_t n, cudaStream_t stream) {
  const std::vector<kernels::Bf16> host = download_array(device, n, stream);
  std::vector<float> values(n);
  for (std::size_t i = 0; i < n; ++i) values[i] = kernels::to_float(host[i]);
  return values;
}

checkpoint::TrainerState read_trainer_state(const data_parallel::OptimizerBuffers& a, std::int64_t steps_done,
                                            cudaStream_t stream) {
  checkpoint::TrainerState s;
  s.steps_done = steps_done;
  s.weights_bf16.resize(a.elements);
  static_assert(sizeof(kernels::Bf16) == sizeof(std::uint16_t));
  SEXTANT_CUDA_CHECK(cudaMemcpyAsync(s.weights_bf16.data(), a.weights, a.elements * sizeof(kernels::Bf16),
                                     cudaMemcpyDeviceToHost, stream));
  SEXTANT_CUDA_CHECK(cudaStreamSynchronize(stream));
  s.master = download_array(a.master, a.master_elements, stream);
  s.adam_m = download_array(a.adam_m, a.master_elements, stream);
  s.adam_v = download_array(a.adam_v, a.master_elements, stream);
  return s;
}

void write_trainer_state(const data_parallel::OptimizerBuffers& a, const checkpoint::TrainerState& s,
                         const std::string& who, cudaStream_t stream) {
  struct Length {
    const char* what;
    std::size_t got, expected;
  };
  for (const Length& l : {Length{"bf16 weights", s.weights_bf16.size(), a.elements},
                          Length{"fp32 master weights", s.master.size(), a.master_elements},
                          Length{"Adam m", s.adam_m.size(), a.master_elements},
                          Length{"Adam v", s.adam_v.size(), a.master_elements}})
    if (l.got != l.expected)
      throw std::invalid_argument(who + ": the state's " + std::string(l.what) + " hold " + std::to_string(l.got) +
                                  " elements; this trainer's " + std::to_string(l.expected));
  if (s.steps_done < 0) throw std::invalid_argument(who + ": negative steps_done");
  SEXTANT_CUDA_CHECK(cudaMemcpyAsync(a.weights, s.weights_bf16.data(), a.elements * sizeof(kernels::Bf16),
                                     cudaMemcpyHostToDevice, stream));
  for (const auto& [device, host] : {std::pair{a.master, &s.master}, std::pair{a.adam_m, &s.adam_m},
                                     std::pair{a.adam_v, &s.adam_v}})
    SEXTANT_CUDA_CHECK(cudaMemcpyAsync(device, host->data(), a.master_elements * sizeof(float), cudaMemcpyHostToDevice,
                                       stream));
  SEXTANT_CUDA_CHECK(cudaStreamSynchronize(stream));
}

void draw_initial_values(float* out, const ParameterTensor& t, std::size_t random_stream, int tp, int tp_rank,
                         int ep_rank, const TrainerOptions& o, int num_layers, cudaStream_t stream) {
  float stddev = 0;
  switch (t.init) {
    case ParameterInit::kNormal: stddev = static_cast<float>(o.init_std); break;
    case ParameterInit::kScaledNormal: stddev = static_cast<float>(o.init_std / std::sqrt(2.0 * num_layers)); break;
    case ParameterInit::kOnes: kernels::fill_constant(out, t.elements(), 1.0f, stream); return;
    case ParameterInit::kZeros: return;
  }
  if (t.expert && ep_rank > 0) {  // the experts E/ep·r onwards: whole rows further down (tp = 1 with MoE)
    const auto rows = static_cast<std::size_t>(t.rows), cols = static_cast<std::size_t>(t.cols);
    kernels::fill_normal_block(out, cols, rows, cols, cols, static_cast<std::size_t>(ep_rank) * rows, 0, 0.0f, stddev,
                               o.seed, random_stream, stream);
    return;
  }
  if (!t.split_over_tp || tp == 1) {
    kernels::fill_normal(out, t.elements(), 0.0f, stddev, o.seed, random_stream, stream);
    return;
  }
  // Rank r holds [start_k + r·b_k, +b_k) of each block k of the whole tensor
  // along the split dimension, start_k = tp·(b_0 + ... + b_{k-1}), its blocks
  // back to back (ParameterTensor::tp_blocks).
  const auto rows = static_cast<std::size_t>(t.rows), cols = static_cast<std::size_t>(t.cols);
  const std::size_t whole_cols = t.tp_split_dim == 1 ? cols * static_cast<std::size_t>(tp) : cols;
  std::size_t mine = 0;  // along the split dimension, in the shard
  for (const std::int64_t block : t.tp_blocks) {
    const auto b = static_cast<std::size_t>(block);
    const std::size_t whole = static_cast<std::size_t>(tp) * mine + static_cast<std::size_t>(tp_rank) * b;
    if (t.tp_split_dim == 0)
      kernels::fill_normal_block(out + mine * cols, cols, b, cols, whole_cols, whole, 0, 0.0f, stddev, o.seed,
                                 random_stream, stream);
    else
      kernels::fill_normal_block(out + mine, cols, rows, b, whole_cols, 0, whole, 0.0f, stddev, o.seed, random_stream,
                                 stream);
    mine += b;
  }
}

kernels::AdamWStep adamw_step(const TrainerOptions& o, int step) {
  kernels::AdamWStep s;
  s.learning_rate = static_cast<float>(o.lr.at(step));
  s.beta1 = static_cast<float>(o.optimizer.beta1);
  s.beta2 = static_cast<float>(o.optimizer.beta2);
  s.eps = static_cast<float>(o.optimizer.eps);
  s.step = step;
  s.weight_decay = static_cast<float>(o.optimizer.weight_decay);
  return s;
}

double mean_loss_in_global_order(const std::vector<float>& losses, int microbatches_per_rank, int dp,
                                 std::size_t per_microbatch) {
  const std::size_t local = static_cast<std::size_t>(microbatches_per_rank) * per_microbatch;
  double sum = 0;
  for (int g = 0; g < microbatches_per_rank * dp; ++g) {
    const float* mb = losses.data() + static_cast<std::size_t>(g % dp) * local +
                      static_cast<std::size_t>(g / dp) * per_microbatch;
    for (std::size_t i = 0; i < per_microbatch; ++i) sum += mb[i];
  }
  return sum / static_cast<double>(losses.size());
}

}  // namespace sextant::engine
