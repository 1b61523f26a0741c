// What the engine executes, and everything it does not refused by name: the
// layout knobs (etp, cp with ep, ZeRO-2/3, fp8, the unfused attention, the
// zero-bubble schedule, fsdp, the MoE overlaps, reductions in 16 bits, ...)
// and the model features (sliding-window attention, multi-head latent
// attention, q/k/v-only biases) it has no kernels or exchanges for. Plain C++,
// so `sextant run` refuses the same way with or without the CUDA toolkit, and
// before any GPU is touched. Every refusal is a sim::ConfigError naming the
// option (--layout, --model, --global-batch) and the knob, saying what is accepted.
#pragma once

#include "sim/core/model_config.h"
#include "sim/core/parallel_layout.h"

namespace sextant::engine::training {

/// etp other than 1: sim::ConfigError (--layout) naming the knob.
void refuse_model_parallel(const sim::PartialLayout& layout);

/// The layout the engine executes for `layout` over `world_size` ranks: dp
/// fills the ranks tp·cp·pp leaves (or must match them), gbs is `global_batch`
/// when > 0 (default mbs·dp; given in both, the two must agree), and the
/// overlaps are what the engine does (it always overlaps the gradient
/// reduction with backward). cp_comm_type is the layout's (p2p: the K/V ring;
/// all_gather), all_gather when it does not say: the engine's default, which
/// differs from the simulator's (Megatron-Core's) p2p. Throws sim::ConfigError naming the knob and what
/// is accepted for anything it does not execute: etp > 1, cp with ep > 1, zero >= 2, a
/// precision or attention other than bf16/flash, zero-bubble schedules,
/// overlap_grad_reduce=0 with dp > 1, fsdp, grad_reduce_in_fp32=0, the MoE
/// overlaps, tp_comm_overlap without sp, overlap_param_gather without
/// ZeRO-1, batches the ranks cannot split.
sim::ParallelLayout executable_layout(const sim::PartialLayout& layout, int world_size, int global_batch);

/// The model features the engine does not build (--model: sliding_window,
/// mla, add_qkv_bias without add_bias_linear).
void refuse_unexecuted_model(const sim::ModelConfig& model);

/// Tensor parallelism splits the heads, the query groups and the MLP
/// (Shoeybi et al. 2019): each must be a multiple of tp (--layout tp).
void check_tensor_parallel_split(const sim::ModelConfig& model, int tp);
/// Expert parallelism splits the experts (--layout ep): an MoE model whose
/// expert count ep divides.
void check_expert_parallel_split(const sim::ModelConfig& model, int ep);
/// Context parallelism (--layout cp) splits each sequence into 2·cp equal
/// chunks: a dense model (cp with MoE layers is not executed yet) whose
/// sequence length is a multiple of 2·cp, and under sp each rank's mbs·seq/cp
/// tokens a multiple of tp.
void check_context_parallel_split(const sim::ModelConfig& model, const sim::ParallelLayout& layout);

}  // namespace sextant::engine::training
