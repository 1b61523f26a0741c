// What of a layout's predicted memory the search holds against a GPU's memory.
//
// The runtime memory (sim/memory/runtime_memory.h: the CUDA context, NCCL's
// communicators and buffers) is modelled for the sextant engine's process,
// which builds its communicators as rank_communicators says. Other software
// (Megatron-LM, NeMo, DeepSpeed on PyTorch) builds others, lazily, and adds
// PyTorch's caching allocator: for a profile of such software the search holds
// the tensors alone against the memory and the headroom stands in for the rest,
// as it always did (the published runs' completions stay what they were).
#pragma once

#include "sim/core/cost_profile.h"
#include "sim/memory/memory_model.h"

namespace sextant::search {

/// Whether the runtime memory model describes the software `profile` ran.
inline bool runtime_memory_modelled(const sim::CostProfile& profile) {
  return profile.software == sim::Software::kSextantEngine;
}

/// The bytes the search holds against the memory limit.
inline double memory_needed_bytes(const sim::MemoryBreakdown& m, const sim::CostProfile& profile) {
  return runtime_memory_modelled(profile) ? m.total() : m.tensors();
}

}  // namespace sextant::search
