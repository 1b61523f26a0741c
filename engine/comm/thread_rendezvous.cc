#include "engine/comm/thread_rendezvous.h"

#include <sstream>

namespace sextant::engine::comm {

ThreadRendezvous::ThreadRendezvous(int parties, std::chrono::milliseconds timeout)
    : parties_(parties), timeout_(timeout) {}

std::string ThreadRendezvous::arrive_and_wait() {
  std::unique_lock lock(mutex_);
  if (!broken_.empty()) return "broken: " + broken_;
  const long long generation = generation_;
  if (++arrived_ == parties_) {
    arrived_ = 0;
    ++generation_;
    changed_.notify_all();
    return {};
  }
  const bool done = changed_.wait_for(lock, timeout_, [&] {
    return generation_ != generation || !broken_.empty();
  });
  if (generation_ != generation) return {};
  if (!done) {
    std::ostringstream why;
    why << arrived_ << " of " << parties_ << " ranks arrived within "
        << std::chrono::duration<double>(timeout_).count() << " s";
    broken_ = why.str();
    changed_.notify_all();
    return "timeout: " + broken_;
  }
  return "broken: " + broken_;
}

}  // namespace sextant::engine::comm
