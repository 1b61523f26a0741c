// One rank's shard of a checkpoint: a small header and the TrainerState's
// arrays as raw little-endian bytes (the engine runs on x86-64 and aarch64,
// both little-endian), so a 1.3B-parameter rank writes 16 bytes per
// parameter at disk speed.
//
//   offset  bytes  field
//   0       8      magic "SXCKPT\0\1"
//   8       8      steps_done (int64)
//   16      8      weight elements W (uint64)
//   24      8      master elements M (uint64)
//   32      2·W    bf16 weights
//   ...     4·M    fp32 master weights, then Adam m, then Adam v
//
// A shard with DeepSeek-V3's expert biases (TrainerState::expert_biases) is of
// version 2, "SXCKPT\0\2": the same with the bias elements B (uint64) after M
// (a 40-byte header), and the 4·B bytes of fp32 biases at the end. Without
// biases the writer still writes version 1, which every reader takes.
//
// The checksum of the whole file lives in the checkpoint's metadata
// (checkpoint_metadata.h), not in the file, so a shard is checked before it
// is parsed.
#pragma once

#include <cstdint>
#include <string>

#include "engine/checkpoint/trainer_state.h"

namespace sextant::engine::checkpoint {

/// Bytes of the file write_shard_file makes for `state`.
std::uint64_t shard_file_bytes(const TrainerState& state);

/// Writes `state` to `path` and fsyncs it. Throws sim::ConfigError naming the
/// file and the system's reason when it cannot.
void write_shard_file(const std::string& path, const TrainerState& state);

/// Reads a shard, after checking that it has `expected_bytes` bytes and the
/// CRC-32 `expected_crc32`. Throws sim::ConfigError naming the file and what is
/// wrong: missing, truncated, checksum mismatch, not a shard.
TrainerState read_shard_file(const std::string& path, std::uint64_t expected_bytes,
                             std::uint32_t expected_crc32);

/// A shard opened for reading pieces of its arrays (loading into another
/// layout: reshard_plan.h), its size and CRC-32 checked and its header parsed
/// at construction (the errors of read_shard_file).
class ShardReader {
 public:
  enum class Fp32Array { kMaster, kAdamM, kAdamV };

  ShardReader(const std::string& path, std::uint64_t expected_bytes, std::uint32_t expected_crc32);
  ~ShardReader();
  ShardReader(const ShardReader&) = delete;
  ShardReader& operator=(const ShardReader&) = delete;

  std::int64_t steps_done() const { return steps_done_; }
  std::uint64_t weight_elements() const { return weight_elements_; }
  std::uint64_t master_elements() const { return master_elements_; }
  /// 0 in a shard without expert biases (version 1).
  std::uint64_t bias_elements() const { return bias_elements_; }
  /// Elements [offset, offset + count) of the bf16 weights or of one fp32
  /// array. Throws sim::ConfigError when they run past the array.
  void read_weights(std::uint64_t offset, std::uint64_t count, std::uint16_t* out) const;
  void read_fp32(Fp32Array array, std::uint64_t offset, std::uint64_t count, float* out) const;
  /// Elements [offset, offset + count) of the expert biases (the same errors).
  void read_expert_biases(std::uint64_t offset, std::uint64_t count, float* out) const;

 private:
  void read_at(std::uint64_t file_offset, std::uint64_t bytes, void* out) const;

  std::string path_;
  int fd_ = -1;
  std::int64_t steps_done_ = 0;
  std::uint64_t weight_elements_ = 0, master_elements_ = 0, bias_elements_ = 0;
  std::uint64_t header_bytes_ = 0;  // 32 (version 1) or 40 (version 2)
};

/// CRC-32 (zlib's, the polynomial of ISO 3309 / ITU-T V.42) of a whole file.
/// Throws sim::ConfigError when it cannot be read.
std::uint32_t file_crc32(const std::string& path);

/// "1a2b3c4d": eight lower-case hex digits, as the metadata writes a CRC-32.
std::string crc32_hex(std::uint32_t crc);

}  // namespace sextant::engine::checkpoint
