// `sextant run --nproc-per-node N`: starts N copies of a command on this node,
// one per GPU, and watches them.
//
// Each child gets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR
// and MASTER_PORT (launch_environment.h reads them back) and runs in its own
// process group, so a Ctrl-C reaches the supervisor once and is forwarded once.
// Their stdout passes through; their stderr is prefixed "[rank r] " and the
// last lines are kept. When one child fails (non-zero exit or a signal), the
// others get SIGTERM, then SIGKILL after the grace period, and the result
// names the failed rank with its last message. A second Ctrl-C kills at once.
#pragma once

#include <chrono>
#include <map>
#include <ostream>
#include <string>
#include <vector>

namespace sextant::engine::launch {

struct SupervisorOptions {
  std::vector<std::string> command;  // argv of each child; command[0] is found on PATH
  int nproc = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  std::map<std::string, std::string> extra_environment;
  std::chrono::milliseconds grace = std::chrono::seconds(10);
};

struct SupervisorResult {
  int exit_code = 0;     // 0 when every rank succeeded; else the first failure's code (128+signal)
  int failed_rank = -1;  // the first rank that failed, -1 if none (or stopped by Ctrl-C)
  std::string message;   // "rank 2 exited with code 3: <its last stderr line>"; empty on success
};

/// Runs the children to the end; writes their prefixed stderr and its own
/// notes to `log`. Throws std::runtime_error when a child cannot be started.
SupervisorResult supervise(const SupervisorOptions& options, std::ostream& log);

}  // namespace sextant::engine::launch
