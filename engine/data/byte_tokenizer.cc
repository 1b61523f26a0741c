#include "engine/data/byte_tokenizer.h"

#include <stdexcept>

namespace sextant::engine::data {

void ByteTokenizer::encode(std::string_view text, std::vector<int32_t>& out) const {
  out.reserve(out.size() + text.size());
  for (char c : text) out.push_back(static_cast<unsigned char>(c));
}

std::vector<int32_t> ByteTokenizer::encode(std::string_view text) const {
  std::vector<int32_t> out;
  encode(text, out);
  return out;
}

std::string ByteTokenizer::decode(std::span<const int32_t> tokens) const {
  std::string out;
  out.reserve(tokens.size());
  for (int32_t id : tokens) {
    if (id == kEndOfDocument) continue;
    if (id < 0 || id > 255) {
      throw std::out_of_range("byte tokenizer: token id " + std::to_string(id) +
                              " is outside [0, 257)");
    }
    out.push_back(static_cast<char>(static_cast<unsigned char>(id)));
  }
  return out;
}

}  // namespace sextant::engine::data
