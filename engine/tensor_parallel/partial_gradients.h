// The gradients of replicated parameters that each tensor-parallel rank
// computes from its own tokens under sequence parallelism (the norms' gains
// and shifts, the biases added after a reduce-scatter: ParameterLayout's
// partial_gradient_over_tp), summed over the tp group before anything reads
// them — Megatron all-reduces the gradients of its "sequence_parallel"
// parameters over tp the same way (Korthikanti et al. 2022, Sec. 4.2.2:
// the norms run on 1/tp of the sequence per rank).
//
// The tensors are grouped into runs of neighbours in the flat buffer
// (engine/model/partial_gradient_runs.h), so a Llama's norm gains (adjacent,
// no biases between) are one all-reduce.
#pragma once

#include <cstddef>
#include <vector>

#include "engine/comm/communicator.h"
#include "engine/model/partial_gradient_runs.h"

struct CUevent_st;

namespace sextant::engine::tensor_parallel {

class PartialGradients {
 public:
  /// The runs of `layout`'s partial_gradient_over_tp tensors. Needs a CUDA
  /// device (two events).
  explicit PartialGradients(const ParameterLayout& layout);
  ~PartialGradients();
  PartialGradients(const PartialGradients&) = delete;
  PartialGradients& operator=(const PartialGradients&) = delete;

  /// Queues the all-reduces (fp32 sums over `tp`) of the runs' elements in
  /// [begin, end) of `gradients`, ordered after the work queued on `stream`
  /// so far and before the work queued on it afterwards. Every rank of the
  /// group calls it with the same range.
  void sum(float* gradients, std::size_t begin, std::size_t end, comm::Communicator& tp,
           cudaStream_t stream);

  bool empty() const { return runs_.empty(); }

 private:
  std::vector<ElementRun> runs_;
  CUevent_st* ready_ = nullptr;  // cudaEvent_t: stream -> the tp stream
  CUevent_st* done_ = nullptr;   // the tp stream -> stream
};

}  // namespace sextant::engine::tensor_parallel
