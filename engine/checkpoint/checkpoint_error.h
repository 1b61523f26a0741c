// The one way the checkpoint code reports a problem with a file: a
// sim::ConfigError (exit code 2 in tools/) naming the file and the reason.
#pragma once

#include <string>

namespace sextant::engine::checkpoint {

[[noreturn]] void throw_checkpoint_error(const std::string& file, const std::string& reason);
/// The same, with strerror(errno) appended: "cannot open: No such file or directory".
[[noreturn]] void throw_system_error(const std::string& file, const std::string& what);

}  // namespace sextant::engine::checkpoint
