// The pipeline splits the search tries for a (pp, vpp): Megatron's even split,
// the embedding/loss accounting, uneven first/last stages, and, when none of
// those fits the layer count, a balanced explicit layout (pp_layout). The
// semantics live in sim/core/pipeline_split.h; this file only proposes.
#pragma once

#include <string>
#include <vector>

#include "sim/core/model_config.h"
#include "sim/core/parallel_layout.h"

namespace sextant::search {

/// The five split knobs of a ParallelLayout.
struct SplitKnobs {
  int first_stage_layers = 0;
  int last_stage_layers = 0;
  bool embedding_in_split = false;
  bool loss_in_split = false;
  std::string pp_layout;

  void apply_to(sim::ParallelLayout& layout) const;
};

/// The knobs as the user gave them (unset ones off).
SplitKnobs given_split(const sim::PartialLayout& partial);

/// Every valid split of `model` over pp ranks × vpp chunks the search tries,
/// the default (`default_split`) first, each once: knobs that put the same
/// layers on every (rank, chunk) are one split (the first spelling kept), so
/// the search never ranks one layout under several spellings. Empty when
/// none is valid.
std::vector<SplitKnobs> split_options(const sim::ModelConfig& model, int pp, int vpp);

/// The split tried first: even where the layers divide; else the first valid
/// of embedding+loss, loss, embedding accounting; else the first/last split
/// whose largest stage is smallest; else balanced_pp_layout. The even split
/// (invalid) when pp·vpp exceeds the layers plus the embedding and loss.
SplitKnobs default_split(const sim::ModelConfig& model, int pp, int vpp);

/// An explicit layout spreading the layers, the embedding and the loss (one
/// unit each, as Megatron's accounting counts them) over the pp·vpp virtual
/// stages as evenly as the count allows: the extra units go round the ranks
/// from rank 1 on, the first and last virtual stage taking one last.
std::string balanced_pp_layout(int num_layers, int pp, int vpp);

/// The vpp values worth trying at `pp`: divisors of ⌊L/pp⌋, ⌈L/pp⌉ and, where
/// they are whole, (L+1)/pp and (L+2)/pp (the accounting's per-rank units).
std::vector<int> vpp_options(int num_layers, int pp);

}  // namespace sextant::search
