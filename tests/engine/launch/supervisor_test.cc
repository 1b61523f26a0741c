#include "engine/launch/supervisor.h"

#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <sstream>
#include <thread>

namespace sextant::engine::launch {
namespace {

using Clock = std::chrono::steady_clock;

SupervisorOptions shell(const std::string& script, int nproc) {
  SupervisorOptions o;
  o.command = {"/bin/sh", "-c", script};
  o.nproc = nproc;
  o.master_port = 12345;
  o.grace = std::chrono::seconds(2);
  return o;
}

TEST(Supervisor, EveryRankSeesItsVariables) {
  std::ostringstream log;
  const SupervisorResult r = supervise(
      shell("echo \"$RANK/$WORLD_SIZE local $LOCAL_RANK at $MASTER_ADDR:$MASTER_PORT\" >&2", 3), log);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.failed_rank, -1);
  for (int rank = 0; rank < 3; ++rank) {
    const std::string line = "[rank " + std::to_string(rank) + "] " + std::to_string(rank) +
                             "/3 local " + std::to_string(rank) + " at 127.0.0.1:12345\n";
    EXPECT_NE(log.str().find(line), std::string::npos) << log.str();
  }
}

TEST(Supervisor, ARankThatDiesStopsTheOthersWithItsMessage) {
  // Rank 2 fails at once; ranks 0, 1, 3 would sleep 60 s. The supervisor must
  // stop them (SIGTERM to each process group) and return rank 2's exit code
  // and last line, well before the sleepers would end.
  std::ostringstream log;
  const auto start = Clock::now();
  const SupervisorResult r = supervise(
      shell("if [ \"$RANK\" = 2 ]; then echo 'loading'; echo 'boom: out of memory on rank 2' >&2; "
            "exit 3; fi; sleep 60",
            4),
      log);
  const double elapsed_s = std::chrono::duration<double>(Clock::now() - start).count();
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.failed_rank, 2);
  EXPECT_EQ(r.message, "rank 2 exited with code 3: boom: out of memory on rank 2");
  EXPECT_LT(elapsed_s, 20.0);
  EXPECT_NE(log.str().find("[rank 2] boom: out of memory on rank 2\n"), std::string::npos) << log.str();
}

TEST(Supervisor, ARankThatHangsIsKilledWhenAPeerTimesOut) {
  // The path of a hung rank (stuck in a kernel or a collective: it never exits
  // and ignores SIGTERM, which the shell's `trap '' TERM` passes on to its
  // sleep) beside one whose collective times out (--comm-timeout-s, here 0.3
  // s): the timed-out rank exits 1 naming the collective, the supervisor sends
  // SIGTERM, then SIGKILL after the 1 s grace, and returns the failure —
  // within a few seconds, not the 60 s the hung rank would take.
  std::ostringstream log;
  SupervisorOptions o = shell(
      "if [ \"$RANK\" = 1 ]; then trap '' TERM; sleep 60; fi; sleep 0.3; "
      "echo 'sextant: internal error: all_reduce on group tp (rank 0 of 2): timeout: not done within 0.3 s' >&2; "
      "exit 1",
      2);
  o.grace = std::chrono::seconds(1);
  const auto start = Clock::now();
  const SupervisorResult r = supervise(o, log);
  const double elapsed_s = std::chrono::duration<double>(Clock::now() - start).count();
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.failed_rank, 0);
  EXPECT_EQ(r.message, "rank 0 exited with code 1: sextant: internal error: all_reduce on group tp (rank 0 of 2): "
                       "timeout: not done within 0.3 s");
  EXPECT_LT(elapsed_s, 20.0);
}

TEST(Supervisor, ACommandThatCannotStartFailsWithCode127) {
  SupervisorOptions o;
  o.command = {"/nonexistent/sextant"};
  o.nproc = 2;
  std::ostringstream log;
  const SupervisorResult r = supervise(o, log);
  EXPECT_EQ(r.exit_code, 127);
  EXPECT_NE(r.message.find("cannot start /nonexistent/sextant: No such file or directory"),
            std::string::npos) << r.message;
}

TEST(Supervisor, CtrlCStopsEveryRank) {
  // A SIGINT to the supervisor (what Ctrl-C sends) while 3 ranks sleep 60 s:
  // it forwards the signal to each rank's process group and returns 130.
  // SIGINT is blocked in this thread before the interrupter starts (threads
  // inherit the mask), so it can only be taken by supervise()'s signalfd.
  sigset_t sigint, old_mask;
  sigemptyset(&sigint);
  sigaddset(&sigint, SIGINT);
  pthread_sigmask(SIG_BLOCK, &sigint, &old_mask);
  std::thread interrupter([] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    ::kill(::getpid(), SIGINT);
  });
  std::ostringstream log;
  const auto start = Clock::now();
  SupervisorOptions options = shell("sleep 60", 3);
  options.grace = std::chrono::seconds(30);  // so only the forwarded SIGINT can stop them in time
  const SupervisorResult r = supervise(options, log);
  interrupter.join();
  pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  EXPECT_EQ(r.exit_code, 130);
  EXPECT_EQ(r.failed_rank, -1);
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 10.0);
  EXPECT_NE(log.str().find("sextant run: Interrupt; stopping all ranks"), std::string::npos) << log.str();
}

}  // namespace
}  // namespace sextant::engine::launch
