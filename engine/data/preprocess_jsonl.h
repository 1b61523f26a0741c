// Loose JSON lines → a Megatron indexed dataset, as Megatron's
// tools/preprocess_data.py does at document level for one --json-keys key:
// one document (and one sequence) per line, named
// "<output_prefix>_<json_key>_document.{bin,idx}", dtype from the vocabulary
// size, the end-of-document token appended to each non-empty document when asked.
// Tokenizers: bytes (the default) or GPT-2's BPE from its vocab.json and merges.txt.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "engine/data/tokenizer.h"

namespace sextant::engine::data {

struct PreprocessOptions {
  std::string input_path;     // JSON lines
  std::string json_key = "text";
  std::string output_prefix;  // the dataset goes to document_dataset_prefix(output_prefix, json_key)
  bool append_eod = false;    // Megatron's --append-eod
  /// Megatron's --tokenizer-type: "byte" or "GPT2BPETokenizer". Empty picks
  /// GPT2BPETokenizer when vocab_file or merges_file is set, byte otherwise.
  std::string tokenizer_type;
  std::string vocab_file;   // GPT-2's vocab.json (--vocab-file); GPT2BPETokenizer only
  std::string merges_file;  // GPT-2's merges.txt (--merge-file); GPT2BPETokenizer only
};

inline constexpr const char* kByteTokenizerType = "byte";
inline constexpr const char* kGpt2BpeTokenizerType = "GPT2BPETokenizer";

struct PreprocessStats {
  std::string dataset_prefix;  // where the dataset was written, without .bin/.idx
  int64_t documents = 0;
  int64_t tokens = 0;
  int64_t input_bytes = 0;
  int64_t bin_bytes = 0;
  int64_t idx_bytes = 0;
  int64_t vocab_size = 0;
  std::string tokenizer;  // its description: "byte tokenizer", "GPT-2 BPE tokenizer"
};

/// The tokenizer `options` ask for. Throws DataError when the tokenizer options
/// conflict (the message names the options, and the file given, if any: GPT-2
/// BPE needs both files, the byte tokenizer neither) or a file cannot be read
/// or is malformed ("file[:line[:col]]: reason").
std::unique_ptr<Tokenizer> make_tokenizer(const PreprocessOptions& options);

/// Tokenizes with make_tokenizer(options). Throws DataError ("file[:line[:col]]:
/// reason") for tokenizer problems, unreadable or malformed input and input
/// without a single document (an empty or blank file); then no
/// output file is created or replaced. Creates the output prefix's folder if
/// it is missing.
PreprocessStats preprocess_jsonl(const PreprocessOptions& options);

}  // namespace sextant::engine::data
