// All of the engine's device memory in one allocation, made before training
// starts and reused by every step: no cudaMalloc (and no allocator cache) in
// the step, and the peak is known before the first kernel runs.
//
// Two phases: an ArenaPlan collects named requests (bytes, category); a
// DeviceArena allocates their sum once and hands out the aligned pointers.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <vector>

namespace sextant::engine {

/// What the memory is for; the categories of `sextant simulate`'s
/// memory_bytes_per_gpu, so the two can be compared field by field.
enum class MemoryCategory { kParameters, kGradients, kOptimizerStates, kActivations, kOther };
inline constexpr int kMemoryCategories = 5;
const char* to_string(MemoryCategory category);

class ArenaPlan {
 public:
  /// Every block starts 256-byte aligned (cudaMalloc's own guarantee, and what
  /// cuBLASLt's workspace and 16-byte vector loads need).
  static constexpr std::size_t kAlignBytes = 256;
  using Slot = int;

  Slot add(std::string name, MemoryCategory category, std::size_t bytes);
  std::size_t total_bytes() const { return total_bytes_; }
  std::size_t offset(Slot slot) const { return blocks_.at(static_cast<std::size_t>(slot)).offset; }
  std::array<std::size_t, kMemoryCategories> bytes_by_category() const;

  struct Block {
    std::string name;
    MemoryCategory category;
    std::size_t bytes;
    std::size_t offset;
  };
  const std::vector<Block>& blocks() const { return blocks_; }

 private:
  std::vector<Block> blocks_;
  std::size_t total_bytes_ = 0;
};

class DeviceArena {
 public:
  /// One cudaMalloc of plan.total_bytes(); throws kernels::CudaError (naming the
  /// bytes asked for) when the GPU does not have them.
  explicit DeviceArena(const ArenaPlan& plan);
  ~DeviceArena();
  DeviceArena(const DeviceArena&) = delete;
  DeviceArena& operator=(const DeviceArena&) = delete;

  template <typename T>
  T* get(ArenaPlan::Slot slot) const {
    return reinterpret_cast<T*>(base_ + plan_.offset(slot));
  }
  std::size_t bytes() const { return plan_.total_bytes(); }
  const ArenaPlan& plan() const { return plan_; }

 private:
  ArenaPlan plan_;
  char* base_ = nullptr;
};

}  // namespace sextant::engine
