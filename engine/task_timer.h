// Per-task GPU time with CUDA events, the tasks named as sim/plan names them
// ("stage0.mb3.layer17.attn.fwd"), so a measured task and its predicted twin
// can be matched one to one. Off by default; when on, each task costs two
// cudaEventRecord calls (about a microsecond of host time, no device sync);
// the times are read once per step, after the step's last task.
#pragma once

#include <string>
#include <vector>

#include "kernels/stream.h"

struct CUevent_st;

namespace sextant::engine {

struct TaskTime {
  std::string name;
  double seconds = 0;
};

class TaskTimer {
 public:
  explicit TaskTimer(bool enabled) : enabled_(enabled) {}
  ~TaskTimer();
  TaskTimer(const TaskTimer&) = delete;
  TaskTimer& operator=(const TaskTimer&) = delete;

  bool enabled() const { return enabled_; }
  /// Marks the start of task `name` on `stream` (ends the previous one there).
  void begin(std::string name, cudaStream_t stream);
  /// Marks the end of the current task.
  void end(cudaStream_t stream);
  /// Waits for the step's events and returns each task's time, in issue
  /// order; clears the list for the next step.
  std::vector<TaskTime> collect();

 private:
  CUevent_st* event(std::size_t index);

  bool enabled_;
  std::vector<CUevent_st*> events_;  // reused across steps
  std::vector<std::string> names_;
  std::size_t used_ = 0;
  bool open_ = false;
};

}  // namespace sextant::engine
