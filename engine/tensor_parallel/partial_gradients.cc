#include "engine/tensor_parallel/partial_gradients.h"

#include <cuda_runtime_api.h>

#include <algorithm>

#include "kernels/cuda_check.h"

namespace sextant::engine::tensor_parallel {

PartialGradients::PartialGradients(const ParameterLayout& layout) : runs_(partial_gradient_runs(layout)) {
  SEXTANT_CUDA_CHECK(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming));
  SEXTANT_CUDA_CHECK(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming));
}

PartialGradients::~PartialGradients() {
  if (ready_ != nullptr) cudaEventDestroy(ready_);
  if (done_ != nullptr) cudaEventDestroy(done_);
}

void PartialGradients::sum(float* gradients, std::size_t begin, std::size_t end, comm::Communicator& tp,
                           cudaStream_t stream) {
  bool any = false;
  for (const ElementRun& r : runs_) any = any || (std::max(r.begin, begin) < std::min(r.end, end));
  if (!any) return;
  const bool own_stream = tp.stream() != stream;
  if (own_stream) {
    SEXTANT_CUDA_CHECK(cudaEventRecord(ready_, stream));
    SEXTANT_CUDA_CHECK(cudaStreamWaitEvent(tp.stream(), ready_, 0));
  }
  for (const ElementRun& r : runs_) {
    const std::size_t from = std::max(r.begin, begin), to = std::min(r.end, end);
    if (from < to) tp.all_reduce_sum(gradients + from, gradients + from, to - from, comm::DataType::kFp32);
  }
  if (own_stream) {
    SEXTANT_CUDA_CHECK(cudaEventRecord(done_, tp.stream()));
    SEXTANT_CUDA_CHECK(cudaStreamWaitEvent(stream, done_, 0));
  }
}

}  // namespace sextant::engine::tensor_parallel
