// How one training job is split over GPUs: the --layout knobs of DESIGN.md.
//
// Rank order is tp-cp-ep-dp-pp (tp fastest-varying), as in Megatron-Core.
// Expert layers re-partition each stage's tp·cp·dp ranks into etp × ep ×
// expert-dp (Megatron's MoE parallel folding).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace sextant::sim {

enum class Recompute { kNone, kSelective, kFull };
/// Pipeline schedule: GPipe, 1F1B, interleaved 1F1B (Narayanan et al. 2021), or
/// ZB-H1 (Qi et al. 2023), 1F1B with backward split into input and weight gradients.
enum class Schedule { kGpipe, kOneFOneB, kInterleaved, kZeroBubbleH1 };
/// GEMM precision. fp16 computes like bf16 but, as Megatron's --fp16, reduces
/// gradients in fp16 (bf16 forces fp32 reduction); fp8 runs the GEMMs in FP8.
enum class Precision { kBf16, kFp16, kFp8 };
/// Attention kernel: fused flash attention (Dao et al. 2022) or Megatron's
/// unfused path that materialises the s×s scores (the only one before 2022).
enum class AttentionKernel { kFlash, kUnfused };
/// How context-parallel attention exchanges K and V (Megatron-Core
/// --cp-comm-type): a ring of point-to-point steps overlapped with the
/// attention of the chunk at hand (Liu et al. 2023, "Ring Attention"; p2p), or
/// one all-gather of K/V before the attention and a reduce-scatter of their
/// gradients after it (Llama 3, Dubey et al. 2024, Sec. 3.3.2; all_gather).
enum class CpCommType { kP2p, kAllGather };
/// Which ZeRO-3 / FSDP implementation shards the parameters (zero=3 only); they
/// differ in how far gathers run ahead, how many reductions may queue, and how
/// many collectives one unit takes (sim/comm/fsdp_behaviour.h).
enum class FsdpImplementation { kMegatronFsdp, kFsdp2, kDeepSpeedZero3 };

std::string_view to_string(Recompute value);
std::string_view to_string(Schedule value);
std::string_view to_string(Precision value);
std::string_view to_string(AttentionKernel value);
std::string_view to_string(FsdpImplementation value);
std::string_view to_string(CpCommType value);

/// A complete layout: every knob has a value.
struct ParallelLayout {
  int tp = 1;   // tensor parallel
  int pp = 1;   // pipeline parallel
  int vpp = 1;  // virtual stages (model chunks) per pipeline rank
  int dp = 1;   // data parallel
  int cp = 1;   // context parallel
  int ep = 1;   // expert parallel
  int etp = 1;  // tensor parallel inside an expert
  int mbs = 1;  // micro-batch size, sequences
  int gbs = 1;  // global batch size, sequences
  bool sp = false;  // sequence parallelism (Korthikanti et al. 2022)
  Recompute recompute = Recompute::kNone;
  int zero = 0;  // ZeRO stage of the data-parallel group; 1 = Megatron's distributed optimizer
  Schedule schedule = Schedule::kOneFOneB;
  Precision precision = Precision::kBf16;
  AttentionKernel attention = AttentionKernel::kFlash;
  // With zero=3 both are on (every ZeRO-3 implementation modelled overlaps its
  // gathers and reduce-scatters; parse_layout refuses =0, to_spec leaves them out).
  bool overlap_grad_reduce = true;   // Megatron --overlap-grad-reduce
  bool overlap_param_gather = false;  // Megatron --overlap-param-gather (needs zero >= 1)
  bool tp_comm_overlap = false;      // Megatron --tp-comm-overlap (needs sp)
  /// Megatron-Core --overlap-moe-expert-parallel-comm (0.14+, combined 1F1B,
  /// megatron/core/pipeline_parallel/combined_1f1b.py): in the steady state the
  /// forward of one micro-batch and the backward of another run layer by layer
  /// together, each one's expert all-to-all hidden behind the other's compute.
  /// Needs ep > 1 and pp = 1 or the interleaved schedule, and no full recomputation.
  bool moe_a2a_overlap = false;
  /// Megatron-Core --moe-shared-expert-overlap: the shared expert's forward runs
  /// on its own stream beside the token dispatch and combine of the same layer.
  bool moe_shared_expert_overlap = false;
  /// Gradients kept and reduced in fp32 (Megatron-Core's default under bf16;
  /// NeMo's grad_reduce_in_fp32) or in the weights' 16 bits (0: Megatron's
  /// --grad-reduce-in-bf16; fp16 always reduces in fp16, Megatron's default there).
  bool grad_reduce_in_fp32 = true;
  FsdpImplementation fsdp = FsdpImplementation::kMegatronFsdp;  // with zero=3
  CpCommType cp_comm_type = CpCommType::kP2p;  // with cp > 1 (Megatron-Core's default: p2p)
  // How the layers split over pipeline stages (sim/core/pipeline_split.h has the
  // semantics). All unset is Megatron's even split.
  int first_stage_layers = 0;        // --decoder-first-pipeline-num-layers; 0: not set
  int last_stage_layers = 0;         // --decoder-last-pipeline-num-layers; 0: not set
  bool embedding_in_split = false;   // --account-for-embedding-in-pipeline-split
  bool loss_in_split = false;        // --account-for-loss-in-pipeline-split
  std::string pp_layout;             // --pipeline-model-parallel-layout; empty: not set

  /// Any of the five split knobs is set (the split is not Megatron's default).
  bool custom_split() const {
    return first_stage_layers > 0 || last_stage_layers > 0 || embedding_in_split ||
           loss_in_split || !pp_layout.empty();
  }

  long long total_gpus() const { return 1LL * tp * cp * pp * dp; }
  /// Bytes per parameter of the gradient buffer and of its data-parallel reduction.
  double gradient_bytes_per_param() const {
    return precision == Precision::kFp16 || !grad_reduce_in_fp32 ? 2.0 : 4.0;
  }
  /// Micro-batches each pipeline processes per step: gbs / (mbs · dp).
  long long num_microbatches() const { return gbs / (1LL * mbs * dp); }
  /// Data-parallel size of expert weights: tp·cp·dp / (ep·etp).
  int expert_dp() const { return static_cast<int>(1LL * tp * cp * dp / (1LL * ep * etp)); }
  bool dist_opt() const { return zero >= 1; }

  /// "tp=8,pp=16,..." with every knob, parseable by parse_layout. The split
  /// knobs are written only when set (custom_split()); fsdp only with zero=3,
  /// where it means something; the two MoE overlaps only when on.
  std::string to_spec() const;
  /// The split knobs that are set, "first_stage_layers=5,last_stage_layers=5"
  /// style; empty for Megatron's even split.
  std::string split_spec() const;
};

/// A layout as the user gave it: knobs left out are std::nullopt and are
/// chosen by the search ("best completion of this").
struct PartialLayout {
  std::optional<int> tp, pp, vpp, dp, cp, ep, etp, mbs, gbs;
  std::optional<bool> sp;
  std::optional<Recompute> recompute;
  std::optional<int> zero;
  std::optional<Schedule> schedule;
  std::optional<Precision> precision;
  std::optional<AttentionKernel> attention;
  std::optional<bool> overlap_grad_reduce, overlap_param_gather, tp_comm_overlap;
  std::optional<bool> moe_a2a_overlap, moe_shared_expert_overlap;
  std::optional<bool> grad_reduce_in_fp32;
  std::optional<FsdpImplementation> fsdp;
  std::optional<CpCommType> cp_comm_type;
  // Split knobs: when any is given the others are unset (not searched); when
  // none is, the search picks the split (even where the layers divide).
  std::optional<int> first_stage_layers, last_stage_layers;
  std::optional<bool> embedding_in_split, loss_in_split;
  std::optional<std::string> pp_layout;
  bool split_given() const {
    return first_stage_layers || last_stage_layers || embedding_in_split || loss_in_split ||
           pp_layout;
  }
};

/// Calls f(to.knob, from.knob) for every knob of a layout (the fields that
/// ParallelLayout and PartialLayout share, in layout_knob_names()'s order);
/// `To` and `From` are either. One list for every copy of knobs from one
/// layout to another.
template <typename To, typename From, typename F>
void for_each_knob(To& to, const From& from, F&& f) {
  f(to.tp, from.tp), f(to.pp, from.pp), f(to.vpp, from.vpp), f(to.dp, from.dp), f(to.cp, from.cp);
  f(to.ep, from.ep), f(to.etp, from.etp), f(to.mbs, from.mbs), f(to.gbs, from.gbs), f(to.sp, from.sp);
  f(to.recompute, from.recompute), f(to.zero, from.zero), f(to.schedule, from.schedule);
  f(to.precision, from.precision), f(to.attention, from.attention);
  f(to.overlap_grad_reduce, from.overlap_grad_reduce), f(to.overlap_param_gather, from.overlap_param_gather);
  f(to.tp_comm_overlap, from.tp_comm_overlap), f(to.first_stage_layers, from.first_stage_layers);
  f(to.last_stage_layers, from.last_stage_layers), f(to.embedding_in_split, from.embedding_in_split);
  f(to.loss_in_split, from.loss_in_split), f(to.pp_layout, from.pp_layout), f(to.fsdp, from.fsdp);
  f(to.grad_reduce_in_fp32, from.grad_reduce_in_fp32), f(to.moe_a2a_overlap, from.moe_a2a_overlap);
  f(to.moe_shared_expert_overlap, from.moe_shared_expert_overlap), f(to.cp_comm_type, from.cp_comm_type);
}

/// Parses "tp=8,pp=12,recompute=selective,..." (DESIGN.md). `pp_layout` takes
/// Megatron's --pipeline-model-parallel-layout string without commas (stages
/// separated by '|', e.g. pp_layout=Et*3|(t*4|)*6t*3L); its syntax is checked here. `dist_opt=1` means
/// zero=1 and `dist_opt=0` zero=0. Throws ConfigError naming every bad item, its
/// column in `spec` and the accepted values; `source` names the input ("--layout").
PartialLayout parse_layout(std::string_view spec, std::string_view source = "--layout");

/// The layout a spec describes: every knob it gives, ParallelLayout's defaults
/// for the rest (gbs, when left out, mbs·dp; schedule interleaved when vpp > 1).
/// The inverse of ParallelLayout::to_spec(). Throws ConfigError as parse_layout.
ParallelLayout layout_from_spec(std::string_view spec, std::string_view source = "--layout");

/// The knob names parse_layout accepts, in the order they are listed to users.
std::string_view layout_knob_names();

}  // namespace sextant::sim
