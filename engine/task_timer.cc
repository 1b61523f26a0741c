#include "engine/task_timer.h"

#include <cuda_runtime_api.h>

#include "kernels/cuda_check.h"

namespace sextant::engine {

TaskTimer::~TaskTimer() {
  for (CUevent_st* e : events_) cudaEventDestroy(e);
}

CUevent_st* TaskTimer::event(std::size_t index) {
  while (events_.size() <= index) {
    cudaEvent_t e = nullptr;
    SEXTANT_CUDA_CHECK(cudaEventCreate(&e));
    events_.push_back(e);
  }
  return events_[index];
}

void TaskTimer::begin(std::string name, cudaStream_t stream) {
  if (!enabled_) return;
  if (open_) end(stream);
  SEXTANT_CUDA_CHECK(cudaEventRecord(event(used_), stream));
  ++used_;
  names_.push_back(std::move(name));
  open_ = true;
}

void TaskTimer::end(cudaStream_t stream) {
  if (!enabled_ || !open_) return;
  SEXTANT_CUDA_CHECK(cudaEventRecord(event(used_), stream));
  ++used_;
  open_ = false;
}

std::vector<TaskTime> TaskTimer::collect() {
  std::vector<TaskTime> times;
  if (!enabled_) return times;
  times.reserve(names_.size());
  for (std::size_t i = 0; i < names_.size(); ++i) {
    SEXTANT_CUDA_CHECK(cudaEventSynchronize(events_[2 * i + 1]));
    float ms = 0;
    SEXTANT_CUDA_CHECK(cudaEventElapsedTime(&ms, events_[2 * i], events_[2 * i + 1]));
    times.push_back(TaskTime{std::move(names_[i]), ms * 1e-3});
  }
  names_.clear();
  used_ = 0;
  return times;
}

}  // namespace sextant::engine
