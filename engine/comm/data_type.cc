#include "engine/comm/communicator.h"

namespace sextant::engine::comm {

std::size_t bytes_of(DataType type) { return type == DataType::kBf16 ? 2 : 4; }

std::string_view to_string(DataType type) {
  switch (type) {
    case DataType::kBf16: return "bf16";
    case DataType::kFp32: return "fp32";
    case DataType::kInt32: return "int32";
  }
  return "unknown";
}

}  // namespace sextant::engine::comm
