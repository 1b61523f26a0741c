// Runs the built `sextant` binary as a user would, in a test's folder, and
// returns its exit code, stdout and stderr. Needs SEXTANT_BINARY (tests/CMakeLists.txt).
#pragma once

#include <sys/wait.h>

#include <cstdlib>
#include <string>

#include "tests/support/temp_dir.h"

namespace sextant::testing {

struct CommandResult {
  int exit_code;
  std::string out, err;
};

/// `sextant <arguments>` with `dir` as the working folder.
inline CommandResult run_sextant(const TempDir& dir, const std::string& arguments) {
  const std::string command = "cd '" + dir.path().string() + "' && '" SEXTANT_BINARY "' " +
                              arguments + " >stdout.txt 2>stderr.txt";
  const int status = std::system(command.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, read_file(dir.file("stdout.txt")),
          read_file(dir.file("stderr.txt"))};
}

}  // namespace sextant::testing
