// Files that survive a crash once written: data fsynced before the file is
// used, the folder fsynced after a file is created or renamed in it (POSIX
// makes a rename durable only when the folder's entry is; see fsync(2) and
// rename(2)). The checkpoint's atomic save is built from these.
#pragma once

#include <cstddef>
#include <string>

namespace sextant::engine::checkpoint {

/// A new file (truncated when it exists), written sequentially. Throws
/// sim::ConfigError naming the file and the system's reason.
class DurableFile {
 public:
  explicit DurableFile(const std::string& path);
  ~DurableFile();  // closes without syncing when sync_and_close was not reached
  DurableFile(const DurableFile&) = delete;
  DurableFile& operator=(const DurableFile&) = delete;

  void write(const void* data, std::size_t bytes);
  /// fsync, then close; the file's folder still needs sync_directory.
  void sync_and_close();

 private:
  std::string path_;
  int fd_ = -1;
};

/// fsyncs the folder `path` (its entries: files created or renamed in it).
void sync_directory(const std::string& path);

/// Replaces `path` with `text` atomically: writes path + ".tmp", fsyncs it,
/// renames it over `path` and fsyncs the folder. A crash leaves either the old
/// file or the new one.
void replace_file_atomically(const std::string& path, const std::string& text);

}  // namespace sextant::engine::checkpoint
