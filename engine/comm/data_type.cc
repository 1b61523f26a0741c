#include "engine/comm/communicator.h"

namespace sextant::engine::comm {

std::size_t bytes_of(DataType type) { return type == DataType::kBf16 ? 2 : 4; }

std::string_view to_string(DataType type) { return type == DataType::kBf16 ? "bf16" : "fp32"; }

}  // namespace sextant::engine::comm
