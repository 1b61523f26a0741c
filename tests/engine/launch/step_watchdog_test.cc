// The step watchdog (engine/launch/step_watchdog.h) with deadlines of tens of
// milliseconds: a step that outlives its deadline is reported once, with its
// number; one disarmed or re-armed in time is not; destruction while armed
// reports nothing. The sleeps are at least 4x the deadlines or 1/8 of them, so a
// loaded machine delays the report but does not change it.
#include "engine/launch/step_watchdog.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

namespace sextant::engine::launch {
namespace {

using std::chrono::milliseconds;

struct Reports {
  std::atomic<int> count{0};
  std::atomic<std::int64_t> step{-1};
  StepWatchdog::Expired callback() {
    return [this](std::int64_t s, milliseconds) {
      step = s;
      ++count;
    };
  }
};

TEST(StepWatchdog, AStepPastItsDeadlineIsReportedOnce) {
  Reports r;
  StepWatchdog dog(milliseconds(50), r.callback());
  dog.arm(7);
  std::this_thread::sleep_for(milliseconds(400));
  EXPECT_EQ(r.count.load(), 1);
  EXPECT_EQ(r.step.load(), 7);
}

TEST(StepWatchdog, StepsThatEndInTimeAreNotReported) {
  Reports r;
  {
    StepWatchdog dog(milliseconds(500), r.callback());
    for (int step = 1; step <= 5; ++step) {  // 5 steps of 20 ms, each well inside 500 ms
      dog.arm(step);
      std::this_thread::sleep_for(milliseconds(20));
      dog.disarm();
    }
    std::this_thread::sleep_for(milliseconds(1000));  // disarmed: nothing to report
    dog.arm(6);                                      // armed at destruction: not reported
  }
  EXPECT_EQ(r.count.load(), 0);
}

TEST(StepWatchdog, ReArmingMovesTheDeadline) {
  Reports r;
  StepWatchdog dog(milliseconds(400), r.callback());
  for (int step = 1; step <= 12; ++step) {  // re-armed every 50 ms: 600 ms in all, never 400 ms on one step
    dog.arm(step);
    std::this_thread::sleep_for(milliseconds(50));
  }
  dog.disarm();
  EXPECT_EQ(r.count.load(), 0);
  dog.arm(9);
  std::this_thread::sleep_for(milliseconds(1600));
  EXPECT_EQ(r.count.load(), 1);
  EXPECT_EQ(r.step.load(), 9);
}

}  // namespace
}  // namespace sextant::engine::launch
