// A reusable barrier for the threads of one in-process group, with a timeout.
//
// std::barrier would wait forever for a thread that died or took another
// branch; this one gives up after `timeout`, and from then on every wait of
// the group fails at once (the group is broken: its ranks no longer agree
// where they are), so a test fails with a message instead of hanging.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>

namespace sextant::engine::comm {

class ThreadRendezvous {
 public:
  ThreadRendezvous(int parties, std::chrono::milliseconds timeout);

  /// Blocks until all parties have arrived. Returns "" when they did, or why
  /// not: "timeout: 2 of 3 ranks arrived within 60 s" or "broken: ...".
  std::string arrive_and_wait();

  std::chrono::milliseconds timeout() const { return timeout_; }

 private:
  const int parties_;
  const std::chrono::milliseconds timeout_;
  std::mutex mutex_;
  std::condition_variable changed_;
  int arrived_ = 0;
  long long generation_ = 0;
  std::string broken_;  // why the group is broken; empty while it is not
};

}  // namespace sextant::engine::comm
