// Which ranges of the flat gradient buffer are reduced together over the
// data-parallel group, and after which of a step's tasks each is complete.
//
// Buckets are contiguous ranges of the engine's flat buffers
// (parameter_layout.h), cut at tensor boundaries once a bucket holds
// `bucket_elements` (Megatron-Core's DDP cuts its buckets at parameter
// boundaries too, 40M parameters by default: sim/plan/gradient_buckets.h).
// Together they cover the whole buffer, padding included, so the reduced
// buffer is the same on every rank.
//
// A tensor's gradient is final after the last micro-batch's backward task
// that writes it: the embedding tables after the embedding's backward (a tied
// wte is written by the output layer's backward first), the final norm and an
// untied output layer after the output block's backward, every tensor of
// layer L after layer L's attention backward — the last of that layer's
// backward tasks, and after the tasks that sum its residual-stream biases
// (proj's in layer L's MLP backward, fc2's in layer L+1's attention backward
// or the output block's; transformer.h), or under tensor parallelism after the
// collective task that follows it (it runs the norm's backward). A bucket is
// ready after the latest
// of its tensors', so backward's later buckets reduce while it computes the
// earlier layers (PyTorch DDP, Li et al. 2020, Sec. 3.2.3).
//
// Plain C++: tested on the CPU.
#pragma once

#include <cstddef>
#include <span>
#include <utility>
#include <vector>

#include "engine/model/parameter_layout.h"
#include "sim/plan/task.h"

namespace sextant::engine {

/// The factor every bucket's size must be a multiple of for a distributed
/// optimizer over `dp` ranks: each rank's block of a bucket then starts 16
/// bytes aligned in bf16 (8 elements), as the kernels and NCCL's fast paths want.
inline std::size_t sharded_bucket_multiple(int dp) { return 8 * static_cast<std::size_t>(dp); }

/// Megatron-Core DDP's default bucket, 40M parameters (sim::default_bucket_params
/// below 40 data-parallel ranks); TrainerOptions::bucket_elements.
inline constexpr std::size_t kDefaultBucketElements = 40'000'000;

/// `elements` rounded up to a multiple of `multiple`.
inline std::size_t round_up_elements(std::size_t elements, std::size_t multiple) {
  return (elements + multiple - 1) / multiple * multiple;
}

struct GradientBucketRange {
  std::size_t begin = 0;     // first element in the flat buffers
  std::size_t elements = 0;
  std::size_t ready_after = 0;  // index into the step's tasks
};

/// The data-parallel gradient buckets of a whole model's layout, in buffer
/// order, as the Plan makes them (sim/plan/gradient_buckets.h, after
/// Megatron-Core's DDP): walking from the output down through the layers to
/// the embeddings, a bucket closes once it holds at least `bucket_elements`,
/// never inside a layer (the output and the embeddings count as units; the
/// embeddings join the bucket still open, or make one). Each bucket is one contiguous range,
/// since the layout holds each unit contiguously (parameter_layout.h), and is
/// reduced after the last backward task among `tasks` (one rank's tasks of a
/// step in issue order, as the trainer runs them: compute tasks and the
/// optimizer step) that writes any of its gradients. `multiple`: every
/// bucket's size is a multiple of it (a distributed optimizer's 8·dp, so each
/// rank's block of a bucket is 16-byte aligned in bf16): a bucket's end is
/// rounded up, into the next layer's first tensor, and the last ends at
/// total_elements() rounded up — past the layout's buffers, which the caller
/// allocates that long. Throws std::logic_error when a tensor's last backward
/// task is not among `tasks`.
std::vector<GradientBucketRange> plan_gradient_buckets(const ParameterLayout& layout,
                                                       std::span<const sim::Task> tasks,
                                                       std::size_t bucket_elements,
                                                       std::size_t multiple = 1);

/// The pieces of plan_gradient_buckets, for a pipeline stage's chunks too:
/// the index among `tasks` of each tensor's last gradient write (as
/// plan_gradient_buckets says; std::logic_error when one has none) ...
std::vector<std::size_t> final_gradient_writes(const ParameterLayout& layout, std::span<const sim::Task> tasks);
/// ... the buckets' ranges, unrounded, tiling [0, total_elements()) ...
std::vector<ElementRange> gradient_bucket_ranges(const ParameterLayout& layout, std::size_t bucket_elements);
/// ... and the ends of ranges (tiling from the first's begin) rounded up to
/// `multiple`, the last's to its end rounded up; a range the rounding of the
/// one before swallows disappears.
std::vector<ElementRange> round_bucket_ends(const std::vector<ElementRange>& ranges, std::size_t multiple);

/// A pipeline stage's buckets, its chunks' ParameterLayouts back to back in
/// `chunks`' order, as the Plan makes them (sim/plan/gradient_buckets.cc): the
/// first stage's first chunk cut into buckets of at least `bucket_elements`,
/// every other chunk one bucket (their reductions hide behind the other
/// stages' or chunks' backward anyway); ends rounded up to `multiple`.
std::vector<ElementRange> stage_gradient_bucket_ranges(const std::vector<ParameterLayout>& chunks, bool first_stage,
                                                       std::size_t bucket_elements, std::size_t multiple);

/// Expert parallelism's two kinds of gradient (Megatron-Core's DDP keeps
/// expert_parallel_buffers apart): `ranges`, tiling a stage's buffer (the
/// chunks' layouts back to back), cut where its tensors change between expert
/// weights (ParameterTensor::expert, reduced over the expert-data-parallel
/// group) and the rest (reduced over dp); each tensor's alignment padding goes
/// with it. `expert[i]` says which kind ranges[i] holds.
struct ExpertSplitRanges {
  std::vector<ElementRange> ranges;
  std::vector<bool> expert;
};
ExpertSplitRanges split_at_expert_tensors(const std::vector<ElementRange>& ranges,
                                          const std::vector<ParameterLayout>& chunks);

/// Megatron's --overlap-param-gather (the distributed optimizer's bf16 weights
/// gathered bucket by bucket while the forward runs): for each of `tasks`, the
/// buckets whose parameters it is the first forward task to read, so the
/// trainer waits for a bucket's all-gather just before that task. A layer's
/// tensors are read from its first forward task (the attention block, or under
/// tp its collective before it), the embeddings' by the embedding, the final
/// norm's and output layer's by the output block (a tied wte by the
/// embedding, which runs first). Throws std::logic_error when a bucket holds a
/// tensor no forward task reads.
std::vector<std::vector<int>> first_parameter_reads(const ParameterLayout& layout, std::span<const sim::Task> tasks,
                                                    const std::vector<GradientBucketRange>& buckets);

}  // namespace sextant::engine
