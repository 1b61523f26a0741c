// A batch of random tokens and targets for the engine's GPU tests.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace sextant::engine::testing {

struct Batch {
  std::vector<std::int32_t> inputs, targets;  // (sequences x seq) each
};

/// Tokens and targets drawn uniformly from [0, vocab).
inline Batch random_batch(std::mt19937_64& rng, int sequences, int seq, int vocab) {
  std::uniform_int_distribution<std::int32_t> token(0, vocab - 1);
  Batch b;
  for (int i = 0; i < sequences * seq; ++i) {
    b.inputs.push_back(token(rng));
    b.targets.push_back(token(rng));
  }
  return b;
}

}  // namespace sextant::engine::testing
