#include "engine/launch/step_watchdog.h"

#include <utility>

namespace sextant::engine::launch {

StepWatchdog::StepWatchdog(std::chrono::milliseconds limit, Expired on_expired)
    : limit_(limit), on_expired_(std::move(on_expired)), thread_([this] { watch(); }) {}

StepWatchdog::~StepWatchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void StepWatchdog::arm(std::int64_t step) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    armed_ = true;
    step_ = step;
    deadline_ = std::chrono::steady_clock::now() + limit_;
  }
  changed_.notify_all();
}

void StepWatchdog::disarm() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    armed_ = false;
  }
  changed_.notify_all();
}

void StepWatchdog::watch() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    if (!armed_) {
      changed_.wait(lock);
      continue;
    }
    const auto deadline = deadline_;
    if (changed_.wait_until(lock, deadline) == std::cv_status::no_timeout) continue;  // re-read the state
    if (stopping_ || !armed_ || deadline_ != deadline) continue;                    // disarmed or re-armed meanwhile
    armed_ = false;
    const std::int64_t step = step_;
    lock.unlock();
    on_expired_(step, limit_);
    lock.lock();
  }
}

}  // namespace sextant::engine::launch
