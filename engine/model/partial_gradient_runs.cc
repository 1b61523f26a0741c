#include "engine/model/partial_gradient_runs.h"

namespace sextant::engine {

std::vector<ElementRun> partial_gradient_runs(const ParameterLayout& layout) {
  std::vector<ElementRun> runs;
  bool previous_partial = false;
  for (const ParameterTensor& t : layout.tensors()) {
    if (t.partial_gradient_over_tp) {
      if (previous_partial)
        runs.back().end = t.offset + t.elements();
      else
        runs.push_back({t.offset, t.offset + t.elements()});
    }
    previous_partial = t.partial_gradient_over_tp;
  }
  return runs;
}

}  // namespace sextant::engine
