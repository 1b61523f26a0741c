#include "engine/comm/comm_error.h"

#include <utility>

namespace sextant::engine::comm {

CommError::CommError(std::string collective, std::string group, int rank, int size,
                     std::string status_name, const std::string& description)
    : std::runtime_error(collective + " on group '" + group + "' (rank " + std::to_string(rank) +
                         " of " + std::to_string(size) + "): " + status_name + ": " + description),
      collective_(std::move(collective)),
      group_(std::move(group)),
      status_name_(std::move(status_name)) {}

}  // namespace sextant::engine::comm
