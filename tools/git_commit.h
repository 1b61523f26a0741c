// The commit a binary was built from, as `sextant --version` prints it and every
// measured profile records it (measurement.commit): the checkout's HEAD at build
// time, "-dirty" appended when tracked files differed from it, "unknown" outside
// a git checkout. Stamped on every build by cmake/write_git_commit.cmake (an
// earlier stamp taken when CMake configured went stale on incremental builds:
// a 2026-12-07 profile recorded a commit two behind the binary's).
#pragma once

namespace sextant {

const char* git_commit();

}  // namespace sextant
