// Reads a Megatron-LM indexed dataset (<prefix>.idx + <prefix>.bin) by memory map.
//
// Everything is checked when the dataset is opened — magic, version, dtype,
// the .idx length against its counts, document indices, and every sequence's
// byte range against the .bin — so a truncated or corrupt file is a DataError
// naming the file and what is wrong, never a crash later. Opening costs one pass
// over the index (12 bytes per sequence); token data is not read until asked for.
//
// Thread-safety: after construction every member is const and may be called
// from many threads at once.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engine/data/indexed_dataset_format.h"
#include "engine/data/mapped_file.h"

namespace sextant::engine::data {

/// The TokenDtype whose elements are a T (sequence_as<T>).
template <typename T>
constexpr TokenDtype token_dtype_of();
template <> constexpr TokenDtype token_dtype_of<uint8_t>() { return TokenDtype::kUint8; }
template <> constexpr TokenDtype token_dtype_of<int8_t>() { return TokenDtype::kInt8; }
template <> constexpr TokenDtype token_dtype_of<int16_t>() { return TokenDtype::kInt16; }
template <> constexpr TokenDtype token_dtype_of<int32_t>() { return TokenDtype::kInt32; }
template <> constexpr TokenDtype token_dtype_of<int64_t>() { return TokenDtype::kInt64; }
template <> constexpr TokenDtype token_dtype_of<double>() { return TokenDtype::kFloat64; }
template <> constexpr TokenDtype token_dtype_of<float>() { return TokenDtype::kFloat32; }
template <> constexpr TokenDtype token_dtype_of<uint16_t>() { return TokenDtype::kUint16; }

class IndexedDatasetReader {
 public:
  /// Opens <prefix>.idx and <prefix>.bin; throws DataError if either is unreadable,
  /// malformed, or the two disagree.
  explicit IndexedDatasetReader(const std::string& prefix);

  TokenDtype dtype() const { return dtype_; }
  int64_t num_sequences() const { return num_sequences_; }
  /// Documents, i.e. the document-index entries less the leading 0.
  int64_t num_documents() const { return num_document_indices_ - 1; }
  /// Tokens in all sequences together.
  int64_t num_tokens() const { return num_tokens_; }

  /// Tokens in sequence `i`, 0 <= i < num_sequences() (std::out_of_range otherwise).
  int32_t sequence_length(int64_t i) const;
  /// Where sequence `i` starts in the .bin, in bytes.
  int64_t sequence_offset_bytes(int64_t i) const;
  /// Document `d` is the sequences [first, last); 0 <= d < num_documents().
  struct SequenceRange {
    int64_t first;
    int64_t last;
  };
  SequenceRange document_sequences(int64_t d) const;

  /// Sequence `i` in place, as stored; throws DataError unless T matches dtype().
  template <typename T>
  std::span<const T> sequence_as(int64_t i) const {
    check_dtype(token_dtype_of<T>());
    // The constructor checked that every sequence lies inside the .bin and starts
    // at a multiple of its element size; the mapping is page-aligned, so this
    // pointer is aligned for T.
    const std::byte* start = bin_.bytes().data() + sequence_offset_bytes(i);
    return {reinterpret_cast<const T*>(start), static_cast<size_t>(sequence_length(i))};
  }

  /// Sequence `i` as int32 token ids, converted from any integer dtype; throws
  /// DataError for float dtypes and for int64 ids outside int32's range.
  std::vector<int32_t> tokens(int64_t i) const;
  /// Tokens [first, first + count) of sequence `i` only, converted as tokens(i) does;
  /// std::out_of_range when the range is not inside the sequence.
  std::vector<int32_t> tokens(int64_t i, int64_t first, int64_t count) const;

  const std::string& idx_path() const { return idx_.path(); }
  const std::string& bin_path() const { return bin_.path(); }

 private:
  void validate();
  void check_dtype(TokenDtype wanted) const;
  int64_t document_index(int64_t k) const;

  MappedFile idx_;
  MappedFile bin_;
  TokenDtype dtype_ = TokenDtype::kUint16;
  int64_t num_sequences_ = 0;
  int64_t num_document_indices_ = 0;
  int64_t num_tokens_ = 0;
  // Start of each array inside the .idx mapping (unaligned: read with memcpy).
  const std::byte* lengths_ = nullptr;   // int32[num_sequences_]
  const std::byte* pointers_ = nullptr;  // int64[num_sequences_]
  const std::byte* documents_ = nullptr; // int64[num_document_indices_]
};

}  // namespace sextant::engine::data
