// What a training software does differently from Megatron-Core, by mechanism:
// how it exchanges activations between pipeline stages, which kernels its loss
// and gradient accumulation run, and what it cannot run at all. A framework
// preset (configs/frameworks/*.yaml, `behaviour:` and `supports:`) switches
// these on; both engines read them (the analytic model and the event
// simulator's plan and task costs), so a difference in software is a
// difference in what runs, not a factor on the step time.
//
// Defaults are Megatron-Core's (the datasheet profiles' software).
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "sim/core/parallel_layout.h"

namespace sextant::sim {

/// How a pipeline stage exchanges activations and gradients with its neighbours.
enum class PipelineExchange : std::uint8_t {
  /// Megatron: a step's send and receive go out together (send_forward_recv_backward
  /// through torch.distributed.batch_isend_irecv), one transfer time per exchange.
  kBatched,
  /// DeepSpeed's PipelineEngine (deepspeed/runtime/pipe/engine.py, p2p.py): each
  /// SendActivation, RecvActivation, SendGrad, RecvGrad is its own blocking
  /// dist.send / dist.recv, one after the other on the stage's stream, so a
  /// stage's receive does not overlap its own send.
  kSequential,
};

/// The vocabulary-parallel cross entropy's kernels.
enum class CrossEntropyKernel : std::uint8_t {
  /// PyTorch ops one by one (Megatron tensor_parallel/cross_entropy.py).
  kUnfused,
  /// --cross-entropy-loss-fusion (Megatron-Core 0.9+, fusions/fused_cross_entropy.py):
  /// the same arithmetic in three jit-fused kernels forward and one backward.
  kFused,
};

/// Where the micro-batches' weight gradients are summed.
enum class GradientAccumulation : std::uint8_t {
  /// Megatron's --gradient-accumulation-fusion: the weight-gradient GEMM adds
  /// into the fp32 main_grad buffer itself (fused_weight_gradient_mlp_cuda).
  kInWeightGradientGemm,
  /// DeepSpeed's engines, which keep no Megatron main_grad buffer for the
  /// fused weight-gradient kernel to add into: the GEMM writes the micro-batch's
  /// gradient and a separate memory-bound pass adds it to the running sum,
  /// under bf16 BF16_Optimizer.update_hp_grads into fp32 after every
  /// micro-batch (deepspeed/runtime/bf16_optimizer.py; pipe/engine.py
  /// _exec_backward_pass), under fp16 autograd's AccumulateGrad into .grad.
  kSeparatePass,
};

struct FrameworkBehaviour {
  PipelineExchange pipeline_exchange = PipelineExchange::kBatched;
  CrossEntropyKernel cross_entropy = CrossEntropyKernel::kUnfused;
  GradientAccumulation gradient_accumulation = GradientAccumulation::kInWeightGradientGemm;
};

/// What the software can run at all, knob by knob (the `supports:` keys of a
/// framework file, each defaulting to everything the simulator models): the
/// search offers only these values (candidate_space.cc, restrict_to_framework),
/// and a layout asking for another is refused naming the key.
struct FrameworkSupport {
  /// Pipeline schedules (`schedules:`); vpp > 1 needs 1f1b-interleaved.
  std::vector<Schedule> schedules{Schedule::kOneFOneB, Schedule::kInterleaved, Schedule::kGpipe,
                                  Schedule::kZeroBubbleH1};
  std::vector<Precision> precisions{Precision::kBf16, Precision::kFp16, Precision::kFp8};
  /// ZeRO-3 implementations (`fsdp:`); empty: no ZeRO-3 at all.
  std::vector<FsdpImplementation> fsdp{FsdpImplementation::kMegatronFsdp, FsdpImplementation::kFsdp2,
                                       FsdpImplementation::kDeepSpeedZero3};
  bool flash_attention = true;       // a fused attention kernel (else Megatron's unfused core)
  bool sequence_parallel = true;     // Korthikanti et al. 2022
  bool selective_recompute = true;   // Korthikanti et al. 2022 (the search skips it when false)
  bool overlap_grad_reduce = true;   // reduce gradients during the backward
  bool overlap_param_gather = true;  // gather weights during the next forward
  bool tp_comm_overlap = true;       // TP collectives pipelined with the GEMMs
  bool context_parallel = true;      // cp > 1
  bool expert_parallel = true;       // ep > 1 (and etp > 1)
  /// Any split but the even one: first/last_stage_layers, embedding/loss_in_split, pp_layout.
  bool uneven_pipeline_split = true;
  int max_zero_without_pipeline = 3;  // highest ZeRO stage with pp = 1 (1: a distributed optimizer)
  int max_zero_with_pipeline = 3;     // highest ZeRO stage usable with pp > 1

  bool runs(Schedule s) const { return std::find(schedules.begin(), schedules.end(), s) != schedules.end(); }
  bool runs(Precision p) const { return std::find(precisions.begin(), precisions.end(), p) != precisions.end(); }
  bool runs(FsdpImplementation f) const { return std::find(fsdp.begin(), fsdp.end(), f) != fsdp.end(); }
  /// The highest ZeRO stage at pipeline size `pp` (ZeRO-3 also needs an FSDP implementation).
  int max_zero(int pp) const {
    const int most = pp > 1 ? max_zero_with_pipeline : max_zero_without_pipeline;
    return fsdp.empty() ? std::min(most, 2) : most;
  }
  /// The framework-file key that limits zero at pipeline size `pp`.
  const char* max_zero_key(int pp) const {
    return pp > 1 ? "max_zero_with_pipeline" : "max_zero_without_pipeline";
  }
};

std::string_view to_string(PipelineExchange value);
std::string_view to_string(CrossEntropyKernel value);
std::string_view to_string(GradientAccumulation value);
std::optional<PipelineExchange> parse_pipeline_exchange(std::string_view text);
std::optional<CrossEntropyKernel> parse_cross_entropy_kernel(std::string_view text);
std::optional<GradientAccumulation> parse_gradient_accumulation(std::string_view text);

}  // namespace sextant::sim
