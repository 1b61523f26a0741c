#include "engine/comm/thread_rendezvous.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace sextant::engine::comm {
namespace {

TEST(ThreadRendezvous, ReleasesAllPartiesEachRound) {
  // 4 threads, 100 rounds: after round k's wait every thread has counted k times.
  constexpr int kThreads = 4, kRounds = 100;
  ThreadRendezvous rendezvous(kThreads, std::chrono::seconds(10));
  std::atomic<int> counted{0}, wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&] {
      for (int k = 1; k <= kRounds; ++k) {
        ++counted;
        if (!rendezvous.arrive_and_wait().empty()) ++wrong;
        if (counted.load() < k * kThreads) ++wrong;
        if (!rendezvous.arrive_and_wait().empty()) ++wrong;
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(counted.load(), kThreads * kRounds);
}

TEST(ThreadRendezvous, TimesOutThenStaysBroken) {
  ThreadRendezvous rendezvous(3, std::chrono::milliseconds(50));
  EXPECT_EQ(rendezvous.arrive_and_wait(), "timeout: 1 of 3 ranks arrived within 0.05 s");
  EXPECT_EQ(rendezvous.arrive_and_wait(), "broken: 1 of 3 ranks arrived within 0.05 s");
}

}  // namespace
}  // namespace sextant::engine::comm
