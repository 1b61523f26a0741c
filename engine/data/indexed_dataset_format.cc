#include "engine/data/indexed_dataset_format.h"

namespace sextant::engine::data {

std::optional<TokenDtype> token_dtype_from_code(uint8_t code) {
  if (code < 1 || code > 8) return std::nullopt;
  return static_cast<TokenDtype>(code);
}

size_t token_dtype_bytes(TokenDtype dtype) {
  switch (dtype) {
    case TokenDtype::kUint8:
    case TokenDtype::kInt8: return 1;
    case TokenDtype::kInt16:
    case TokenDtype::kUint16: return 2;
    case TokenDtype::kInt32:
    case TokenDtype::kFloat32: return 4;
    case TokenDtype::kInt64:
    case TokenDtype::kFloat64: return 8;
  }
  return 0;  // unreachable for a valid enum value
}

std::string_view token_dtype_name(TokenDtype dtype) {
  switch (dtype) {
    case TokenDtype::kUint8: return "uint8";
    case TokenDtype::kInt8: return "int8";
    case TokenDtype::kInt16: return "int16";
    case TokenDtype::kInt32: return "int32";
    case TokenDtype::kInt64: return "int64";
    case TokenDtype::kFloat64: return "float64";
    case TokenDtype::kFloat32: return "float32";
    case TokenDtype::kUint16: return "uint16";
  }
  return "?";
}

TokenDtype optimal_token_dtype(int64_t vocab_size) {
  // 65,500 is Megatron's threshold (DType.optimal_dtype), kept so files match byte for byte.
  return vocab_size < 65500 ? TokenDtype::kUint16 : TokenDtype::kInt32;
}

std::string document_dataset_prefix(const std::string& output_prefix,
                                    const std::string& json_key) {
  return output_prefix + "_" + json_key + "_document";
}

}  // namespace sextant::engine::data
