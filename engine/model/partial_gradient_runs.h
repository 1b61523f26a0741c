// Where the sequence-parallel partial gradients lie in the flat buffers
// (ParameterLayout's partial_gradient_over_tp tensors): runs of neighbouring
// tensors, each summed over the tp group in one all-reduce
// (engine/tensor_parallel/partial_gradients.h). Plain C++: tested on the CPU.
#pragma once

#include <cstddef>
#include <vector>

#include "engine/model/parameter_layout.h"

namespace sextant::engine {

struct ElementRun {
  std::size_t begin = 0;  // elements of the flat buffers
  std::size_t end = 0;
};

/// Consecutive partial_gradient_over_tp tensors of `layout` merged into one
/// run (the alignment padding between them included: zero, and summed as zero).
std::vector<ElementRun> partial_gradient_runs(const ParameterLayout& layout);

}  // namespace sextant::engine
