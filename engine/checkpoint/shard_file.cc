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
constexpr std::array<char, 8> kMagicWithBiases = {'S', 'X', 'C', 'K', 'P', 'T', '\0', '\2'};
constexpr std::uint64_t kHeaderBytes = 32;
constexpr std::uint64_t kHeaderBytesWithBiases = 40;  // + the bias elements

struct Header {
  std::int64_t steps_done;
  std::uint64_t weight_elements;
  std::uint64_t master_elements;
};

}  // namespace

std::string crc32_hex(std::uint32_t crc) {
  char text[9];
  std::snprintf(text, sizeof text, "%08x", crc);
  return text;
}

std::uint64_t shard_file_bytes(const TrainerState& s) {
  const std::uint64_t header = s.expert_biases.empty() ? kHeaderBytes : kHeaderBytesWithBiases;
  return header + 2 * s.weights_bf16.size() +
         4 * (s.master.size() + s.adam_m.size() + s.adam_v.size() + s.expert_biases.size());
}

void write_shard_file(const std::string& path, const TrainerState& s) {
  if (s.adam_m.size() != s.master.size() || s.adam_v.size() != s.master.size())
    throw_checkpoint_error(path, "Adam moments and master weights differ in length");
  DurableFile file(path);
  const Header header{s.steps_done, s.weights_bf16.size(), s.master.size()};
  const bool biases = !s.expert_biases.empty();
  file.write((biases ? kMagicWithBiases : kMagic).data(), kMagic.size());
  file.write(&header, sizeof header);
  if (biases) {
    const std::uint64_t bias_elements = s.expert_biases.size();
    file.write(&bias_elements, sizeof bias_elements);
  }
  file.write(s.weights_bf16.data(), 2 * s.weights_bf16.size());
  for (const std::vector<float>* v : {&s.master, &s.adam_m, &s.adam_v, &s.expert_biases})
    file.write(v->data(), 4 * v->size());
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

ShardReader::ShardReader(const std::string& path, std::uint64_t expected_bytes, std::uint32_t expected_crc32)
    : path_(path) {
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
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) throw_system_error(path, "cannot open the shard");
  try {
    std::array<char, 8> magic{};
    read_at(0, magic.size(), magic.data());
    if (magic != kMagic && magic != kMagicWithBiases)
      throw_checkpoint_error(path, "not a sextant checkpoint shard (wrong magic bytes)");
    Header header{};
    read_at(magic.size(), sizeof header, &header);
    std::uint64_t b = 0;
    header_bytes_ = kHeaderBytes;
    if (magic == kMagicWithBiases) {
      read_at(kHeaderBytes, sizeof b, &b);
      header_bytes_ = kHeaderBytesWithBiases;
    }
    const std::uint64_t w = header.weight_elements, m = header.master_elements;
    if (w > bytes || m > bytes || b > bytes || header_bytes_ + 2 * w + 12 * m + 4 * b != bytes)
      throw_checkpoint_error(path, "its header (" + std::to_string(w) + " weights, " + std::to_string(m) +
                                       " master elements" + (b > 0 ? ", " + std::to_string(b) + " expert biases" : "") +
                                       ") does not match its size of " + std::to_string(bytes) + " bytes");
    steps_done_ = header.steps_done;
    weight_elements_ = w;
    master_elements_ = m;
    bias_elements_ = b;
  } catch (...) {
    ::close(fd_);
    throw;
  }
}

ShardReader::~ShardReader() {
  if (fd_ >= 0) ::close(fd_);
}

void ShardReader::read_at(std::uint64_t file_offset, std::uint64_t bytes, void* out) const {
  char* p = static_cast<char*>(out);
  while (bytes > 0) {
    const ssize_t n = ::pread(fd_, p, bytes, static_cast<off_t>(file_offset));
    if (n < 0) throw_system_error(path_, "cannot read");
    if (n == 0) throw_checkpoint_error(path_, "truncated: the file ends early");
    p += n;
    bytes -= static_cast<std::uint64_t>(n);
    file_offset += static_cast<std::uint64_t>(n);
  }
}

void ShardReader::read_weights(std::uint64_t offset, std::uint64_t count, std::uint16_t* out) const {
  if (offset > weight_elements_ || count > weight_elements_ - offset)
    throw_checkpoint_error(path_, "weights [" + std::to_string(offset) + ", +" + std::to_string(count) +
                                      ") run past its " + std::to_string(weight_elements_));
  read_at(header_bytes_ + 2 * offset, 2 * count, out);
}

void ShardReader::read_fp32(Fp32Array array, std::uint64_t offset, std::uint64_t count, float* out) const {
  if (offset > master_elements_ || count > master_elements_ - offset)
    throw_checkpoint_error(path_, "fp32 elements [" + std::to_string(offset) + ", +" + std::to_string(count) +
                                      ") run past its " + std::to_string(master_elements_));
  const std::uint64_t first = header_bytes_ + 2 * weight_elements_ + 4 * master_elements_ * static_cast<std::uint64_t>(array);
  read_at(first + 4 * offset, 4 * count, out);
}

void ShardReader::read_expert_biases(std::uint64_t offset, std::uint64_t count, float* out) const {
  if (offset > bias_elements_ || count > bias_elements_ - offset)
    throw_checkpoint_error(path_, "expert biases [" + std::to_string(offset) + ", +" + std::to_string(count) +
                                      ") run past its " + std::to_string(bias_elements_));
  read_at(header_bytes_ + 2 * weight_elements_ + 12 * master_elements_ + 4 * offset, 4 * count, out);
}

TrainerState read_shard_file(const std::string& path, std::uint64_t expected_bytes, std::uint32_t expected_crc32) {
  const ShardReader reader(path, expected_bytes, expected_crc32);
  TrainerState s;
  s.steps_done = reader.steps_done();
  s.weights_bf16.resize(reader.weight_elements());
  reader.read_weights(0, reader.weight_elements(), s.weights_bf16.data());
  const std::uint64_t m = reader.master_elements();
  for (auto [v, a] : {std::pair{&s.master, ShardReader::Fp32Array::kMaster},
                      {&s.adam_m, ShardReader::Fp32Array::kAdamM},
                      {&s.adam_v, ShardReader::Fp32Array::kAdamV}}) {
    v->resize(m);
    reader.read_fp32(a, 0, m, v->data());
  }
  s.expert_biases.resize(reader.bias_elements());
  reader.read_expert_biases(0, reader.bias_elements(), s.expert_biases.data());
  return s;
}

}  // namespace sextant::engine::checkpoint
