// Megatron-LM's MMapIndexedDataset format, the facts reader and writer share.
//
// Source: Megatron-LM megatron/core/datasets/indexed_dataset.py (_IndexWriter,
// _IndexReader, DType) and tools/preprocess_data.py (file names). A dataset is
// a pair of files with one prefix:
//
//   <prefix>.bin  the token ids of every sequence, back to back, in `dtype`
//   <prefix>.idx  little-endian:
//       offset  size     field
//       0       9        magic "MMIDIDX\0\0"
//       9       8        uint64 version, 1
//       17      1        uint8 dtype code (TokenDtype)
//       18      8        uint64 sequence count n
//       26      8        uint64 document count d (one more than the documents:
//                        document_indices starts with 0)
//       34      4n       int32 sequence lengths, in tokens
//       34+4n   8n       int64 sequence pointers, byte offsets into .bin
//       34+12n  8d       int64 document indices: document k is sequences
//                        [indices[k], indices[k+1]); the last equals n
//      (34+12n+8d n      int8 sequence modes, multimodal datasets only)
//
// The arrays start at offset 34, so they are not aligned to their element size;
// read them with memcpy, never through a cast pointer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace sextant::engine::data {

/// Megatron's DType enum: the numeric code stored in the .idx header.
enum class TokenDtype : uint8_t {
  kUint8 = 1,
  kInt8 = 2,
  kInt16 = 3,
  kInt32 = 4,
  kInt64 = 5,
  kFloat64 = 6,
  kFloat32 = 7,
  kUint16 = 8,
};

inline constexpr char kIndexMagic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', '\0', '\0'};
inline constexpr uint64_t kIndexVersion = 1;
inline constexpr size_t kIndexHeaderBytes = 34;  // 9 + 8 + 1 + 8 + 8

/// The dtype of a code read from a file; nullopt when the code is not one of Megatron's.
std::optional<TokenDtype> token_dtype_from_code(uint8_t code);
/// Bytes per element: 1, 2, 4 or 8.
size_t token_dtype_bytes(TokenDtype dtype);
/// NumPy's name for it ("uint16"), as Megatron prints it.
std::string_view token_dtype_name(TokenDtype dtype);
/// Megatron's DType.optimal_dtype: uint16 when the vocabulary has fewer than 65,500
/// ids, else int32.
TokenDtype optimal_token_dtype(int64_t vocab_size);

/// The prefix preprocess_data.py writes for one JSON key at document level:
/// "<output_prefix>_<json_key>_document".
std::string document_dataset_prefix(const std::string& output_prefix, const std::string& json_key);
inline std::string bin_path(const std::string& prefix) { return prefix + ".bin"; }
inline std::string idx_path(const std::string& prefix) { return prefix + ".idx"; }

}  // namespace sextant::engine::data
