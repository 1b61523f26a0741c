// Which transformer layers each pipeline stage and model chunk holds, and
// where the embedding and the loss (final norm, output layer, cross entropy)
// sit: the one place that answers it. Everything that once divided
// num_layers by pp reads a PipelineSplit instead.
//
// Semantics, as Megatron-LM implements them (NVIDIA/Megatron-LM at d98e8a64dd,
// 2026-08-22):
//
// * Even split (no knob set): every virtual stage (pp rank s, model chunk c)
//   holds L/(pp·vpp) layers. Chunk c of rank s holds the layers from
//   (c·pp + s)·L/(pp·vpp) on (megatron/core/transformer/transformer_block.py,
//   get_num_layers_to_build; transformer_layer.py, get_transformer_layer_offset).
//
// * --account-for-embedding-in-pipeline-split / --account-for-loss-in-pipeline-split
//   (our `embedding_in_split=1`, `loss_in_split=1`): the embedding (loss) counts
//   as one layer when splitting, so L + e + l must divide by pp, and the per-rank
//   count by vpp (arguments.py, validate_args; transformer_config.py,
//   __post_init__). Every virtual stage gets (L+e+l)/(pp·vpp) units; the first
//   virtual stage (rank 0, chunk 0) builds one transformer layer fewer for the
//   embedding, the last (rank pp−1, chunk vpp−1) one fewer for the loss
//   (get_num_layers_to_build). Offsets are the even ones less one after the
//   first virtual stage (get_transformer_layer_offset).
//
// * --decoder-first-pipeline-num-layers F / --decoder-last-pipeline-num-layers
//   (our `first_stage_layers=F`, `last_stage_layers=N`): rank 0 (rank pp−1)
//   holds F (N) layers; the other M = L − F − N split evenly over the middle
//   ranks. Each of F, N and M/(middle ranks) must be > 0 and divide by vpp;
//   every rank splits its layers evenly over its vpp chunks. Chunk c of rank s
//   starts at c·(F + M + N)/vpp + F/vpp + (s − 1)·M/(vpp·middle ranks) (rank 0:
//   c·(F + M + N)/vpp) (get_transformer_layer_offset). Cannot be combined with the
//   embedding/loss accounting (transformer_config.py asserts it).
//
// * --pipeline-model-parallel-layout (our `pp_layout=`): the virtual stages in
//   order (chunk-major: stage k is rank k mod pp, chunk k div pp), separated by
//   '|', each a string of E (embedding), t (transformer layer) and L (loss);
//   `x*n` repeats a character and `(...)*n` a group
//   (pipeline_parallel_layer_layout.py, PipelineParallelLayerLayout.parse_str_to_list).
//   The number of virtual stages must be a multiple of pp and fixes vpp; E must
//   come first and L last, each exactly once, and the t's must number L
//   (validate_layer_layout). Megatron drops commas in the string as cosmetic; we
//   forbid them because --layout separates knobs with commas. MTP (m) is not
//   modelled. Excludes the other four knobs (transformer_config.py).
//
// Megatron builds the embedding on the first virtual stage and the output
// layer and loss on the last whatever the split (GPTModel's pre_process and
// post_process), so only the layer counts move.
#pragma once

#include <string>
#include <vector>

#include "sim/core/model_config.h"
#include "sim/core/parallel_layout.h"

namespace sextant::sim {

/// The layers of one model chunk (virtual stage) on one pipeline rank.
struct ChunkLayers {
  int first_layer = 0;  // global index of its first transformer layer
  int num_layers = 0;   // may be 0 (a chunk holding only the embedding or the loss)
  bool embedding = false;
  bool loss = false;  // final norm, output layer and cross entropy
};

/// What one pipeline rank holds, over all its chunks.
struct StageLayers {
  int num_layers = 0;
  int dense_layers = 0;  // of which dense (a MoE model's first_dense_layers)
  bool embedding = false;
  bool loss = false;
  int moe_layers() const { return num_layers - dense_layers; }
  bool operator==(const StageLayers&) const = default;
  /// Holds the same layers as `other` and at least its embedding and loss: it
  /// needs at least as many weights, and (earlier in the pipeline, with at
  /// least as many micro-batches in flight) at least as much memory.
  bool covers(const StageLayers& other) const {
    return num_layers == other.num_layers && dense_layers == other.dense_layers &&
           (embedding || !other.embedding) && (loss || !other.loss);
  }
};

/// The split of a model's layers over pp ranks × vpp chunks. Invariant: the
/// chunks, read in virtual-stage order (chunk-major), cover layers 0..L−1 once,
/// in order; chunk (0, 0) holds the embedding and (pp−1, vpp−1) the loss.
class PipelineSplit {
 public:
  PipelineSplit() = default;
  PipelineSplit(int pp, int vpp, std::vector<ChunkLayers> chunks, int dense_layers);

  int pp() const { return pp_; }
  int vpp() const { return vpp_; }
  const ChunkLayers& chunk(int stage, int chunk) const {
    return chunks_[static_cast<std::size_t>(stage * vpp_ + chunk)];
  }
  const StageLayers& stage(int stage) const { return stages_[static_cast<std::size_t>(stage)]; }
  /// Every chunk holds the same number of layers.
  bool even() const { return even_; }
  int max_stage_layers() const { return max_stage_layers_; }
  /// "E+2t | 2t | ... | 1t+L" per rank: rank s's chunks joined by '/'.
  std::string describe() const;

 private:
  int pp_ = 1, vpp_ = 1;
  std::vector<ChunkLayers> chunks_;  // rank-major: [stage · vpp + chunk]
  std::vector<StageLayers> stages_;
  bool even_ = true;
  int max_stage_layers_ = 0;
};

/// Why a layout's split knobs cannot split the model; kNone when they can.
enum class SplitProblem {
  kNone,
  kNotDivisible,          // L (+ e + l) not a multiple of pp·vpp
  kUnevenWithAccounting,  // first/last_stage_layers with embedding/loss_in_split
  kUnevenNeedsPipeline,   // first/last_stage_layers with pp = 1
  kUnevenChunks,          // F or N not a multiple of vpp
  kUnevenMiddle,          // the middle layers do not split over the middle ranks (and vpp)
  kLayoutWithKnobs,       // pp_layout with any of the other four
  kLayoutSyntax,          // pp_layout does not parse
  kLayoutStages,          // number of virtual stages ≠ pp·vpp
  kLayoutLayers,          // number of t ≠ num_layers
  kLayoutEnds,            // E not once and first, or L not once and last
};

/// The first problem of `layout`'s split of `model`; no allocation unless
/// pp_layout is set (the search's fast path).
SplitProblem check_pipeline_split(const ModelConfig& model, const ParallelLayout& layout);

/// The knob a problem is reported against ("pp", "first_stage_layers", ...).
const char* split_problem_knob(SplitProblem problem);

/// The message for a problem, with the values involved.
std::string split_problem_message(SplitProblem problem, const ModelConfig& model,
                                  const ParallelLayout& layout);

/// The split of `model` under `layout`. Requires check_pipeline_split == kNone
/// (throws std::invalid_argument otherwise: a programmer error).
PipelineSplit pipeline_split(const ModelConfig& model, const ParallelLayout& layout);

/// A pp_layout string expanded to its virtual stages ("Et*2|(tt|)*2L" →
/// "Ett", "tt", "ttL"). Returns false and sets `error` (with the 1-based
/// column) when it does not parse; only E, t, L, '|', "*n" and "(...)*n".
bool expand_pp_layout(std::string_view text, std::vector<std::string>& stages,
                      std::string& error);

/// The shortest pp_layout we write for `stages` ("(t*2|)*3t*2L" style).
std::string compress_pp_layout(const std::vector<std::string>& stages);

}  // namespace sextant::sim
