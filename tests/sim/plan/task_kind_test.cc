// Task kinds from task names (sim/plan/task_kind.h).
#include "sim/plan/task_kind.h"

#include <gtest/gtest.h>

namespace sextant::sim {
namespace {

TEST(TaskKind, TaskKindDropsStageMicroBatchAndLayer) {
  EXPECT_EQ(task_kind("stage0.mb3.layer17.attn.fwd"), "layer*.attn.fwd");
  EXPECT_EQ(task_kind("stage0.mb0.embedding.fwd"), "embedding.fwd");
  EXPECT_EQ(task_kind("stage0.optimizer.step"), "optimizer.step");
  EXPECT_EQ(task_kind("stage0.dp.all_gather.bucket11"), "dp.all_gather.bucket*");
  EXPECT_EQ(task_kind("stage1.dp.reduce_scatter.bucket0"), "dp.reduce_scatter.bucket*");
  EXPECT_EQ(task_kind("stage0.mb1.dp.all_gather.bucket12.fwd"), "dp.all_gather.bucket*.fwd");
}

}  // namespace
}  // namespace sextant::sim
