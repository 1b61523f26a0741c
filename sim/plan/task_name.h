// Names of tasks, shared by the simulator's trace and the engine's timers so a
// predicted task and its measured twin match one to one (DESIGN.md):
//   stage2.mb5.layer17.attn.fwd            a compute block
//   stage2.mb5.layer17.attn.fwd.tp.all_reduce     its tensor-parallel collective
//   stage2.mb5.layer17.mlp.fwd.ep.dispatch        expert-parallel all-to-all
//   stage2.mb5.layer17.attn.core.fwd.cp.ring      context-parallel ring steps
//   stage2.mb5.chunk1.pp.send_fwd          activations to the next stage
//   stage2.dp.reduce_scatter.bucket3       a gradient bucket (ZeRO-2/3: stage2.mb5.dp...)
//   stage2.optimizer.step
#pragma once

#include <string>

#include "sim/plan/plan.h"

namespace sextant::sim {

std::string task_name(const Plan& plan, const Task& task);
/// Appends the name to `out` (no allocation when `out` has room).
void append_task_name(const Plan& plan, const Task& task, std::string& out);

}  // namespace sextant::sim
