#include "engine/model/arena_plan.h"

#include <algorithm>
#include <stdexcept>

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

ArenaPlan::Slot ArenaPlan::add(std::string name, MemoryCategory category, std::size_t bytes, Place place) {
  const auto slot = static_cast<Slot>(blocks_.size());
  if (place.overlay >= static_cast<Overlay>(overlays_.size()) || place.owner < 0)
    throw std::logic_error("ArenaPlan: '" + name + "' placed in overlay " + std::to_string(place.overlay) +
                           ", owner " + std::to_string(place.owner) + ", which the plan does not have");
  const auto [at, inserted] = names_.emplace(name, slot);
  if (!inserted && blocks_[static_cast<std::size_t>(at->second)].shared)
    throw std::logic_error("ArenaPlan: '" + name + "' is a shared block; add() needs a name of its own");
  blocks_.push_back(Block{std::move(name), category, bytes, false, place});
  if (place.overlay < 0) sequence_.push_back(slot);
  laid_out_ = false;
  return slot;
}

ArenaPlan::Overlay ArenaPlan::add_overlay(std::string name) {
  overlays_.push_back(std::move(name));
  const auto overlay = static_cast<Overlay>(overlays_.size()) - 1;
  sequence_.push_back(-1 - overlay);
  laid_out_ = false;
  return overlay;
}

ArenaPlan::Slot ArenaPlan::add_shared(const std::string& name, MemoryCategory category, std::size_t bytes) {
  const auto found = names_.find(name);
  if (found == names_.end()) {
    const auto slot = static_cast<Slot>(blocks_.size());
    names_.emplace(name, slot);
    blocks_.push_back(Block{name, category, bytes, true, {}});
    sequence_.push_back(slot);
    laid_out_ = false;
    return slot;
  }
  Block& b = blocks_[static_cast<std::size_t>(found->second)];
  if (!b.shared) throw std::logic_error("ArenaPlan: '" + name + "' was added as a block of one owner");
  if (b.category != category)
    throw std::logic_error("ArenaPlan: shared block '" + name + "' asked for as " + to_string(category) +
                           ", first as " + to_string(b.category));
  if (bytes > b.bytes) {
    b.bytes = bytes;
    laid_out_ = false;
  }
  return found->second;
}

namespace {
std::size_t aligned(std::size_t bytes) {
  return (bytes + ArenaPlan::kAlignBytes - 1) / ArenaPlan::kAlignBytes * ArenaPlan::kAlignBytes;
}
}  // namespace

void ArenaPlan::lay_out() const {
  if (laid_out_) return;
  offsets_.assign(blocks_.size(), 0);
  // Each overlay's owners from offset 0 of the overlay, in the order added.
  std::vector<std::map<int, std::size_t>> owner_ends(overlays_.size());
  for (std::size_t i = 0; i < blocks_.size(); ++i) {
    const Place p = blocks_[i].place;
    if (p.overlay < 0) continue;
    std::size_t& end = owner_ends[static_cast<std::size_t>(p.overlay)][p.owner];
    offsets_[i] = aligned(end);
    end = offsets_[i] + blocks_[i].bytes;
  }
  std::vector<std::size_t> overlay_bytes(overlays_.size(), 0);
  largest_owner_.assign(overlays_.size(), -1);
  for (std::size_t o = 0; o < overlays_.size(); ++o)
    for (const auto& [owner, end] : owner_ends[o])
      if (largest_owner_[o] < 0 || end > overlay_bytes[o]) {
        overlay_bytes[o] = end;
        largest_owner_[o] = owner;
      }
  std::vector<std::size_t> overlay_base(overlays_.size(), 0);
  std::size_t end = 0;
  for (const int item : sequence_) {
    const std::size_t start = aligned(end);
    if (item >= 0) {
      offsets_[static_cast<std::size_t>(item)] = start;
      end = start + blocks_[static_cast<std::size_t>(item)].bytes;
    } else {
      const auto o = static_cast<std::size_t>(-1 - item);
      overlay_base[o] = start;
      end = start + overlay_bytes[o];
    }
  }
  for (std::size_t i = 0; i < blocks_.size(); ++i)
    if (blocks_[i].place.overlay >= 0) offsets_[i] += overlay_base[static_cast<std::size_t>(blocks_[i].place.overlay)];
  total_bytes_ = end;
  laid_out_ = true;
}

std::size_t ArenaPlan::total_bytes() const {
  lay_out();
  return total_bytes_;
}

std::size_t ArenaPlan::offset(Slot slot) const {
  lay_out();
  return offsets_.at(static_cast<std::size_t>(slot));
}

std::array<std::size_t, kMemoryCategories> ArenaPlan::bytes_by_category() const {
  lay_out();
  std::array<std::size_t, kMemoryCategories> bytes{};
  for (const Block& b : blocks_) {
    const Place p = b.place;
    if (p.overlay < 0 || largest_owner_[static_cast<std::size_t>(p.overlay)] == p.owner)
      bytes[static_cast<std::size_t>(b.category)] += b.bytes;
  }
  return bytes;
}

}  // namespace sextant::engine
