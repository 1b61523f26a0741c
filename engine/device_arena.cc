#include "engine/device_arena.h"

#include <cuda_runtime_api.h>

#include <cstdio>

#include "kernels/cuda_check.h"

namespace sextant::engine {

const char* to_string(MemoryCategory category) {
  switch (category) {
    case MemoryCategory::kParameters: return "parameters";
    case MemoryCategory::kGradients: return "gradients";
    case MemoryCategory::kOptimizerStates: return "optimizer_states";
    case MemoryCategory::kActivations: return "activations";
    case MemoryCategory::kOther: return "other";
  }
  return "?";
}

ArenaPlan::Slot ArenaPlan::add(std::string name, MemoryCategory category, std::size_t bytes) {
  const std::size_t offset = (total_bytes_ + kAlignBytes - 1) / kAlignBytes * kAlignBytes;
  blocks_.push_back(Block{std::move(name), category, bytes, offset});
  total_bytes_ = offset + bytes;
  return static_cast<Slot>(blocks_.size()) - 1;
}

std::array<std::size_t, kMemoryCategories> ArenaPlan::bytes_by_category() const {
  std::array<std::size_t, kMemoryCategories> bytes{};
  for (const Block& b : blocks_) bytes[static_cast<std::size_t>(b.category)] += b.bytes;
  return bytes;
}

DeviceArena::DeviceArena(const ArenaPlan& plan) : plan_(plan) {
  if (plan_.total_bytes() == 0) return;
  const cudaError_t status = cudaMalloc(reinterpret_cast<void**>(&base_), plan_.total_bytes());
  if (status != cudaSuccess) {
    cudaGetLastError();  // clear the sticky out-of-memory status
    char call[96];
    std::snprintf(call, sizeof call, "cudaMalloc(%.2f GiB for the engine's arena)",
                  static_cast<double>(plan_.total_bytes()) / (1u << 30));
    kernels::check_cuda(status, call, __FILE__, __LINE__);
  }
}

DeviceArena::~DeviceArena() {
  if (base_ != nullptr) cudaFree(base_);
}

}  // namespace sextant::engine
