// The kind of a task, from its name (task_name.h): the name without its stage,
// micro-batch, layer and bucket numbers, so that the tasks of one step sum
// into one row per kind — "stage0.mb3.layer17.attn.fwd" is "layer*.attn.fwd"
// whichever stage, micro-batch and layer ran it. The engine's measured tasks
// and the simulator's predicted ones are grouped alike (`sextant run --compare`).
#pragma once

#include <string>
#include <string_view>

namespace sextant::sim {

/// "stage0.mb3.layer17.attn.fwd" -> "layer*.attn.fwd";
/// "stage0.mb1.dp.all_gather.bucket12.fwd" -> "dp.all_gather.bucket*.fwd".
/// Plain string scans (it runs for every task of every timed step).
std::string task_kind(std::string_view name);

}  // namespace sextant::sim
