// A host-side deadline for each training step of a multi-rank run: the last
// line of defence against a silent hang.
//
// The trainer's waits time out through the communicators (--comm-timeout-s:
// NCCL's ncclCommGetAsyncError polled, then ncclCommAbort), but only once the
// host is back in sextant's code. A host thread blocked inside a library call
// that never returns — NCCL's lazy connection setup waiting for a peer that
// never makes its first collective, a driver call behind a hung kernel —
// never gets there. The watchdog's own thread sees the step outlive its
// deadline and calls `on_expired` (sextant run: one message, then the
// process exits, so the launcher stops every rank), as PyTorch's NCCL
// watchdog tears a process down after its timeout.
//
// Thread safety: arm/disarm from one thread; on_expired runs on the
// watchdog's thread, at most once per arm.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>

namespace sextant::engine::launch {

class StepWatchdog {
 public:
  using Expired = std::function<void(std::int64_t step, std::chrono::milliseconds limit)>;

  /// A step armed for longer than `limit` calls on_expired(step, limit).
  StepWatchdog(std::chrono::milliseconds limit, Expired on_expired);
  ~StepWatchdog();  // stops the thread without calling on_expired
  StepWatchdog(const StepWatchdog&) = delete;
  StepWatchdog& operator=(const StepWatchdog&) = delete;

  /// Step `step` starts now: its deadline is now + limit.
  void arm(std::int64_t step);
  /// The armed step ended (or is not counted: a checkpoint save).
  void disarm();

 private:
  void watch();

  const std::chrono::milliseconds limit_;
  const Expired on_expired_;
  std::mutex mutex_;
  std::condition_variable changed_;
  bool armed_ = false;
  bool stopping_ = false;
  std::int64_t step_ = 0;
  std::chrono::steady_clock::time_point deadline_;
  std::thread thread_;  // last: started once the rest is initialised
};

}  // namespace sextant::engine::launch
