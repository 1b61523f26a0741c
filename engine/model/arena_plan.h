// The plan of the engine's device memory (engine/device_arena.h allocates it):
// named requests, each with the MemoryCategory `sextant simulate` reports, laid
// out one after another, 256-byte aligned. Plain C++, so the layout (and the
// memory a layout of the engine will take) is tested without a GPU.
//
// Three kinds of request:
//   add          a block of one owner (the weights, the optimizer's states);
//   add to an overlay
//                memory several owners hold one at a time: a pipeline stage's
//                activation slot, which serves every model chunk in turn (one
//                micro-batch of one chunk from its forward to its backward).
//                Each owner's blocks are laid out from the overlay's start in
//                the order added; the overlay is as large as its largest owner;
//   add_shared   one block for every owner asking by the same name, as large as
//                the largest ask: buffers that objects taking turns on one
//                stream use and leave within one pass, such as the activation
//                gradients and workspaces of a pipeline stage's activation slots
//                (engine/trainer.h). A pipeline stage holding
//                pp micro-batches in flight then keeps one set of them, not pp
//                (Megatron-LM's activation-gradient buffers are likewise per
//                pass: PyTorch's caching allocator reuses them).
#pragma once

#include <array>
#include <cstddef>
#include <map>
#include <string>
#include <vector>

namespace sextant::engine {

/// What the memory is for; the categories of `sextant simulate`'s
/// memory_bytes_per_gpu, so the two can be compared field by field.
enum class MemoryCategory { kParameters, kGradients, kOptimizerStates, kActivations, kOther };
inline constexpr int kMemoryCategories = 5;
const char* to_string(MemoryCategory category);

/// Where ArenaPlan::add puts a block: the plan's own sequence (overlay < 0),
/// or owner `owner`'s part of an overlay.
struct ArenaPlace {
  int overlay = -1;
  int owner = 0;
};

class ArenaPlan {
 public:
  /// Every block starts 256-byte aligned (cudaMalloc's own guarantee, and what
  /// cuBLASLt's workspace and 16-byte vector loads need).
  static constexpr std::size_t kAlignBytes = 256;
  using Slot = int;

  using Overlay = int;
  using Place = ArenaPlace;

  Slot add(std::string name, MemoryCategory category, std::size_t bytes, Place place = {});
  /// An overlay, laid out where it is added in the plan's sequence.
  Overlay add_overlay(std::string name);
  /// The block called `name` of every add_shared, grown to the largest
  /// `bytes` asked; throws std::logic_error when an earlier ask gave it
  /// another category, or when add() already used the name.
  Slot add_shared(const std::string& name, MemoryCategory category, std::size_t bytes);

  std::size_t total_bytes() const;
  std::size_t offset(Slot slot) const;
  /// Each block once; an overlay counted as its largest owner's blocks.
  std::array<std::size_t, kMemoryCategories> bytes_by_category() const;

  struct Block {
    std::string name;
    MemoryCategory category;
    std::size_t bytes;
    bool shared;
    Place place;
  };
  const std::vector<Block>& blocks() const { return blocks_; }

 private:
  void lay_out() const;

  std::vector<Block> blocks_;
  std::vector<std::string> overlays_;
  // The plan's sequence: a block (>= 0) or an overlay (-1 - its index).
  std::vector<int> sequence_;
  // Per overlay, the owner whose blocks end last (laid out with the offsets).
  mutable std::vector<int> largest_owner_;
  std::map<std::string, Slot> names_;  // every block's name: add_shared's lookup, add's check
  // Offsets, laid out again when a shared block grew since.
  mutable std::vector<std::size_t> offsets_;
  mutable std::size_t total_bytes_ = 0;
  mutable bool laid_out_ = true;
};

}  // namespace sextant::engine
