// Which mechanisms of a layout the simulator's prediction has been checked on.
//
// The model prices every mechanism a layout may use (ZeRO-3, context
// parallelism, expert parallelism, ...), but only some of those prices have been
// held against reality: by a development case (a published run in
// validation/dev_cases.yaml whose layout uses the mechanism, the step time the
// model is fitted and checked on) or by the engine (a folder under
// reports/measurements/ where `sextant run` trained a layout using it). A
// mechanism with neither is *ungrounded*: the search still ranks it, but says
// that a pick resting on it rests on an unvalidated part of the model (issue 29,
// item 9).
//
// The table (mechanism_evidence.cc) is the one place that says so, each entry
// citing its evidence; tests/search/mechanism_evidence_test.cc holds it against
// dev_cases.yaml (every cited case exists and uses the mechanism; no case uses a
// mechanism the table calls ungrounded) and against reports/measurements/.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "sim/core/parallel_layout.h"

namespace sextant::search {

struct Mechanism {
  /// As --layout writes it: "zero=3 fsdp=megatron-fsdp", "cp>1".
  std::string_view name;
  bool (*used_by)(const sim::ParallelLayout& layout);
  /// Ids of validation/dev_cases.yaml cases whose published layout uses it
  /// (at least one when there is one; empty: no case does).
  std::vector<std::string_view> dev_cases;
  /// The reports/measurements/ folder where the engine trained a layout using
  /// it; empty: none.
  std::string_view engine_measurement;
  /// Whether `sextant run` executes it at all (engine/training/engine_support.h
  /// refuses the rest by name).
  bool engine_executes = false;
  /// A --layout that uses it (and, where engine_executes, that the engine runs).
  std::string_view example;

  bool grounded() const { return !dev_cases.empty() || !engine_measurement.empty(); }
};

/// Every mechanism of a layout whose cost the simulator models beyond plain
/// data parallelism, with its evidence.
const std::vector<Mechanism>& layout_mechanisms();

/// The names of the ungrounded mechanisms `layout` uses, in the table's order.
std::vector<std::string_view> ungrounded_names(const sim::ParallelLayout& layout);

/// The ungrounded mechanisms `layout` uses, each with what is missing:
/// "zero=3 fsdp=megatron-fsdp (no dev case, not run by the engine)", or "(no
/// dev case, no engine measurement)" for one the engine executes but has not
/// been measured on. Empty when every mechanism it uses has evidence.
std::vector<std::string> ungrounded_mechanisms(const sim::ParallelLayout& layout);

/// The knobs `partial` states, over a layout that uses no mechanism at all
/// (one GPU, no ZeRO, no overlaps, ...): what a published case or a --layout
/// commits to, without the search's choices for what it leaves out.
sim::ParallelLayout stated_layout(const sim::PartialLayout& partial);

}  // namespace sextant::search
