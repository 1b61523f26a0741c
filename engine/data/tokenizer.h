// What `sextant preprocess` needs from a tokenizer: text to token ids and back,
// the vocabulary size (which sets the dataset's dtype) and the end-of-document
// id Megatron's --append-eod appends. ByteTokenizer and Gpt2BpeTokenizer
// implement it; preprocess_jsonl picks one from its options.
//
// Implementations are immutable once built, so one may be shared between threads.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace sextant::engine::data {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  /// For messages: "byte tokenizer", "GPT-2 BPE tokenizer".
  virtual std::string description() const = 0;
  /// One more than the largest id encode or end_of_document can return.
  virtual int64_t vocab_size() const = 0;
  virtual int32_t end_of_document() const = 0;

  /// Appends the tokens of `text` (any bytes) to `out`. Never fails.
  virtual void encode(std::string_view text, std::vector<int32_t>& out) const = 0;
  /// The bytes the tokens stand for; end-of-document tokens stand for no text.
  /// Throws std::out_of_range for an id the vocabulary does not have.
  virtual std::string decode(std::span<const int32_t> tokens) const = 0;
};

}  // namespace sextant::engine::data
