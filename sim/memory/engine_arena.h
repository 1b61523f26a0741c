// The engine's device arena (engine/model/arena_plan.h) for a pipeline stage's
// activations and workspaces, counted block by block as the engine's parts
// reserve them (engine/transformer.cc Transformer::Transformer and each
// part's reserve_* function, engine/trainer.cc Trainer::plan_memory), from the
// shape the engine runs (sim/core/transformer_shape.h). sim/ may not include
// engine/, so this file mirrors the reserve lists; each term names the engine
// function and block it counts.
//
// How it differs from Korthikanti et al.'s count (activation_memory.h), which
// stays the model of Megatron runs:
// - the logits (T, vocab/tp) are kept in bf16 and the cross entropy writes
//   their gradient in place (output_layer.cc OutputLayer::reserve_stored):
//   2·T·V bytes, where Megatron's fp32 softmax takes 4·T·V;
// - one micro-batch's pass buffers (activation gradients, the fused QKV and
//   its gradient, SwiGLU's gradients, sequence-parallel gathers), reserved
//   once for every layer and slot (BufferReserver::shared);
// - the norms' fp32 statistics (mean and rstd per row, RMSNorm's mean too);
// - under full recomputation every layer's input plus one layer's whole set
//   (the one being recomputed), and the pass buffers as above;
// - selective recomputation stores what no recomputation stores (flash
//   attention keeps no s×s scores, so there is nothing to drop);
// - the workspaces (category other): cuBLASLt's 32 MiB, flash attention's
//   backward (fp32 dQ accumulator), the norms' and bias gradients' column
//   partials, the embedding backward's sort, the step's tokens, targets and
//   losses.
// The cp attention cores' buffers are context_parallel_buffers.h's.
//
// Not predicted from the model alone: the embedding backward's radix sort
// workspace is what CUB asks at run time (cub::DeviceRadixSort::SortPairs with
// a null buffer, kernels/embedding.cu cub_sort_bytes); it is taken as CUB's
// double buffers of keys and values, 8 bytes per token, which leaves out its
// few KiB of histograms. Mixture-of-Experts blocks (moe_layer.cc) are not
// mirrored: MoE models keep the Korthikanti count (engine_arena_modelled).
#pragma once

#include "sim/core/model_config.h"
#include "sim/core/parallel_layout.h"
#include "sim/core/pipeline_split.h"

namespace sextant::sim {

/// The arena's activations and workspaces of one pipeline stage, bytes.
struct EngineArenaBytes {
  double activations = 0;  // MemoryCategory::kActivations
  double other = 0;        // MemoryCategory::kOther: workspaces, tokens, targets, losses
};

/// Whether engine_stage_arena_bytes mirrors `model` (dense models; not MoE).
bool engine_arena_modelled(const ModelConfig& model);

/// Activation slots of pipeline stage `stage`: its chunk-micro-batches in
/// flight at the schedule's peak, as engine/pipeline/stage_program.h assigns
/// them (a forward takes a slot, its backward frees it).
int engine_activation_slots(const ParallelLayout& layout, int stage);

/// The arena's activations and other bytes of stage `stage` holding `split`'s layers.
EngineArenaBytes engine_stage_arena_bytes(const ModelConfig& model, const ParallelLayout& layout,
                                          const PipelineSplit& split, int stage);

}  // namespace sextant::sim
