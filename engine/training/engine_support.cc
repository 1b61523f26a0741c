#include "engine/training/engine_support.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "sim/core/config_error.h"

namespace sextant::engine::training {

namespace {

// The one way a refusal is said: the option, the knob (empty when none) and why.
[[noreturn]] void refuse(const std::string& option, const std::string& key, const std::string& message) {
  throw sim::ConfigError({{option, 0, 0, key, message}});
}

// Knobs the engine does not execute yet, and what they are.
constexpr std::pair<const char*, const char*> kModelParallelKnobs[] = {{"etp", "expert tensor parallelism"}};

std::optional<int> knob_of(const sim::PartialLayout& p, std::string_view name) {
  if (name == "etp") return p.etp;
  return std::nullopt;
}

// The overlap and precision knobs the engine does not execute as given: refused
// by name rather than ignored.
void refuse_unexecuted_knobs(const sim::PartialLayout& p) {
  if (p.grad_reduce_in_fp32 && !*p.grad_reduce_in_fp32)
    refuse("--layout", "grad_reduce_in_fp32", "0: the engine reduces gradients in fp32; accepted: 1");
  if (p.fsdp)
    refuse("--layout", "fsdp", "fully sharded data parallelism (ZeRO-3) is not executed yet (issue 13); "
                                           "leave fsdp out (zero=1 shards the optimizer state)");
  for (const auto& [knob, name] : {std::pair{p.moe_a2a_overlap, "moe_a2a_overlap"},
                                   std::pair{p.moe_shared_expert_overlap, "moe_shared_expert_overlap"}})
    if (knob && *knob)
      refuse("--layout", name, "1: the engine runs the expert-parallel all-to-all and the shared expert "
                                           "without overlapping them with compute yet; accepted: 0");
}

// Pipeline parallelism (engine/pipeline/): pp, vpp, the schedule (1F1B, or
// interleaved 1F1B with vpp > 1; GPipe too) and the split knobs, into `l`
// (whose dp, mbs and gbs are set).
void pipeline_layout(const sim::PartialLayout& p, sim::ParallelLayout& l) {
  l.pp = p.pp.value_or(1);
  l.vpp = p.vpp.value_or(1);
  if (l.vpp > 1 && l.pp == 1)
    refuse("--layout", "vpp", std::to_string(l.vpp) + ": model chunks interleave over a pipeline; needs pp > 1");
  l.schedule = p.schedule.value_or(l.vpp > 1 ? sim::Schedule::kInterleaved : sim::Schedule::kOneFOneB);
  if (l.schedule == sim::Schedule::kZeroBubbleH1)
    refuse("--layout", "schedule", "zb-h1: the engine runs whole backward passes; accepted: 1f1b, "
                                               "interleaved (with vpp > 1), gpipe");
  if (l.vpp > 1 && l.schedule != sim::Schedule::kInterleaved)
    refuse("--layout", "schedule", std::string(sim::to_string(l.schedule)) + " runs one model chunk per "
                                               "stage; vpp=" + std::to_string(l.vpp) + " needs schedule=interleaved");
  const int microbatches = l.gbs / (l.mbs * l.dp);
  if (l.vpp > 1 && microbatches % l.pp != 0)
    refuse("--layout", "gbs", "interleaved 1F1B needs the micro-batches per replica (gbs/(mbs·dp) = " +
                                              std::to_string(microbatches) + ") to be a multiple of pp (" +
                                              std::to_string(l.pp) + ")");
  l.first_stage_layers = p.first_stage_layers.value_or(0);
  l.last_stage_layers = p.last_stage_layers.value_or(0);
  l.embedding_in_split = p.embedding_in_split.value_or(false);
  l.loss_in_split = p.loss_in_split.value_or(false);
  l.pp_layout = p.pp_layout.value_or("");
}

}  // namespace

void refuse_model_parallel(const sim::PartialLayout& p) {
  for (const auto& [name, what] : kModelParallelKnobs) {
    const std::optional<int> knob = knob_of(p, name);
    if (knob && *knob != 1)
      refuse("--layout", name,
          std::to_string(*knob) + ": `sextant run` trains data-, tensor-, context- and pipeline-parallel "
              "layouts (dp, tp, cp, pp, vpp; ep for MoE models) so far; " + what +
              " is not executed yet, so " + name + " must be 1 (or left out)");
  }
}

sim::ParallelLayout executable_layout(const sim::PartialLayout& p, int world_size, int global_batch) {
  refuse_model_parallel(p);
  refuse_unexecuted_knobs(p);
  const int tp = p.tp.value_or(1);
  const int cp = p.cp.value_or(1);
  const int pp = p.pp.value_or(1);
  if (cp < 1) refuse("--layout", "cp", std::to_string(cp) + ": must be at least 1");
  // The ranks a replica takes: tp, tp·cp with context parallelism, times pp with a pipeline.
  const int replica = tp * cp * pp;
  const std::string model_parallel = std::string("tp") + (cp > 1 ? "·cp" : "") + (pp > 1 ? "·pp" : "");
  const std::string product = model_parallel + "·dp";
  if (p.dp && replica * *p.dp != world_size)
    refuse("--layout", "dp",
        product + " = " + std::to_string(replica * *p.dp) + " but this run has " + std::to_string(world_size) +
            " rank(s): start " + product + " processes with --nproc-per-node " + std::to_string(replica * *p.dp) +
            " (or a Slurm / mpirun job of that many tasks), or leave dp out to fill the ranks");
  if (world_size % replica != 0) {
    // The knob named: the last of tp, cp, pp the layout sets above 1.
    const char* knob = pp > 1 ? "pp" : cp > 1 ? "cp" : "tp";
    const int value = pp > 1 ? pp : cp > 1 ? cp : tp;
    refuse("--layout", knob,
        std::to_string(value) + ": this run has " + std::to_string(world_size) + " rank(s), not a multiple of " +
            (replica == tp ? std::string("tp") : model_parallel + " = " + std::to_string(replica)) +
            ": start " + product + " processes (--nproc-per-node, Slurm or mpirun)");
  }
  const int dp = world_size / replica;
  // The distributed optimizer shards over dp x cp (the ranks holding the same
  // weights: Megatron-Core's data-and-context-parallel group).
  if (p.zero && *p.zero != 0 && dp * cp == 1)
    refuse("--layout", "zero", "ZeRO shards state over data-parallel GPUs; with one GPU use zero=0");
  if (cp > 1 && p.ep.value_or(1) > 1)
    refuse("--layout", "ep", std::to_string(*p.ep) + " with cp=" + std::to_string(cp) +
                                 ": context parallelism with expert parallelism is not executed yet; "
                                 "use ep=1 with cp > 1, or cp=1");
  if (p.zero && *p.zero > 1)
    refuse("--layout", "zero",
        std::to_string(*p.zero) + ": the engine executes zero=0 and zero=1 (dist_opt=1, the distributed "
        "optimizer) so far; ZeRO-2/3 are not executed yet (issue 13); accepted: 0, 1");
  if (p.precision && *p.precision != sim::Precision::kBf16)
    refuse("--layout", "precision", "the engine trains in bf16 (fp32 master weights); accepted: bf16");
  if (p.attention && *p.attention != sim::AttentionKernel::kFlash)
    refuse("--layout", "attention", "the engine's attention is flash attention; accepted: flash");
  sim::ParallelLayout l;
  l.mbs = p.mbs.value_or(1);
  if (global_batch > 0 && p.gbs && *p.gbs != global_batch)
    refuse("--global-batch", "", "is " + std::to_string(global_batch) + " but --layout says gbs=" +
                                  std::to_string(*p.gbs));
  l.dp = dp;
  l.tp = tp;
  l.cp = cp;
  // The engine runs both context-parallel attention cores: the K/V ring (p2p,
  // engine/transformer/context_parallel_ring_attention_core.h) and the
  // all-gather (context_parallel_attention_core.h), its default. The layout
  // says what runs, and so what --compare simulates.
  l.cp_comm_type = p.cp_comm_type.value_or(sim::CpCommType::kAllGather);
  l.zero = p.zero.value_or(0);
  // Expert parallelism folds over the data-parallel ranks (tp = 1 with MoE:
  // engine/model/transformer_shape.cc), Megatron-Core's MoE parallel folding.
  l.ep = p.ep.value_or(1);
  if (l.ep < 1 || dp % l.ep != 0)
    refuse("--layout", "ep", std::to_string(l.ep) + ": the experts are split over data-parallel ranks, so ep must "
                                                     "divide dp = " + std::to_string(dp));
  l.gbs = global_batch > 0 ? global_batch : p.gbs.value_or(l.mbs * dp);
  if (dp == 1 && l.gbs % l.mbs != 0)
    refuse("--layout", "gbs", std::to_string(l.gbs) + " is not a multiple of mbs=" + std::to_string(l.mbs) +
                               " (one GPU: the step runs gbs / mbs micro-batches)");
  if (l.gbs % (l.mbs * dp) != 0)
    refuse("--layout", "gbs", std::to_string(l.gbs) + " is not a multiple of mbs·dp = " +
                               std::to_string(l.mbs) + "·" + std::to_string(dp) +
                               " (each data-parallel rank runs gbs / (mbs·dp) micro-batches)");
  l.recompute = p.recompute.value_or(sim::Recompute::kNone);
  // Sequence parallelism (Korthikanti et al. 2022) runs with tp > 1; at tp = 1 there is nothing to split.
  l.sp = p.sp.value_or(false) && tp > 1;
  // Megatron --tp-comm-overlap: the sequence-parallel all-gathers and
  // reduce-scatters pipelined with the GEMMs (engine/tensor_parallel/overlap_schedule.h).
  if (p.tp_comm_overlap.value_or(false)) {
    if (tp < 2 || !l.sp)
      refuse("--layout", "tp_comm_overlap",
                         "1: overlaps the sequence-parallel all-gather and reduce-scatter with the GEMMs, so it "
                         "needs tp > 1 and sp=1 (this layout has tp=" + std::to_string(tp) + ", sp=" +
                             (l.sp ? "1" : "0") + "); use tp_comm_overlap=0 or add sp=1 with tp > 1");
    l.tp_comm_overlap = true;
  }
  // Megatron --overlap-param-gather: the distributed optimizer's all-gathers of
  // the weights run at the next step's start, overlapped with its forward.
  if (p.overlap_param_gather.value_or(false)) {
    if (l.zero < 1 || dp * cp == 1)
      refuse("--layout", "overlap_param_gather",
                         "1: overlaps the distributed optimizer's all-gather of the weights with the next forward, "
                         "so it needs zero=1 (dist_opt=1) and dp > 1 (this layout has zero=" + std::to_string(l.zero) +
                             ", dp=" + std::to_string(dp) + "); use overlap_param_gather=0 or add dist_opt=1 with dp > 1");
    l.overlap_param_gather = true;
  }
  // The engine reduces each gradient bucket as soon as backward completes it
  // (Megatron's --overlap-grad-reduce), always, with or without a pipeline.
  if (p.overlap_grad_reduce && !*p.overlap_grad_reduce && dp * cp > 1)
    refuse("--layout", "overlap_grad_reduce",
                       "0: with data parallelism the engine always reduces each gradient bucket as soon as "
                       "backward completes it (Megatron's --overlap-grad-reduce); accepted: 1");
  l.overlap_grad_reduce = true;  // what the engine does, so what --compare and the checks predict
  pipeline_layout(p, l);
  return l;
}

void refuse_unexecuted_model(const sim::ModelConfig& model) {
  // The engine builds full causal attention and Megatron's all-or-nothing biases.
  if (model.sliding_window > 0)
    refuse("--model", "sliding_window", "the engine has no sliding-window attention; "
                                                    "simulate this model instead of running it");
  if (model.mla)
    refuse("--model", "mla", "the engine has no multi-head latent attention; "
                                         "simulate this model instead of running it");
  if (model.add_qkv_bias && !model.add_bias_linear)
    refuse("--model", "add_qkv_bias", "the engine has no q/k/v-only biases; "
                                                  "simulate this model instead of running it");
}

void check_expert_parallel_split(const sim::ModelConfig& model, int ep) {
  if (ep == 1) return;
  if (!model.moe)
    refuse("--layout", "ep", std::to_string(ep) + ": splits the experts of MoE layers; model '" + model.name +
                                 "' has none (use ep=1)");
  if (model.moe->num_experts % ep != 0)
    refuse("--layout", "ep", std::to_string(ep) + ": must divide the " + std::to_string(model.moe->num_experts) +
                                 " experts of model '" + model.name + "'");
}

void check_tensor_parallel_split(const sim::ModelConfig& model, int tp) {
  for (const auto& [count, key] : {std::pair{static_cast<std::int64_t>(model.num_attention_heads), "num_attention_heads"},
                                   std::pair{static_cast<std::int64_t>(model.num_query_groups), "num_query_groups"},
                                   std::pair{model.ffn_hidden_size, "ffn_hidden_size"}})
    if (count % tp != 0)
      refuse("--layout", "tp", std::to_string(tp) + ": " + key + " (" + std::to_string(count) +
                                               ") of model '" + model.name + "' must be a multiple of tp");
}

}  // namespace sextant::engine::training

namespace sextant::engine::training {

void check_context_parallel_split(const sim::ModelConfig& model, const sim::ParallelLayout& layout) {
  const int cp = layout.cp;
  if (cp == 1) return;
  if (model.moe)
    refuse("--layout", "cp", std::to_string(cp) + ": model '" + model.name + "' has MoE layers; context "
                                 "parallelism of MoE models is not executed yet (use cp=1)");
  // The causally load-balanced split (engine/model/context_parallel_chunks.h):
  // 2·cp chunks of equal length.
  if (model.seq_length % (2LL * cp) != 0)
    refuse("--layout", "cp", std::to_string(cp) + ": the sequence of " + std::to_string(model.seq_length) +
                                 " tokens is cut into 2·cp = " + std::to_string(2 * cp) +
                                 " equal chunks, so --seq-length must be a multiple of " + std::to_string(2 * cp));
  // Sequence parallelism then splits each rank's mbs·seq/cp tokens over tp
  // (Korthikanti et al. 2022, Sec. 4.2.2).
  const long long local_tokens = static_cast<long long>(layout.mbs) * (model.seq_length / cp);
  if (layout.sp && layout.tp > 1 && local_tokens % layout.tp != 0)
    refuse("--layout", "cp", std::to_string(cp) + " with tp=" + std::to_string(layout.tp) + " and sp=1: each rank's " +
                                 std::to_string(local_tokens) + " tokens (mbs·seq/cp) are split over tp, so they "
                                 "must be a multiple of tp");
}

}  // namespace sextant::engine::training
