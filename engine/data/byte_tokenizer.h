// Byte-level tokenizer: each byte of the UTF-8 text is one token (its value,
// 0-255), plus an end-of-document token, 256. Vocabulary 257.
//
// It needs no vocabulary file and never fails, which makes it the default for
// `sextant preprocess` and the tests; GPT-2 BPE would give ~4× fewer tokens on
// English text.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/data/tokenizer.h"

namespace sextant::engine::data {

class ByteTokenizer : public Tokenizer {
 public:
  static constexpr int32_t kEndOfDocument = 256;
  static constexpr int64_t kVocabSize = 257;

  std::string description() const override { return "byte tokenizer"; }
  int64_t vocab_size() const override { return kVocabSize; }
  int32_t end_of_document() const override { return kEndOfDocument; }

  /// One token per byte; appends to `out`.
  void encode(std::string_view text, std::vector<int32_t>& out) const override;
  std::vector<int32_t> encode(std::string_view text) const;
  /// The bytes again; end-of-document tokens stand for no text. Throws
  /// std::out_of_range for an id outside [0, 257).
  std::string decode(std::span<const int32_t> tokens) const override;
};

}  // namespace sextant::engine::data
