#include "engine/data/indexed_dataset_reader.h"

#include <cstring>
#include <limits>
#include <stdexcept>

#include "engine/data/data_error.h"

namespace sextant::engine::data {

namespace {
// Little-endian load from a possibly unaligned address (the .idx arrays start at 34).
template <typename T>
T load(const std::byte* base, int64_t index = 0) {
  T value;
  std::memcpy(&value, base + index * static_cast<int64_t>(sizeof(T)), sizeof(T));
  return value;
}

void check_index(int64_t i, int64_t count, const char* what) {
  if (i < 0 || i >= count) {
    throw std::out_of_range(std::string(what) + " " + std::to_string(i) + " out of range [0, " +
                            std::to_string(count) + ")");
  }
}

std::string accepted_dtypes() {
  std::string out;
  for (uint8_t code = 1; code <= 8; ++code) {
    if (!out.empty()) out += ", ";
    out += std::to_string(code) + " " + std::string(token_dtype_name(*token_dtype_from_code(code)));
  }
  return out;
}

template <typename T>
void append_converted(std::span<const std::byte> bytes, std::vector<int32_t>& out) {
  for (size_t k = 0; k < bytes.size() / sizeof(T); ++k) {
    out.push_back(static_cast<int32_t>(load<T>(bytes.data(), static_cast<int64_t>(k))));
  }
}
}  // namespace

IndexedDatasetReader::IndexedDatasetReader(const std::string& prefix)
    : idx_(data::idx_path(prefix)), bin_(data::bin_path(prefix)) {
  validate();
}

void IndexedDatasetReader::validate() {
  const std::string& file = idx_.path();
  const std::span<const std::byte> idx = idx_.bytes();
  const uint64_t idx_size = idx.size();
  if (idx_size < kIndexHeaderBytes) {
    throw DataError(file, "truncated: " + std::to_string(idx_size) +
                              " bytes, but the header alone is 34");
  }
  if (std::memcmp(idx.data(), kIndexMagic, sizeof kIndexMagic) != 0) {
    throw DataError(file, "not a Megatron indexed dataset index: it does not start with "
                          "the magic bytes \"MMIDIDX\\0\\0\"");
  }
  const uint64_t version = load<uint64_t>(idx.data() + 9);
  if (version != kIndexVersion) {
    throw DataError(file, "version " + std::to_string(version) + " is not supported; expected 1");
  }
  const uint8_t code = load<uint8_t>(idx.data() + 17);
  const std::optional<TokenDtype> dtype = token_dtype_from_code(code);
  if (!dtype) {
    throw DataError(file, "dtype code " + std::to_string(code) + " is unknown; accepted: " +
                              accepted_dtypes());
  }
  dtype_ = *dtype;
  const uint64_t sequences = load<uint64_t>(idx.data() + 18);
  const uint64_t document_indices = load<uint64_t>(idx.data() + 26);

  // Counts larger than the file cannot be right; rejecting them first keeps the
  // size arithmetic below far from overflow (at most 20 × the file's size).
  const std::string counts = std::to_string(sequences) + " sequences and " +
                             std::to_string(document_indices) + " document indices";
  const uint64_t payload = idx_size - kIndexHeaderBytes;
  const bool counts_fit = sequences <= payload && document_indices <= payload;
  const uint64_t expected =
      counts_fit ? kIndexHeaderBytes + 12 * sequences + 8 * document_indices : 0;
  if (!counts_fit || idx_size < expected) {
    throw DataError(file, "truncated: " + counts + " need " +
                              (counts_fit ? std::to_string(expected) + " bytes"
                                          : std::string("more bytes")) +
                              ", the file has " + std::to_string(idx_size));
  }
  // Multimodal datasets append one int8 mode per sequence; they are accepted and
  // the modes ignored. Anything else after the arrays means the counts are wrong.
  if (idx_size != expected && idx_size != expected + sequences) {
    throw DataError(file, "has " + std::to_string(idx_size) + " bytes, but " + counts +
                              " need " + std::to_string(expected) + " (" +
                              std::to_string(expected + sequences) +
                              " with multimodal sequence modes)");
  }
  if (document_indices == 0) {
    throw DataError(file, "has no document indices; there is at least one, the leading 0");
  }
  num_sequences_ = static_cast<int64_t>(sequences);
  num_document_indices_ = static_cast<int64_t>(document_indices);
  lengths_ = idx.data() + kIndexHeaderBytes;
  pointers_ = lengths_ + 4 * num_sequences_;
  documents_ = pointers_ + 8 * num_sequences_;

  if (document_index(0) != 0) {
    throw DataError(file, "document index 0 is " + std::to_string(document_index(0)) +
                              "; it must be 0");
  }
  for (int64_t k = 1; k < num_document_indices_; ++k) {
    if (document_index(k) < document_index(k - 1)) {
      throw DataError(file, "document index " + std::to_string(k) + " (" +
                                std::to_string(document_index(k)) + ") is less than document index " +
                                std::to_string(k - 1) + " (" +
                                std::to_string(document_index(k - 1)) + ")");
    }
  }
  const int64_t last = document_index(num_document_indices_ - 1);
  if (last != num_sequences_) {
    throw DataError(file, "the last document index is " + std::to_string(last) +
                              "; it must equal the sequence count (" +
                              std::to_string(num_sequences_) + ")");
  }

  const int64_t element_bytes = static_cast<int64_t>(token_dtype_bytes(dtype_));
  const int64_t bin_size = static_cast<int64_t>(bin_.size_bytes());
  num_tokens_ = 0;
  for (int64_t i = 0; i < num_sequences_; ++i) {
    const int32_t length = load<int32_t>(lengths_, i);
    const int64_t offset = load<int64_t>(pointers_, i);
    // Built only on the error paths: this loop runs once per sequence.
    const auto sequence = [i] { return "sequence " + std::to_string(i); };
    if (length < 0) throw DataError(file, sequence() + " has negative length " + std::to_string(length));
    if (offset < 0 || offset % element_bytes != 0) {
      throw DataError(file, sequence() + " starts at byte " + std::to_string(offset) +
                                ", which is not a non-negative multiple of the " +
                                std::string(token_dtype_name(dtype_)) + " size (" +
                                std::to_string(element_bytes) + ")");
    }
    const int64_t length_bytes = int64_t{length} * element_bytes;  // < 2^34, no overflow
    if (offset > bin_size || length_bytes > bin_size - offset) {
      throw DataError(file, sequence() + " is bytes [" + std::to_string(offset) + ", " +
                                // offset >= 0 here; unsigned, the end cannot overflow
                                std::to_string(static_cast<uint64_t>(offset) +
                                               static_cast<uint64_t>(length_bytes)) +
                                ") of " + bin_.path() +
                                ", which has " + std::to_string(bin_size));
    }
    num_tokens_ += length;
  }
}

int64_t IndexedDatasetReader::document_index(int64_t k) const { return load<int64_t>(documents_, k); }

int32_t IndexedDatasetReader::sequence_length(int64_t i) const {
  check_index(i, num_sequences_, "sequence");
  return load<int32_t>(lengths_, i);
}

int64_t IndexedDatasetReader::sequence_offset_bytes(int64_t i) const {
  check_index(i, num_sequences_, "sequence");
  return load<int64_t>(pointers_, i);
}

IndexedDatasetReader::SequenceRange IndexedDatasetReader::document_sequences(int64_t d) const {
  check_index(d, num_documents(), "document");
  return {document_index(d), document_index(d + 1)};
}

void IndexedDatasetReader::check_dtype(TokenDtype wanted) const {
  if (wanted != dtype_) {
    throw DataError(bin_.path(), "holds " + std::string(token_dtype_name(dtype_)) +
                                     " tokens, not " + std::string(token_dtype_name(wanted)));
  }
}

std::vector<int32_t> IndexedDatasetReader::tokens(int64_t i) const {
  return tokens(i, 0, sequence_length(i));
}

std::vector<int32_t> IndexedDatasetReader::tokens(int64_t i, int64_t first, int64_t count) const {
  const int64_t length = sequence_length(i);
  if (first < 0 || count < 0 || first > length - count)
    throw std::out_of_range("IndexedDatasetReader::tokens: [" + std::to_string(first) + ", " +
                            std::to_string(first) + " + " + std::to_string(count) +
                            ") is not inside sequence " + std::to_string(i) + " of " +
                            std::to_string(length) + " tokens");
  const size_t element = token_dtype_bytes(dtype_);
  const std::span<const std::byte> bytes = bin_.bytes().subspan(
      static_cast<size_t>(sequence_offset_bytes(i)) + static_cast<size_t>(first) * element,
      static_cast<size_t>(count) * element);
  std::vector<int32_t> out;
  out.reserve(static_cast<size_t>(count));
  switch (dtype_) {
    case TokenDtype::kUint8: append_converted<uint8_t>(bytes, out); break;
    case TokenDtype::kInt8: append_converted<int8_t>(bytes, out); break;
    case TokenDtype::kInt16: append_converted<int16_t>(bytes, out); break;
    case TokenDtype::kUint16: append_converted<uint16_t>(bytes, out); break;
    case TokenDtype::kInt32: append_converted<int32_t>(bytes, out); break;
    case TokenDtype::kInt64:
      for (size_t k = 0; k < static_cast<size_t>(count); ++k) {
        const int64_t id = load<int64_t>(bytes.data(), static_cast<int64_t>(k));
        if (id < std::numeric_limits<int32_t>::min() || id > std::numeric_limits<int32_t>::max()) {
          throw DataError(bin_.path(), "sequence " + std::to_string(i) + " token " +
                                           std::to_string(first + static_cast<int64_t>(k)) +
                                           " is " + std::to_string(id) +
                                           ", outside int32's range");
        }
        out.push_back(static_cast<int32_t>(id));
      }
      break;
    case TokenDtype::kFloat32:
    case TokenDtype::kFloat64:
      throw DataError(bin_.path(), "holds " + std::string(token_dtype_name(dtype_)) +
                                       " values, not token ids; read it with sequence_as");
  }
  return out;
}

}  // namespace sextant::engine::data
