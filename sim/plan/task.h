// One task of a Plan: a compute block, a collective, a pipeline send, a
// gradient bucket's reduction or the optimizer step, on one stream of one
// pipeline stage's representative rank.
//
// A task says *what* runs, never how long it takes: the cost model (sim/event)
// gives durations, the engine (engine/) runs the same task with real kernels.
// Tasks are small plain values (no strings): a plan of a large model holds
// hundreds of thousands; task_name() spells one out when a trace needs it.
#pragma once

#include <cstdint>
#include <string_view>

namespace sextant::sim {

/// The streams of one rank. Each runs one task at a time, in issue order
/// (CUDA streams; NCCL communicators each on their own stream).
enum class StreamKind : std::uint8_t {
  kCompute,
  kTensorParallel,
  kContextParallel,
  kExpertParallel,
  kPipelineForward,   // sends of activations to the next stage
  kPipelineBackward,  // sends of gradients to the previous stage
  kDataParallel,        // gradient reduce-scatter / all-reduce
  kDataParallelGather,  // parameter all-gathers: their own NCCL stream, as FSDP and
                        // Megatron's distributed optimizer issue them, so a gather
                        // for the next layer never waits behind a reduce
};
inline constexpr int kStreamKinds = 8;
std::string_view to_string(StreamKind value);  // "compute", "tp", ...
/// For people: "TP comm", "PP send (forward)", ...
std::string_view stream_title(StreamKind value);

enum class TaskKind : std::uint8_t {
  kCompute,            // a block's kernels (`block`, `pass`)
  kTensorParallel,     // the block's TP collectives: its all-reduce, or with --tp-comm-overlap
                       // SP's all-gather + reduce-scatter beside the block
  kTensorParallelTail, // with --tp-comm-overlap: the chunk no GEMM can hide
  // Sequence parallelism without --tp-comm-overlap (Korthikanti et al. 2022,
  // Sec. 4.2.2): the block's two collectives where they happen, the all-gather
  // before the block's compute (forward: of the norm's output, before QKV or
  // fc1; backward: of the residual stream's gradient, before proj's or fc2's
  // backward) and the reduce-scatter after it (forward: of proj's or fc2's
  // partial sums; backward: of the QKV or fc1 input gradient).
  kTensorParallelGather,
  kTensorParallelScatter,
  kContextRing,        // the cp−1 ring steps of the attention core
  kExpertDispatch,     // all-to-all of tokens to their experts
  kExpertCombine,      // all-to-all of expert outputs back
  kPipelineSend,       // activations (forward) or gradients (backward) to the adjacent stage
  kPipelineReceive,    // the receiving end, where the receive blocks the stage (sequential exchange)
  kGradientReduce,     // a bucket's all-reduce (ZeRO-0) or reduce-scatter (ZeRO >= 1)
  kParameterGather,    // a bucket's all-gather of updated weights (ZeRO >= 1)
  kTiedEmbeddingReduce,  // the tied embedding's gradient between the first and last stage
  kOptimizerStep,
};

/// The part of the model a task works on.
enum class Block : std::uint8_t {
  kNone,
  kEmbedding,
  kAttention,      // the attention block (without its core when that is its own task)
  kAttentionCore,  // the attention core, its own task only under context parallelism
  kMlp,            // the MLP block (router and experts in a MoE layer)
  // Halves of a MoE layer's shared-expert forward, their own tasks only with
  // moe_shared_expert_overlap: fc1 beside the dispatch, the rest beside the combine
  // (Megatron-Core SharedExpertMLP); costed as half of the shared expert each.
  kSharedExpertFc1,
  kSharedExpertFc2,
  kOutput,         // final norm, logits and cross entropy
};

enum class Pass : std::uint8_t {
  kNone,
  kForward,
  kBackward,        // input and weight gradients
  kBackwardInput,   // zero-bubble B
  kBackwardWeight,  // zero-bubble W
  kRecompute,       // the forward again before the backward (full recomputation)
};

inline constexpr std::int32_t kNoIndex = -1;

struct Task {
  TaskKind kind = TaskKind::kCompute;
  Block block = Block::kNone;
  Pass pass = Pass::kNone;
  StreamKind stream = StreamKind::kCompute;
  std::uint16_t stage = 0;
  std::uint16_t chunk = 0;                // model chunk (virtual stage) on this stage
  std::int32_t microbatch = kNoIndex;     // kNoIndex: once per iteration
  std::int32_t layer = kNoIndex;          // global transformer layer index
  std::int32_t bucket = kNoIndex;         // Plan::buckets index (DP tasks)
  std::uint32_t first_dep = 0;            // into Plan::deps
  std::uint32_t dep_count = 0;
};

}  // namespace sextant::sim
