// A whole file mapped read-only into memory (POSIX mmap), unmapped on destruction.
//
// The mapping is shared with the page cache, so many processes reading one
// dataset hold it once. A file truncated by someone else while it is mapped
// makes reads past the new end fault (SIGBUS); nothing here can prevent that.
#pragma once

#include <cstddef>
#include <span>
#include <string>

namespace sextant::engine::data {

class MappedFile {
 public:
  /// Maps `path`; throws DataError naming the file and the system's reason.
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  /// The file's bytes; empty for an empty file (which is not mapped: mmap refuses length 0).
  std::span<const std::byte> bytes() const { return {data_, size_bytes_}; }
  size_t size_bytes() const { return size_bytes_; }
  const std::string& path() const { return path_; }

 private:
  void unmap() noexcept;

  std::string path_;
  const std::byte* data_ = nullptr;
  size_t size_bytes_ = 0;
};

}  // namespace sextant::engine::data
