// Loose JSON lines → a Megatron indexed dataset, as Megatron's
// tools/preprocess_data.py does at document level for one --json-keys key:
// one document (and one sequence) per line, named
// "<output_prefix>_<json_key>_document.{bin,idx}", dtype from the vocabulary
// size, the end-of-document token appended to each non-empty document when asked.
#pragma once

#include <cstdint>
#include <string>

namespace sextant::engine::data {

struct PreprocessOptions {
  std::string input_path;     // JSON lines
  std::string json_key = "text";
  std::string output_prefix;  // the dataset goes to document_dataset_prefix(output_prefix, json_key)
  bool append_eod = false;    // Megatron's --append-eod
};

struct PreprocessStats {
  std::string dataset_prefix;  // where the dataset was written, without .bin/.idx
  int64_t documents = 0;
  int64_t tokens = 0;
  int64_t input_bytes = 0;
  int64_t bin_bytes = 0;
  int64_t idx_bytes = 0;
  int64_t vocab_size = 0;
};

/// Tokenizes with the byte tokenizer. Throws DataError ("file:line[:col]: reason")
/// for unreadable or malformed input; then no output file is created or replaced.
/// Creates the output prefix's folder if it is missing.
PreprocessStats preprocess_jsonl(const PreprocessOptions& options);

}  // namespace sextant::engine::data
