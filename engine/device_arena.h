// All of the engine's device memory in one allocation, made before training
// starts and reused by every step: no cudaMalloc (and no allocator cache) in
// the step, and the peak is known before the first kernel runs.
//
// Two phases: an ArenaPlan (engine/model/arena_plan.h) collects named requests
// (bytes, category); a DeviceArena allocates their sum once and hands out the
// aligned pointers.
#pragma once

#include <cstddef>

#include "engine/model/arena_plan.h"

namespace sextant::engine {

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
