// The shape of the transformer the engine trains (TransformerShape), from a
// model preset and a layout. The shape itself is sim/core/transformer_shape.h's,
// so the simulator's list of the engine's kernels reads the same widths; this
// header names it in the engine and adds what only the engine asks: whether
// its kernels can run a shape.
#pragma once

#include <string>
#include <vector>

#include "sim/core/model_config.h"
#include "sim/core/parallel_layout.h"
#include "sim/core/transformer_shape.h"

namespace sextant::engine {

using sim::TransformerShape;
using sim::transformer_shape_of;

/// Why the engine cannot train `shape`, one line each ("head dimension 96: the
/// attention kernel takes 64 or 128"); empty when it can.
std::vector<std::string> transformer_shape_problems(const TransformerShape& shape,
                                                    const sim::ModelConfig& model);

}  // namespace sextant::engine
