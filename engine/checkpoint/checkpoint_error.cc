#include "engine/checkpoint/checkpoint_error.h"

#include <cerrno>
#include <cstring>

#include "sim/core/config_error.h"

namespace sextant::engine::checkpoint {

void throw_checkpoint_error(const std::string& file, const std::string& reason) {
  throw sim::ConfigError({{file, 0, 0, "", reason}});
}

void throw_system_error(const std::string& file, const std::string& what) {
  throw_checkpoint_error(file, what + ": " + std::strerror(errno));
}

}  // namespace sextant::engine::checkpoint
