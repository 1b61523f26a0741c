#include "engine/data/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "engine/data/data_error.h"

namespace sextant::engine::data {

namespace {
// Closes the descriptor on every path out; the mapping outlives it.
struct FileDescriptor {
  int fd;
  ~FileDescriptor() {
    if (fd >= 0) ::close(fd);
  }
};
}  // namespace

MappedFile::MappedFile(const std::string& path) : path_(path) {
  FileDescriptor file{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (file.fd < 0) throw DataError(path, std::string("cannot open: ") + std::strerror(errno));
  struct stat status;
  if (::fstat(file.fd, &status) != 0) {
    throw DataError(path, std::string("cannot stat: ") + std::strerror(errno));
  }
  if (!S_ISREG(status.st_mode)) throw DataError(path, "not a regular file");
  size_bytes_ = static_cast<size_t>(status.st_size);
  if (size_bytes_ == 0) return;
  void* mapping = ::mmap(nullptr, size_bytes_, PROT_READ, MAP_SHARED, file.fd, 0);
  if (mapping == MAP_FAILED) {
    size_bytes_ = 0;
    throw DataError(path, std::string("cannot map: ") + std::strerror(errno));
  }
  data_ = static_cast<const std::byte*>(mapping);
}

MappedFile::~MappedFile() { unmap(); }

MappedFile::MappedFile(MappedFile&& other) noexcept
    : path_(std::move(other.path_)),
      data_(std::exchange(other.data_, nullptr)),
      size_bytes_(std::exchange(other.size_bytes_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    unmap();
    path_ = std::move(other.path_);
    data_ = std::exchange(other.data_, nullptr);
    size_bytes_ = std::exchange(other.size_bytes_, 0);
  }
  return *this;
}

void MappedFile::unmap() noexcept {
  if (data_ != nullptr) ::munmap(const_cast<std::byte*>(data_), size_bytes_);
  data_ = nullptr;
  size_bytes_ = 0;
}

}  // namespace sextant::engine::data
