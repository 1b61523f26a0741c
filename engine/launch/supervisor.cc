#include "engine/launch/supervisor.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <stdexcept>

extern char** environ;

namespace sextant::engine::launch {
namespace {

using Clock = std::chrono::steady_clock;
constexpr std::size_t kTailLines = 20;

struct Child {
  pid_t pid = -1;
  int stderr_fd = -1;  // read end; -1 once closed
  bool running = true;
  int exit_code = 0;
  std::string partial;            // stderr text after the last newline
  std::deque<std::string> tail;  // its last lines
};

// "KEY=value" strings of this process's environment with `overrides` applied.
std::vector<std::string> child_environment(const std::map<std::string, std::string>& overrides) {
  std::vector<std::string> out;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry(*e);
    if (!overrides.contains(entry.substr(0, entry.find('=')))) out.push_back(entry);
  }
  for (const auto& [key, value] : overrides) out.push_back(key + "=" + value);
  return out;
}

std::vector<char*> pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (std::string& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

void emit_lines(Child& c, int rank, const std::string& text, bool prefix, std::ostream& log) {
  c.partial += text;
  std::size_t start = 0, newline;
  while ((newline = c.partial.find('\n', start)) != std::string::npos) {
    std::string line = c.partial.substr(start, newline - start);
    log << (prefix ? "[rank " + std::to_string(rank) + "] " : "") << line << '\n';
    if (!line.empty()) {
      c.tail.push_back(std::move(line));
      if (c.tail.size() > kTailLines) c.tail.pop_front();
    }
    start = newline + 1;
  }
  c.partial.erase(0, start);
  log.flush();
}

std::string describe(int rank, int status) {
  if (WIFSIGNALED(status))
    return "rank " + std::to_string(rank) + " was killed by signal " +
           std::to_string(WTERMSIG(status)) + " (" + strsignal(WTERMSIG(status)) + ")";
  return "rank " + std::to_string(rank) + " exited with code " + std::to_string(WEXITSTATUS(status));
}

}  // namespace

SupervisorResult supervise(const SupervisorOptions& o, std::ostream& log) {
  if (o.command.empty() || o.nproc < 1)
    throw std::invalid_argument("supervise: needs a command and at least one process");
  // Ctrl-C and SIGTERM arrive through a descriptor, beside the children's stderr.
  sigset_t mask, old_mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGINT);
  sigaddset(&mask, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &mask, &old_mask);
  const int signal_fd = signalfd(-1, &mask, SFD_CLOEXEC);

  std::vector<Child> children(o.nproc);
  std::vector<std::string> argv_strings = o.command;
  std::vector<char*> argv = pointers(argv_strings);
  for (int r = 0; r < o.nproc; ++r) {
    std::map<std::string, std::string> env = o.extra_environment;
    env["RANK"] = std::to_string(r);
    env["LOCAL_RANK"] = std::to_string(r);
    env["WORLD_SIZE"] = std::to_string(o.nproc);
    env["LOCAL_WORLD_SIZE"] = std::to_string(o.nproc);
    env["MASTER_ADDR"] = o.master_addr;
    env["MASTER_PORT"] = std::to_string(o.master_port);
    std::vector<std::string> env_strings = child_environment(env);
    std::vector<char*> envp = pointers(env_strings);
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
    const pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
    if (pid == 0) {
      ::setpgid(0, 0);
      ::dup2(fds[1], STDERR_FILENO);
      // The child takes Ctrl-C and SIGTERM itself, whatever the caller had blocked.
      sigset_t child_mask = old_mask;
      sigdelset(&child_mask, SIGINT);
      sigdelset(&child_mask, SIGTERM);
      pthread_sigmask(SIG_SETMASK, &child_mask, nullptr);
      ::execvpe(argv[0], argv.data(), envp.data());
      const std::string why = "cannot start " + argv_strings[0] + ": " + std::strerror(errno) + "\n";
      [[maybe_unused]] const ssize_t n = ::write(STDERR_FILENO, why.data(), why.size());
      ::_exit(127);
    }
    ::close(fds[1]);
    ::fcntl(fds[0], F_SETFL, ::fcntl(fds[0], F_GETFL, 0) | O_NONBLOCK);
    children[r].pid = pid;
    children[r].stderr_fd = fds[0];
  }

  SupervisorResult result;
  bool stopping = false, interrupted = false;
  Clock::time_point kill_at = Clock::time_point::max();
  // Each child leads its own process group: signal the group, so whatever it
  // started (a shell's commands) stops too.
  auto signal_others = [&](int sig) {
    for (const Child& c : children)
      if (c.running || c.stderr_fd >= 0) ::kill(-c.pid, sig);
  };
  Clock::time_point all_exited_at = Clock::time_point::max();
  const bool prefix = o.nproc > 1;
  for (;;) {
    std::vector<pollfd> fds{{signal_fd, POLLIN, 0}};
    std::vector<int> ranks_of{-1};
    for (int r = 0; r < o.nproc; ++r)
      if (children[r].stderr_fd >= 0) fds.push_back({children[r].stderr_fd, POLLIN, 0}), ranks_of.push_back(r);
    const bool any_running = std::any_of(children.begin(), children.end(), [](const Child& c) { return c.running; });
    if (!any_running && fds.size() == 1) break;
    if (!any_running && all_exited_at == Clock::time_point::max()) all_exited_at = Clock::now();
    if (Clock::now() - all_exited_at > std::chrono::seconds(1)) {
      // Something the children started still holds their stderr: stop reading it.
      for (Child& c : children)
        if (c.stderr_fd >= 0) ::close(c.stderr_fd), c.stderr_fd = -1;
      break;
    }
    ::poll(fds.data(), fds.size(), 100);
    for (std::size_t i = 1; i < fds.size(); ++i) {
      if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      Child& c = children[ranks_of[i]];
      char buffer[4096];
      const ssize_t n = ::read(c.stderr_fd, buffer, sizeof buffer);
      if (n > 0) {
        emit_lines(c, ranks_of[i], std::string(buffer, static_cast<std::size_t>(n)), prefix, log);
      } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
        ::close(c.stderr_fd);
        c.stderr_fd = -1;
        if (!c.partial.empty()) emit_lines(c, ranks_of[i], "\n", prefix, log);
      }
    }
    if (fds[0].revents & POLLIN) {
      signalfd_siginfo info;
      [[maybe_unused]] const ssize_t n = ::read(signal_fd, &info, sizeof info);
      if (!stopping) {
        stopping = interrupted = true;
        kill_at = Clock::now() + o.grace;
        log << "sextant run: " << strsignal(static_cast<int>(info.ssi_signo))
            << "; stopping all ranks (again to kill them at once)\n";
        signal_others(static_cast<int>(info.ssi_signo));
      } else {
        signal_others(SIGKILL);
      }
    }
    for (int r = 0; r < o.nproc; ++r) {
      Child& c = children[r];
      int status = 0;
      if (!c.running || ::waitpid(c.pid, &status, WNOHANG) != c.pid) continue;
      c.running = false;
      c.exit_code = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
      if (c.exit_code == 0 || stopping) continue;
      // The first failure: remember it and stop the others.
      while (c.stderr_fd >= 0) {  // its last words, which may still sit in the pipe
        char buffer[4096];
        const ssize_t n = ::read(c.stderr_fd, buffer, sizeof buffer);
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) break;  // held open by a grandchild
        if (n <= 0) {
          ::close(c.stderr_fd);
          c.stderr_fd = -1;
          if (!c.partial.empty()) emit_lines(c, r, "\n", prefix, log);
        } else {
          emit_lines(c, r, std::string(buffer, static_cast<std::size_t>(n)), prefix, log);
        }
      }
      result.exit_code = c.exit_code;
      result.failed_rank = r;
      result.message = describe(r, status) + (c.tail.empty() ? "" : ": " + c.tail.back());
      stopping = true;
      kill_at = Clock::now() + o.grace;
      log << "sextant run: " << result.message << (o.nproc > 1 ? "; stopping the other ranks" : "")
          << "\n";
      signal_others(SIGTERM);
    }
    if (stopping && Clock::now() >= kill_at) {
      signal_others(SIGKILL);
      kill_at = Clock::time_point::max();
    }
  }
  ::close(signal_fd);
  pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  if (interrupted && result.failed_rank < 0) {
    result.exit_code = 130;
    result.message = "stopped by a signal (Ctrl-C or SIGTERM)";
  }
  return result;
}

}  // namespace sextant::engine::launch
