// The engine's memory plan: blocks laid out in order, 256-byte aligned; shared
// blocks one per name, as large as the largest ask.
#include "engine/model/arena_plan.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace sextant::engine {
namespace {

constexpr auto kAct = MemoryCategory::kActivations;
constexpr auto kOther = MemoryCategory::kOther;

TEST(ArenaPlan, LaysBlocksOutAlignedInOrder) {
  ArenaPlan plan;
  const auto a = plan.add("a", MemoryCategory::kParameters, 100);
  const auto b = plan.add("b", kAct, 300);
  EXPECT_EQ(plan.offset(a), 0u);
  EXPECT_EQ(plan.offset(b), 256u);
  EXPECT_EQ(plan.total_bytes(), 556u);
}

// Two activation slots of a pipeline stage: each keeps its own stored
// activations (same names, separate blocks) and shares the pass's scratch.
TEST(ArenaPlan, SharedBlocksAreOnePerNameAtTheLargestSize) {
  ArenaPlan plan;
  const auto input0 = plan.add("layers.0.input", kAct, 1000);
  const auto scratch0 = plan.add_shared("scratch", kAct, 512);
  const auto input1 = plan.add("layers.0.input", kAct, 1000);
  const auto scratch1 = plan.add_shared("scratch", kAct, 768);  // a larger ask grows it
  const auto workspace = plan.add_shared("workspace", kOther, 256);
  EXPECT_NE(input0, input1);
  EXPECT_EQ(scratch0, scratch1);
  EXPECT_EQ(plan.blocks().size(), 4u);
  // input0 at 0 (1000 -> 1024), scratch at 1024 (768 -> 1792), input1 at 1792, workspace at 2816.
  EXPECT_EQ(plan.offset(scratch1), 1024u);
  EXPECT_EQ(plan.offset(input1), 1792u);
  EXPECT_EQ(plan.offset(workspace), 2816u);
  EXPECT_EQ(plan.total_bytes(), 3072u);
  const auto bytes = plan.bytes_by_category();
  EXPECT_EQ(bytes[static_cast<std::size_t>(kAct)], 2768u);
  EXPECT_EQ(bytes[static_cast<std::size_t>(kOther)], 256u);
  // A smaller ask changes nothing.
  EXPECT_EQ(plan.add_shared("scratch", kAct, 10), scratch0);
  EXPECT_EQ(plan.total_bytes(), 3072u);
}

// A pipeline stage's activation slot serves chunk 0 and chunk 1 in turn: each
// chunk's blocks from the slot's start, the slot as large as the larger.
TEST(ArenaPlan, OverlayOwnersShareItsMemory) {
  ArenaPlan plan;
  const auto weights = plan.add("weights", MemoryCategory::kParameters, 1000);
  const auto slot = plan.add_overlay("activation slot 0");
  const auto after = plan.add("losses", kOther, 100);
  const auto grad0 = plan.add("grad.residual", kAct, 256, {slot, 0});
  const auto input0 = plan.add("layers.0.input", kAct, 1000, {slot, 0});
  const auto grad1 = plan.add("grad.residual", kAct, 256, {slot, 1});
  const auto input1 = plan.add("layers.0.input", kAct, 2000, {slot, 1});
  const auto logits1 = plan.add("logits", kAct, 10, {slot, 1});
  // weights at 0; the overlay at 1024: owner 0 ends at 1024 + 256 + 1000, owner
  // 1 at 1024 + 256 + 2048 + 10; losses after it.
  EXPECT_EQ(plan.offset(weights), 0u);
  EXPECT_EQ(plan.offset(grad0), 1024u);
  EXPECT_EQ(plan.offset(grad1), 1024u);  // the same place for every owner
  EXPECT_EQ(plan.offset(input0), 1280u);
  EXPECT_EQ(plan.offset(input1), 1280u);
  EXPECT_EQ(plan.offset(logits1), 1280u + 2048u);
  EXPECT_EQ(plan.offset(after), 3584u);
  EXPECT_EQ(plan.total_bytes(), 3684u);
  // The overlay counts once, as its larger owner (1).
  EXPECT_EQ(plan.bytes_by_category()[static_cast<std::size_t>(kAct)], 256u + 2000u + 10u);
  EXPECT_THROW(plan.add("x", kAct, 1, {5, 0}), std::logic_error);
}

TEST(ArenaPlan, RefusesToMixSharedAndOwnedNames) {
  ArenaPlan plan;
  plan.add("tokens", kOther, 64);
  EXPECT_THROW(plan.add_shared("tokens", kOther, 64), std::logic_error);
  plan.add_shared("scratch", kAct, 64);
  EXPECT_THROW(plan.add("scratch", kAct, 64), std::logic_error);
  EXPECT_THROW(plan.add_shared("scratch", kOther, 64), std::logic_error);
}

}  // namespace
}  // namespace sextant::engine
