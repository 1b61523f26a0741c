// GPT-2's byte-level BPE tokenizer (Radford et al. 2019, "Language Models are
// Unsupervised Multitask Learners", sec. 2.2), as OpenAI's encoder.py and
// Megatron's GPT2BPETokenizer apply it to a document:
//   1. split the text into pieces with GPT-2's pre-tokenizer regex
//      (gpt2_pretokenize below);
//   2. write each piece as one symbol per byte;
//   3. repeatedly take the adjacent pair whose merge comes first in merges.txt
//      and merge all its occurrences, left to right, until no adjacent pair has
//      a merge;
//   4. look the symbols up in vocab.json.
// vocab.json and merges.txt spell bytes with GPT-2's bytes_to_unicode
// characters: the printable bytes as themselves, the others (space, control
// characters, ...) as U+0100 onwards, so space is "Ġ" and newline "Ċ".
//
// Departures from encoder.py, none of which changes the ids of GPT-2's files:
// - the pre-tokenizer's letter/number/whitespace classes are exact for ASCII,
//   Latin-1 and common punctuation, symbol, emoji and digit blocks, and
//   approximate elsewhere (see gpt2_pretokenize);
// - decode returns the raw bytes (encoder.py replaces invalid UTF-8 with
//   U+FFFD), and the end-of-document token decodes to nothing, as for every
//   Tokenizer (encoder.py would print "<|endoftext|>");
// - the files are checked when loaded: every merge must join two tokens of
//   vocab.json into a third, ids must be unique, and all 256 byte tokens and
//   "<|endoftext|>" must be there, so encode can never fail.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/data/tokenizer.h"

namespace sextant::engine::data {

class Gpt2BpeTokenizer : public Tokenizer {
 public:
  /// GPT-2's end-of-text token, Megatron's end-of-document (--append-eod).
  static constexpr std::string_view kEndOfText = "<|endoftext|>";

  /// Reads GPT-2's vocab.json (an object from token strings to ids) and
  /// merges.txt (one "left right" pair per line, in merge order; a first line
  /// starting with "#version" is skipped, as GPT-2's file has one). Throws
  /// DataError "file[:line[:col]]: reason" for a file that cannot be read or
  /// breaks the rules in the file comment.
  static Gpt2BpeTokenizer from_files(const std::string& vocab_path, const std::string& merges_path);
  /// The same from the files' contents; the names appear in error messages.
  static Gpt2BpeTokenizer from_strings(std::string_view vocab_json, std::string_view merges_txt,
                                       const std::string& vocab_name = "vocab.json",
                                       const std::string& merges_name = "merges.txt");

  std::string description() const override { return "GPT-2 BPE tokenizer"; }
  /// The largest id in vocab.json plus one (GPT-2's files: 50257).
  int64_t vocab_size() const override { return vocab_size_; }
  int32_t end_of_document() const override { return end_of_document_; }
  /// Lines of merges.txt used (GPT-2's: 50000).
  int64_t merge_count() const { return static_cast<int64_t>(merge_results_.size()); }

  void encode(std::string_view text, std::vector<int32_t>& out) const override;
  std::vector<int32_t> encode(std::string_view text) const;
  std::string decode(std::span<const int32_t> tokens) const override;

 private:
  Gpt2BpeTokenizer() = default;
  // Steps 2-4 for one piece of the pre-tokenizer.
  void encode_piece(std::string_view piece, std::vector<int32_t>& out) const;
  // The rank of merging `left` and `right`, or kNoMerge.
  int32_t rank_of(int32_t left, int32_t right) const;

  int64_t vocab_size_ = 0;
  int32_t end_of_document_ = 0;
  std::array<int32_t, 256> byte_ids_{};  // the id of each byte's single-byte token
  std::vector<std::string> bytes_of_;    // id -> the raw bytes it stands for
  // (left id << 32 | right id) -> rank, the 0-based line of the merge in merges.txt
  std::unordered_map<uint64_t, int32_t> ranks_;
  std::vector<int32_t> merge_results_;  // rank -> id of the merged token
};

/// GPT-2's pre-tokenizer: the matches, in order, of
///   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
/// over `text`, as views into it; together they are `text` again. Written by
/// hand over UTF-8. \s is Unicode's White_Space (as Python's regex module has
/// it). Letters (\p{L}) and numbers (\p{N}) are exact for ASCII and Latin-1;
/// beyond, a table marks as non-letters the combining diacritics, general and
/// CJK punctuation, currency, super/subscript and enclosed digits, number
/// forms, arrows, math, box drawing, dingbats, fullwidth punctuation and digits,
/// emoji and a few scripts' digits; every other code point is taken for a
/// letter. That approximation (checked against Python's regex module with
/// Unicode 14) misreads about 6,600 of the ~145,000 assigned code points
/// outside private use, mostly rare symbols, the combining marks of Indic
/// scripts and digits of other scripts, and all private-use ones. Bytes that are
/// not valid UTF-8 are taken one at a time as punctuation.
std::vector<std::string_view> gpt2_pretokenize(std::string_view text);

/// GPT-2's bytes_to_unicode: the character, in UTF-8, that names byte `b` in
/// vocab.json and merges.txt ("!" for '!', "Ġ" (U+0120) for ' ').
std::string gpt2_byte_to_unicode(uint8_t b);

}  // namespace sextant::engine::data
