// How the model's parts ask for their device buffers: at construction each
// part names its blocks in an ArenaPlan (engine/model/arena_plan.h) through a
// BufferReserver, which remembers the pointer each block is for; bind() then
// points every one of them into the DeviceArena made from that plan. Nothing
// is allocated after construction.
//
// The blocks are laid out in the order asked for, so that order is the
// arena's layout: the Transformer's constructor (engine/transformer.cc) calls
// the parts in one fixed sequence.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "engine/device_arena.h"
#include "engine/model/arena_plan.h"

namespace sextant::engine::transformer {

/// The pointers to set once the arena exists.
class ArenaBindings {
 public:
  void add(std::function<void(const DeviceArena&)> bind_one) { binders_.push_back(std::move(bind_one)); }
  void bind(const DeviceArena& arena) const {
    for (const auto& bind_one : binders_) bind_one(arena);
  }

 private:
  std::vector<std::function<void(const DeviceArena&)>> binders_;
};

class BufferReserver {
 public:
  /// `stored`: where own() puts its blocks (the plan's sequence, or a pipeline
  /// stage's activation slot: ArenaPlan::Place).
  BufferReserver(ArenaPlan& plan, ArenaPlan::Place stored, ArenaBindings& bindings)
      : plan_(plan), stored_(stored), bindings_(bindings) {}

  /// A block of this model's own (ArenaPlan::add at the `stored` place): what a
  /// micro-batch keeps from its forward to its backward. `member` must outlive
  /// the bindings.
  template <typename T>
  void own(T*& member, std::string name, MemoryCategory category, std::size_t count) {
    remember(member, plan_.add(std::move(name), category, count * sizeof(T), stored_));
  }
  /// A block shared with every model of the plan asking by the same name
  /// (ArenaPlan::add_shared): what a pass uses and leaves.
  template <typename T>
  void shared(T*& member, const std::string& name, MemoryCategory category, std::size_t count) {
    remember(member, plan_.add_shared(name, category, count * sizeof(T)));
  }

 private:
  template <typename T>
  void remember(T*& member, ArenaPlan::Slot slot) {
    bindings_.add([&member, slot](const DeviceArena& arena) { member = arena.get<T>(slot); });
  }

  ArenaPlan& plan_;
  ArenaPlan::Place stored_;
  ArenaBindings& bindings_;
};

}  // namespace sextant::engine::transformer
