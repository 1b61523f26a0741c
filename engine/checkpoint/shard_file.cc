#include "engine/checkpoint/shard_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <array>
#include <cstdio>
#include <cstring>

#include "engine/checkpoint/checkpoint_error.h"
#include "engine/checkpoint/durable_file.h"

namespace sextant::engine::checkpoint {

namespace {

constexpr std::array<char, 8> kMagic = {'S', 'X', 'C', 'K', 'P', 'T', '\0', '\1'};
constexpr std::uint64_t kHeaderBytes = 32;

struct Header {
  std::int64_t steps_done;
  std::uint64_t weight_elements;
  std::uint64_t master_elements;
};

void read_exactly(int fd, const std::string& path, void* data, std::uint64_t bytes) {
  char* p = static_cast<char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::read(fd, p, bytes);
    if (n < 0) throw_system_error(path, "cannot read");
    if (n == 0) throw_checkpoint_error(path, "truncated: the file ends early");
    p += n;
    bytes -= static_cast<std::uint64_t>(n);
  }
}

}  // namespace

std::string crc32_hex(std::uint32_t crc) {
  char text[9];
  std::snprintf(text, sizeof text, "%08x", crc);
  return text;
}

std::uint64_t shard_file_bytes(const TrainerState& s) {
  return kHeaderBytes + 2 * s.weights_bf16.size() + 4 * (s.master.size() + s.adam_m.size() + s.adam_v.size());
}

void write_shard_file(const std::string& path, const TrainerState& s) {
  if (s.adam_m.size() != s.master.size() || s.adam_v.size() != s.master.size())
    throw_checkpoint_error(path, "Adam moments and master weights differ in length");
  DurableFile file(path);
  const Header header{s.steps_done, s.weights_bf16.size(), s.master.size()};
  file.write(kMagic.data(), kMagic.size());
  file.write(&header, sizeof header);
  file.write(s.weights_bf16.data(), 2 * s.weights_bf16.size());
  for (const std::vector<float>* v : {&s.master, &s.adam_m, &s.adam_v}) file.write(v->data(), 4 * v->size());
  file.sync_and_close();
}

std::uint32_t file_crc32(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw_system_error(path, "cannot open");
  std::vector<unsigned char> buffer(8u << 20);
  uLong crc = crc32_z(0L, Z_NULL, 0);
  for (;;) {
    const ssize_t n = ::read(fd, buffer.data(), buffer.size());
    if (n < 0) {
      ::close(fd);
      throw_system_error(path, "cannot read");
    }
    if (n == 0) break;
    crc = crc32_z(crc, buffer.data(), static_cast<z_size_t>(n));
  }
  ::close(fd);
  return static_cast<std::uint32_t>(crc);
}

TrainerState read_shard_file(const std::string& path, std::uint64_t expected_bytes, std::uint32_t expected_crc32) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) throw_system_error(path, "cannot open the shard");
  const auto bytes = static_cast<std::uint64_t>(info.st_size);
  if (bytes != expected_bytes)
    throw_checkpoint_error(path, (bytes < expected_bytes ? "truncated: " : "wrong size: ") + std::to_string(bytes) +
                                     " bytes, the metadata says " + std::to_string(expected_bytes));
  const std::uint32_t crc = file_crc32(path);
  if (crc != expected_crc32)
    throw_checkpoint_error(path, "checksum mismatch: CRC-32 " + crc32_hex(crc) + ", the metadata says " +
                                     crc32_hex(expected_crc32) + " (the file is damaged)");
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw_system_error(path, "cannot open the shard");
  TrainerState s;
  try {
    std::array<char, 8> magic{};
    read_exactly(fd, path, magic.data(), magic.size());
    if (magic != kMagic) throw_checkpoint_error(path, "not a sextant checkpoint shard (wrong magic bytes)");
    Header header{};
    read_exactly(fd, path, &header, sizeof header);
    const std::uint64_t w = header.weight_elements, m = header.master_elements;
    if (w > bytes || m > bytes || kHeaderBytes + 2 * w + 12 * m != bytes)
      throw_checkpoint_error(path, "its header (" + std::to_string(w) + " weights, " + std::to_string(m) +
                                       " master elements) does not match its size of " + std::to_string(bytes) +
                                       " bytes");
    s.steps_done = header.steps_done;
    s.weights_bf16.resize(w);
    read_exactly(fd, path, s.weights_bf16.data(), 2 * w);
    for (std::vector<float>* v : {&s.master, &s.adam_m, &s.adam_v}) {
      v->resize(m);
      read_exactly(fd, path, v->data(), 4 * m);
    }
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
  return s;
}

}  // namespace sextant::engine::checkpoint
