// Trainer::first_nonfinite_gradient: which tensor of the whole model made a
// step's gradient norm non-finite (engine/model/nonfinite_step.h), when each
// pipeline stage holds only its layers. Run only after such a step, so it may
// be slow-ish: one sum of squares per tensor of the stage, a small all-reduce
// over tp and dp, and (pp > 1) one all-gather over the pipeline.
//
// Every rank must name the same tensor, the first in the whole model's flat
// order (parameter_layout.h): a chunk's tensors are in that order, and chunks
// follow the model's layers, so (the chunk's first layer, the tensor's index in
// the chunk) orders the tensors of all stages — the embedding's chunk starts
// at layer 0 with its tensors first, the output's ends the model. Each stage
// offers its first non-finite tensor as (first layer, index, name); the
// all-gather over pp gives every rank all offers, and each picks the least.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "engine/model/nonfinite_step.h"
#include "engine/trainer.h"
#include "kernels/cuda_check.h"
#include "kernels/grad_norm.h"

namespace sextant::engine {

namespace {

// One stage's offer in floats: first layer, index in its chunk (−1, −1 for
// none), then the name's characters (small integers, exact in fp32), 0-padded.
constexpr std::size_t kNameChars = 96;
constexpr std::size_t kOfferFloats = 2 + kNameChars;

}  // namespace

std::string Trainer::first_nonfinite_gradient() {
  std::vector<std::pair<const Chunk*, std::size_t>> tensors;  // this stage's, in order
  for (const Chunk& chunk : chunks_)
    for (std::size_t i = 0; i < chunk.layout.tensors().size(); ++i) tensors.emplace_back(&chunk, i);
  float* sums = nullptr;  // one sum of squares per tensor, then the gathered offers
  const std::size_t stages = pp_ == nullptr ? 1 : static_cast<std::size_t>(pp_->size());
  const std::size_t offers = stages * kOfferFloats;
  SEXTANT_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&sums),
                                     (tensors.size() + kOfferFloats + offers) * sizeof(float), stream_));
  SEXTANT_CUDA_CHECK(cudaMemsetAsync(sums, 0, tensors.size() * sizeof(float), stream_));
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const auto& [chunk, index] = tensors[i];
    const ParameterTensor& t = chunk->layout.tensors()[index];
    kernels::grad_sum_squares_accumulate(sums + i, buffers_.gradients + chunk->offset + t.offset, t.elements(),
                                         buffers_.norm_workspace, buffers_.norm_workspace_bytes, stream_);
  }
  // A NaN in any tp shard (or in any rank's local gradient, which its ZeRO-1
  // owner's reduced block then holds too) makes the group's sum non-finite; dp
  // x cp replicas add copies of the same finite values.
  for (comm::Communicator* group : {tp_, replicas_})
    if (group != nullptr)
      on_group(*group, [&] { group->all_reduce_sum(sums, sums, tensors.size(), comm::DataType::kFp32); });
  std::vector<float> host(tensors.size());
  SEXTANT_CUDA_CHECK(cudaMemcpyAsync(host.data(), sums, host.size() * sizeof(float), cudaMemcpyDeviceToHost, stream_));
  wait_for_compute_stream();
  const int first = first_nonfinite(host);

  std::vector<float> offer(kOfferFloats, 0.0f);
  offer[0] = offer[1] = -1.0f;
  if (first >= 0) {
    const auto& [chunk, index] = tensors[static_cast<std::size_t>(first)];
    offer[0] = static_cast<float>(chunk->parts.first_layer);
    offer[1] = static_cast<float>(index);
    const std::string& name = chunk->layout.tensors()[index].name;
    for (std::size_t c = 0; c < name.size() && c < kNameChars; ++c)
      offer[2 + c] = static_cast<float>(static_cast<unsigned char>(name[c]));
  }
  float* mine = sums + tensors.size();
  float* gathered = mine + kOfferFloats;
  SEXTANT_CUDA_CHECK(cudaMemcpyAsync(mine, offer.data(), kOfferFloats * sizeof(float), cudaMemcpyHostToDevice, stream_));
  if (pp_ != nullptr)
    on_group(*pp_, [&] { pp_->all_gather(mine, gathered, kOfferFloats, comm::DataType::kFp32); });
  else
    SEXTANT_CUDA_CHECK(cudaMemcpyAsync(gathered, mine, kOfferFloats * sizeof(float), cudaMemcpyDeviceToDevice, stream_));
  std::vector<float> all(offers);
  SEXTANT_CUDA_CHECK(cudaMemcpyAsync(all.data(), gathered, offers * sizeof(float), cudaMemcpyDeviceToHost, stream_));
  SEXTANT_CUDA_CHECK(cudaFreeAsync(sums, stream_));
  wait_for_compute_stream();

  const float* best = nullptr;
  for (std::size_t s = 0; s < stages; ++s) {
    const float* o = all.data() + s * kOfferFloats;
    if (o[0] < 0) continue;
    if (best == nullptr || o[0] < best[0] || (o[0] == best[0] && o[1] < best[1])) best = o;
  }
  std::string name;
  if (best != nullptr)
    for (std::size_t c = 0; c < kNameChars && best[2 + c] != 0.0f; ++c) name += static_cast<char>(best[2 + c]);
  return name;
}

}  // namespace sextant::engine
