// What only one GPU's trainer does (trainer.h): the step's forward and
// backward as one CUDA graph, and the GEMM-tuning pass at construction.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "engine/trainer.h"
#include "kernels/cuda_check.h"

namespace sextant::engine {

bool Trainer::runs_as_graph() const {
  // With any group the collectives meet the other ranks from the host (the
  // in-process communicator) or join NCCL's queue: launched one by one.
  // An MoE layer waits on the host for its experts' row counts (moe_layer.h),
  // which a graph cannot.
  return options_.use_cuda_graph && !timer_.enabled() && groups_in_use().empty() && !shape_.moe();
}

void Trainer::queue_step(int step) {
  if (!runs_as_graph()) {
    run_program(step);
    return;
  }
  if (graph_ == nullptr) capture_graph();
  SEXTANT_CUDA_CHECK(cudaGraphLaunch(graph_, stream_));
  if (step > 0) queue_optimizer(step);
}

void Trainer::capture_graph() {
  // Everything run_program queues is device work on stream_ with fixed pointers
  // and sizes (tokens are uploaded into the same buffers each step), so one
  // capture replays every step. The optimizer stays outside: its learning rate
  // and bias corrections change per step.
  cudaGraph_t graph = nullptr;
  SEXTANT_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
  try {
    run_program(0);
  } catch (...) {
    if (cudaStreamEndCapture(stream_, &graph) == cudaSuccess && graph != nullptr) cudaGraphDestroy(graph);
    throw;
  }
  SEXTANT_CUDA_CHECK(cudaStreamEndCapture(stream_, &graph));
  cudaGraphExec_t exec = nullptr;
  const cudaError_t instantiated = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  SEXTANT_CUDA_CHECK(instantiated);
  graph_ = exec;
}

void Trainer::tune_gemms() {
  // Tokens spread over the vocabulary (a 64-bit LCG, Knuth's MMIX constants)
  // rather than one token everywhere, so the products are timed on data like
  // training's (a tensor core's power, and so the clock it holds, depends on
  // the data). Everything this pass writes is overwritten or zeroed by the
  // first step.
  const std::size_t n = static_cast<std::size_t>(layout_.gbs) * shape_.seq;
  std::vector<std::int32_t> tokens(n);
  std::uint64_t state = options_.seed;
  for (auto& t : tokens) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    t = static_cast<std::int32_t>((state >> 33) % static_cast<std::uint64_t>(shape_.vocab));
  }
  upload(tokens, tokens);
  for (Chunk& chunk : chunks_)
    for (auto& slot : chunk.slots) slot->set_tune_gemms(true);
  reduce_gradients_ = false;  // the dp ranks time different products: no collectives
  run_program(0);
  reduce_gradients_ = true;
  for (Chunk& chunk : chunks_)
    for (auto& slot : chunk.slots) slot->set_tune_gemms(false);
  SEXTANT_CUDA_CHECK(cudaStreamSynchronize(stream_));
  timer_.collect();  // the pass's task times are not a step's
  take_moe_statistics();  // nor its routing
}

}  // namespace sextant::engine
