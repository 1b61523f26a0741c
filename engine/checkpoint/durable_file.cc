#include "engine/checkpoint/durable_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "engine/checkpoint/checkpoint_error.h"

namespace sextant::engine::checkpoint {

DurableFile::DurableFile(const std::string& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) throw_system_error(path, "cannot create");
}

DurableFile::~DurableFile() {
  if (fd_ >= 0) ::close(fd_);
}

void DurableFile::write(const void* data, std::size_t bytes) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::write(fd_, p, bytes);
    if (n < 0) throw_system_error(path_, "cannot write");
    p += n;
    bytes -= static_cast<std::size_t>(n);
  }
}

void DurableFile::sync_and_close() {
  if (::fsync(fd_) != 0) throw_system_error(path_, "cannot fsync");
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) throw_system_error(path_, "cannot close");
}

void sync_directory(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw_system_error(path, "cannot open the folder");
  const int synced = ::fsync(fd);
  ::close(fd);
  if (synced != 0) throw_system_error(path, "cannot fsync the folder");
}

void replace_file_atomically(const std::string& path, const std::string& text) {
  const std::string temporary = path + ".tmp";
  DurableFile file(temporary);
  file.write(text.data(), text.size());
  file.sync_and_close();
  if (std::rename(temporary.c_str(), path.c_str()) != 0) throw_system_error(path, "cannot rename " + temporary + " to it");
  const std::filesystem::path folder = std::filesystem::path(path).parent_path();
  sync_directory(folder.empty() ? "." : folder.string());
}

}  // namespace sextant::engine::checkpoint
