// Rank r's tp shard of a one-rank parameter tensor (engine/model/parameter_layout.h's
// shapes; Shoeybi et al. 2019's split): what the parallel parity tests give
// each rank and compare its gradients with.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/model/transformer_shape.h"

namespace sextant::engine::testing {

// Rows [begin, begin + count) of a (rows, cols) row-major matrix.
inline void append_rows(std::vector<float>& out, const std::vector<float>& full, std::int64_t cols,
                        std::int64_t begin, std::int64_t count) {
  out.insert(out.end(), full.begin() + begin * cols, full.begin() + (begin + count) * cols);
}

/// `one`: the whole model's shape; `part`: a rank's of `tp` (heads, groups and
/// ffn divided by tp; at tp > 1 the vocabulary too, of the padded table). Replicated tensors come back whole.
inline std::vector<float> shard_of(const std::string& name, const std::vector<float>& full, const TransformerShape& one,
                                   const TransformerShape& part, int rank, int tp) {
  const std::int64_t d = one.head_dim;
  auto ends_with = [&](const char* suffix) { return name.ends_with(suffix); };
  std::vector<float> out;
  if (tp > 1 && (name == "wte" || name == "lm_head")) {  // vocabulary-parallel (vocab, hidden): a block of rows
    append_rows(out, full, one.hidden, static_cast<std::int64_t>(rank) * part.vocab, part.vocab);
    return out;
  }
  if (ends_with("qkv_weight") || ends_with("qkv_bias")) {
    const std::int64_t cols = ends_with("qkv_weight") ? one.hidden : 1;
    append_rows(out, full, cols, rank * part.heads * d, part.heads * d);                        // Q
    append_rows(out, full, cols, one.heads * d + rank * part.kv_heads * d, part.kv_heads * d);  // K
    append_rows(out, full, cols, (one.heads + one.kv_heads) * d + rank * part.kv_heads * d,
                part.kv_heads * d);                                                             // V
    return out;
  }
  if (ends_with("fc1_weight") || ends_with("fc1_bias")) {
    const std::int64_t cols = ends_with("fc1_weight") ? one.hidden : 1;
    append_rows(out, full, cols, rank * part.ffn_hidden, part.ffn_hidden);  // GELU's rows, or SwiGLU's gate
    if (!one.gelu) append_rows(out, full, cols, one.ffn_hidden + rank * part.ffn_hidden, part.ffn_hidden);
    return out;
  }
  if (ends_with("proj_weight") || ends_with("fc2_weight")) {  // (hidden, in): a block of columns
    const std::int64_t in = ends_with("proj_weight") ? one.q_width() : one.ffn_hidden;
    const std::int64_t block = in / tp;
    for (std::int64_t row = 0; row < one.hidden; ++row)
      out.insert(out.end(), full.begin() + row * in + rank * block, full.begin() + row * in + (rank + 1) * block);
    return out;
  }
  return full;  // replicated
}

}  // namespace sextant::engine::testing
