// Limits a user puts on the search besides the knobs fixed in --layout.
#pragma once

#include <optional>

#include "sim/core/framework_behaviour.h"

namespace sextant::search {

struct SearchConstraints {
  std::optional<int> max_tp;  // largest tensor-parallel size to try
  bool tp_within_node = false;  // keep every TP group on one node (tp <= gpus_per_node)
  /// Memory one GPU may use, in bytes; default the GPU's memory. The layout
  /// fits when it needs at most (1 − memory_headroom) of this.
  std::optional<double> memory_limit_bytes;
  /// Fraction kept free for what the prediction does not model. For the
  /// sextant engine the CUDA context and NCCL's buffers are predicted
  /// (sim/memory/runtime_memory.h) and held against the memory with the
  /// tensors (search/memory_fit.h), so the headroom covers only the tensor
  /// model's error: the engine's arena exceeded the predicted tensors by up to
  /// 4.6 % on our runs (GPT-2.7B, mbs 4, one H100: 69.23 GiB against 66.16;
  /// reports/measurements/2026-11-28-rank-memory-model). Hence 5 % still, now
  /// for that error alone. For other software (PyTorch's caching allocator,
  /// its own communicators: not modelled) it covers those too, as before.
  double memory_headroom = 0.05;
  /// Search fp8 GEMMs too (off: precision changes numerics, so users opt in).
  bool allow_fp8 = false;
  /// Try selective recomputation (off where the framework has none: its
  /// FrameworkSupport, which the search reads from the profile).
  bool allow_selective_recompute = true;
  /// What the training software runs (the profile's framework: search_layouts
  /// sets it): the search offers no other schedule, precision, ZeRO stage,
  /// FSDP implementation, cp, ep or split.
  sim::FrameworkSupport supports;
};

}  // namespace sextant::search
