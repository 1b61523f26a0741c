#include "engine/data/indexed_dataset_writer.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "engine/data/data_error.h"

namespace sextant::engine::data {

namespace {
std::string partial(const std::string& path) { return path + ".partial"; }

template <typename T>
void append_raw(std::vector<char>& out, T value) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));  // little-endian hosts only (x86-64, aarch64)
  out.insert(out.end(), bytes, bytes + sizeof(T));
}

// Appends `tokens` as T; returns the position of the first token T cannot hold, or -1.
template <typename T>
int64_t append_as(std::span<const int32_t> tokens, std::vector<char>& out) {
  for (size_t k = 0; k < tokens.size(); ++k) {
    const int64_t id = tokens[k];
    if (id < int64_t{std::numeric_limits<T>::min()} || id > int64_t{std::numeric_limits<T>::max()}) {
      return static_cast<int64_t>(k);
    }
    append_raw(out, static_cast<T>(id));
  }
  return -1;
}

void rename_or_throw(const std::string& from, const std::string& to) {
  if (std::rename(from.c_str(), to.c_str()) != 0) {
    throw DataError(to, "cannot rename " + from + " to it: " + std::strerror(errno));
  }
}
}  // namespace

IndexedDatasetWriter::IndexedDatasetWriter(std::string prefix, TokenDtype dtype)
    : prefix_(std::move(prefix)), dtype_(dtype) {
  if (dtype == TokenDtype::kFloat32 || dtype == TokenDtype::kFloat64) {
    throw std::invalid_argument("IndexedDatasetWriter: token ids need an integer dtype, not " +
                                std::string(token_dtype_name(dtype)));
  }
  const std::string path = partial(bin_path(prefix_));
  bin_.open(path, std::ios::binary | std::ios::trunc);
  if (!bin_) throw DataError(path, std::string("cannot create: ") + std::strerror(errno));
}

IndexedDatasetWriter::~IndexedDatasetWriter() {
  if (!finished_) remove_partial_files();
}

void IndexedDatasetWriter::add_document(std::span<const int32_t> tokens) {
  if (finished_) throw std::logic_error("IndexedDatasetWriter: add_document after finish");
  if (tokens.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    throw DataError(bin_path(prefix_), "document " + std::to_string(num_documents()) + " has " +
                                           std::to_string(tokens.size()) +
                                           " tokens; the .idx stores lengths as int32");
  }
  buffer_.clear();
  int64_t bad = -1;
  switch (dtype_) {
    case TokenDtype::kUint8: bad = append_as<uint8_t>(tokens, buffer_); break;
    case TokenDtype::kInt8: bad = append_as<int8_t>(tokens, buffer_); break;
    case TokenDtype::kInt16: bad = append_as<int16_t>(tokens, buffer_); break;
    case TokenDtype::kUint16: bad = append_as<uint16_t>(tokens, buffer_); break;
    case TokenDtype::kInt32: bad = append_as<int32_t>(tokens, buffer_); break;
    case TokenDtype::kInt64: bad = append_as<int64_t>(tokens, buffer_); break;
    case TokenDtype::kFloat32:
    case TokenDtype::kFloat64: break;  // refused by the constructor
  }
  if (bad >= 0) {
    throw DataError(bin_path(prefix_), "document " + std::to_string(num_documents()) + " token " +
                                           std::to_string(bad) + " is " +
                                           std::to_string(tokens[static_cast<size_t>(bad)]) +
                                           ", which " + std::string(token_dtype_name(dtype_)) +
                                           " cannot hold");
  }
  bin_.write(buffer_.data(), static_cast<std::streamsize>(buffer_.size()));
  if (!bin_) {
    throw DataError(partial(bin_path(prefix_)), std::string("write failed: ") + std::strerror(errno));
  }
  // As preprocess_data.py: a document of no tokens has no sequence, but is a document.
  if (!tokens.empty()) sequence_lengths_.push_back(static_cast<int32_t>(tokens.size()));
  document_indices_.push_back(static_cast<int64_t>(sequence_lengths_.size()));
  num_tokens_ += static_cast<int64_t>(tokens.size());
}

int64_t IndexedDatasetWriter::idx_bytes() const {
  return static_cast<int64_t>(kIndexHeaderBytes + 12 * sequence_lengths_.size() +
                              8 * document_indices_.size());
}

void IndexedDatasetWriter::write_index(const std::string& path) const {
  std::vector<char> out;
  out.reserve(static_cast<size_t>(idx_bytes()));
  out.insert(out.end(), kIndexMagic, kIndexMagic + sizeof kIndexMagic);
  append_raw<uint64_t>(out, kIndexVersion);
  append_raw<uint8_t>(out, static_cast<uint8_t>(dtype_));
  append_raw<uint64_t>(out, sequence_lengths_.size());
  append_raw<uint64_t>(out, document_indices_.size());
  for (int32_t length : sequence_lengths_) append_raw(out, length);
  // Megatron's _IndexWriter._sequence_pointers: byte offsets, back to back.
  int64_t offset_bytes = 0;
  for (int32_t length : sequence_lengths_) {
    append_raw(out, offset_bytes);
    offset_bytes += int64_t{length} * static_cast<int64_t>(token_dtype_bytes(dtype_));
  }
  for (int64_t index : document_indices_) append_raw(out, index);

  std::ofstream idx(path, std::ios::binary | std::ios::trunc);
  if (!idx) throw DataError(path, std::string("cannot create: ") + std::strerror(errno));
  idx.write(out.data(), static_cast<std::streamsize>(out.size()));
  idx.close();
  if (!idx) throw DataError(path, std::string("write failed: ") + std::strerror(errno));
}

void IndexedDatasetWriter::finish() {
  if (finished_) throw std::logic_error("IndexedDatasetWriter: finish called twice");
  bin_.close();
  if (!bin_) {
    throw DataError(partial(bin_path(prefix_)), std::string("write failed: ") + std::strerror(errno));
  }
  write_index(partial(idx_path(prefix_)));
  rename_or_throw(partial(bin_path(prefix_)), bin_path(prefix_));
  rename_or_throw(partial(idx_path(prefix_)), idx_path(prefix_));
  finished_ = true;
}

void IndexedDatasetWriter::remove_partial_files() noexcept {
  if (bin_.is_open()) bin_.close();
  std::remove(partial(bin_path(prefix_)).c_str());
  std::remove(partial(idx_path(prefix_)).c_str());
}

}  // namespace sextant::engine::data
