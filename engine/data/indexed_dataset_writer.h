// Writes a Megatron-LM indexed dataset (<prefix>.bin + <prefix>.idx), byte for
// byte as Megatron's IndexedDatasetBuilder does for preprocess_data.py at
// document level: each document is one sequence; an empty document adds a
// document with no sequences (Megatron skips empty sentences the same way).
//
// Nothing half-written is left under the final names: tokens go to
// "<prefix>.bin.partial", the index to "<prefix>.idx.partial", and finish()
// renames both (.bin first, then .idx). A writer destroyed without finish()
// — an error, an exception — removes its partial files.
//
// Not thread-safe; one writer per dataset.
#pragma once

#include <cstdint>
#include <fstream>
#include <span>
#include <string>
#include <vector>

#include "engine/data/indexed_dataset_format.h"

namespace sextant::engine::data {

class IndexedDatasetWriter {
 public:
  /// Starts <prefix>.bin.partial; `dtype` must be an integer type (uint16 and int32
  /// are what Megatron's tools write, see optimal_token_dtype). Throws DataError if
  /// the file cannot be created.
  IndexedDatasetWriter(std::string prefix, TokenDtype dtype);
  ~IndexedDatasetWriter();
  IndexedDatasetWriter(const IndexedDatasetWriter&) = delete;
  IndexedDatasetWriter& operator=(const IndexedDatasetWriter&) = delete;

  /// Appends one document; throws DataError if a token does not fit the dtype or
  /// the document has more than 2^31 - 1 tokens (lengths are int32 in the .idx).
  void add_document(std::span<const int32_t> tokens);

  /// Writes the index and moves both files to their final names.
  void finish();

  int64_t num_documents() const { return static_cast<int64_t>(document_indices_.size()) - 1; }
  int64_t num_tokens() const { return num_tokens_; }
  /// Bytes of the .bin so far, and of the .idx once finished.
  int64_t bin_bytes() const { return num_tokens_ * static_cast<int64_t>(token_dtype_bytes(dtype_)); }
  int64_t idx_bytes() const;

 private:
  void write_index(const std::string& path) const;
  void remove_partial_files() noexcept;

  std::string prefix_;
  TokenDtype dtype_;
  std::ofstream bin_;
  std::vector<int32_t> sequence_lengths_;
  std::vector<int64_t> document_indices_{0};
  std::vector<char> buffer_;  // one document converted to dtype_
  int64_t num_tokens_ = 0;
  bool finished_ = false;
};

}  // namespace sextant::engine::data
