#include "tools/run_layout.h"

#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "search/layout_search.h"
#include "sim/core/config_error.h"

namespace sextant::tools {

namespace {

// Knobs the engine does not execute yet, and what they are.
constexpr std::pair<const char*, const char*> kModelParallelKnobs[] = {
    {"cp", "context parallelism"}, {"ep", "expert parallelism"}, {"etp", "expert tensor parallelism"}};

std::optional<int> knob_of(const sim::PartialLayout& p, std::string_view name) {
  if (name == "cp") return p.cp;
  if (name == "ep") return p.ep;
  return p.etp;
}

// The overlap and precision knobs the engine does not execute as given: refused
// by name rather than ignored.
void refuse_unexecuted_knobs(const sim::PartialLayout& p) {
  if (p.grad_reduce_in_fp32 && !*p.grad_reduce_in_fp32)
    throw_option_error("--layout", "grad_reduce_in_fp32", "0: the engine reduces gradients in fp32; accepted: 1");
  if (p.fsdp)
    throw_option_error("--layout", "fsdp", "fully sharded data parallelism (ZeRO-3) is not executed yet (issue 13); "
                                           "leave fsdp out (zero=1 shards the optimizer state)");
  for (const auto& [knob, name] : {std::pair{p.moe_a2a_overlap, "moe_a2a_overlap"},
                                   std::pair{p.moe_shared_expert_overlap, "moe_shared_expert_overlap"}})
    if (knob && *knob)
      throw_option_error("--layout", name, "1: the engine trains dense models (ep is not executed yet, issue 13); "
                                           "accepted: 0");
}

// Pipeline parallelism (engine/pipeline/): pp, vpp, the schedule (1F1B, or
// interleaved 1F1B with vpp > 1; GPipe too) and the split knobs, into `l`
// (whose dp, mbs and gbs are set).
void pipeline_layout(const sim::PartialLayout& p, sim::ParallelLayout& l) {
  l.pp = p.pp.value_or(1);
  l.vpp = p.vpp.value_or(1);
  if (l.vpp > 1 && l.pp == 1)
    throw_option_error("--layout", "vpp", std::to_string(l.vpp) + ": model chunks interleave over a pipeline; needs pp > 1");
  l.schedule = p.schedule.value_or(l.vpp > 1 ? sim::Schedule::kInterleaved : sim::Schedule::kOneFOneB);
  if (l.schedule == sim::Schedule::kZeroBubbleH1)
    throw_option_error("--layout", "schedule", "zb-h1: the engine runs whole backward passes; accepted: 1f1b, "
                                               "interleaved (with vpp > 1), gpipe");
  if (l.vpp > 1 && l.schedule != sim::Schedule::kInterleaved)
    throw_option_error("--layout", "schedule", std::string(sim::to_string(l.schedule)) + " runs one model chunk per "
                                               "stage; vpp=" + std::to_string(l.vpp) + " needs schedule=interleaved");
  const int microbatches = l.gbs / (l.mbs * l.dp);
  if (l.vpp > 1 && microbatches % l.pp != 0)
    throw_option_error("--layout", "gbs", "interleaved 1F1B needs the micro-batches per replica (gbs/(mbs·dp) = " +
                                              std::to_string(microbatches) + ") to be a multiple of pp (" +
                                              std::to_string(l.pp) + ")");
  l.first_stage_layers = p.first_stage_layers.value_or(0);
  l.last_stage_layers = p.last_stage_layers.value_or(0);
  l.embedding_in_split = p.embedding_in_split.value_or(false);
  l.loss_in_split = p.loss_in_split.value_or(false);
  l.pp_layout = p.pp_layout.value_or("");
}

}  // namespace

void throw_option_error(const std::string& option, const std::string& key, const std::string& message) {
  throw sim::ConfigError({{option, 0, 0, key, message}});
}

void refuse_model_parallel(const sim::PartialLayout& p) {
  for (const auto& [name, what] : kModelParallelKnobs) {
    const std::optional<int> knob = knob_of(p, name);
    if (knob && *knob != 1)
      throw_option_error("--layout", name,
          std::to_string(*knob) + ": `sextant run` trains data-, tensor- and pipeline-parallel layouts "
              "(dp, tp, pp, vpp) so far; " + what + " is not executed yet (issue 13), so " + name + " must be 1 (or left out)");
  }
}

sim::ParallelLayout run_layout(const std::string& layout, int world_size, int global_batch) {
  const sim::PartialLayout p = sim::parse_layout(layout);
  refuse_model_parallel(p);
  refuse_unexecuted_knobs(p);
  const int tp = p.tp.value_or(1);
  const int pp = p.pp.value_or(1);
  // The ranks a replica takes: tp, or tp·pp with a pipeline.
  const int replica = tp * pp;
  const std::string product = pp > 1 ? "tp·pp·dp" : "tp·dp";
  if (p.dp && replica * *p.dp != world_size)
    throw_option_error("--layout", "dp",
        product + " = " + std::to_string(replica * *p.dp) + " but this run has " + std::to_string(world_size) +
            " rank(s): start " + product + " processes with --nproc-per-node " + std::to_string(replica * *p.dp) +
            " (or a Slurm / mpirun job of that many tasks), or leave dp out to fill the ranks");
  if (world_size % replica != 0)
    throw_option_error("--layout", pp > 1 ? "pp" : "tp",
        std::to_string(pp > 1 ? pp : tp) + ": this run has " + std::to_string(world_size) +
            " rank(s), not a multiple of " + (pp > 1 ? "tp·pp = " + std::to_string(replica) : "tp") +
            ": start " + product + " processes (--nproc-per-node, Slurm or mpirun)");
  const int dp = world_size / replica;
  if (p.zero && *p.zero != 0 && dp == 1)
    throw_option_error("--layout", "zero", "ZeRO shards state over data-parallel GPUs; with one GPU use zero=0");
  if (p.zero && *p.zero > 1)
    throw_option_error("--layout", "zero",
        std::to_string(*p.zero) + ": the engine executes zero=0 and zero=1 (dist_opt=1, the distributed "
        "optimizer) so far; ZeRO-2/3 are not executed yet (issue 13); accepted: 0, 1");
  if (p.precision && *p.precision != sim::Precision::kBf16)
    throw_option_error("--layout", "precision", "the engine trains in bf16 (fp32 master weights); accepted: bf16");
  if (p.attention && *p.attention != sim::AttentionKernel::kFlash)
    throw_option_error("--layout", "attention", "the engine's attention is flash attention; accepted: flash");
  sim::ParallelLayout l;
  l.mbs = p.mbs.value_or(1);
  if (global_batch > 0 && p.gbs && *p.gbs != global_batch)
    throw_option_error("--global-batch", "", "is " + std::to_string(global_batch) + " but --layout says gbs=" +
                                  std::to_string(*p.gbs));
  l.dp = dp;
  l.tp = tp;
  l.zero = p.zero.value_or(0);
  l.gbs = global_batch > 0 ? global_batch : p.gbs.value_or(l.mbs * dp);
  if (dp == 1 && l.gbs % l.mbs != 0)
    throw_option_error("--layout", "gbs", std::to_string(l.gbs) + " is not a multiple of mbs=" + std::to_string(l.mbs) +
                               " (one GPU: the step runs gbs / mbs micro-batches)");
  if (l.gbs % (l.mbs * dp) != 0)
    throw_option_error("--layout", "gbs", std::to_string(l.gbs) + " is not a multiple of mbs·dp = " +
                               std::to_string(l.mbs) + "·" + std::to_string(dp) +
                               " (each data-parallel rank runs gbs / (mbs·dp) micro-batches)");
  l.recompute = p.recompute.value_or(sim::Recompute::kNone);
  // Sequence parallelism (Korthikanti et al. 2022) runs with tp > 1; at tp = 1 there is nothing to split.
  l.sp = p.sp.value_or(false) && tp > 1;
  // Megatron --tp-comm-overlap: the sequence-parallel all-gathers and
  // reduce-scatters pipelined with the GEMMs (engine/tensor_parallel/overlap_schedule.h).
  if (p.tp_comm_overlap.value_or(false)) {
    if (tp < 2 || !l.sp)
      throw_option_error("--layout", "tp_comm_overlap",
                         "1: overlaps the sequence-parallel all-gather and reduce-scatter with the GEMMs, so it "
                         "needs tp > 1 and sp=1 (this layout has tp=" + std::to_string(tp) + ", sp=" +
                             (l.sp ? "1" : "0") + "); use tp_comm_overlap=0 or add sp=1 with tp > 1");
    l.tp_comm_overlap = true;
  }
  // Megatron --overlap-param-gather: the distributed optimizer's all-gathers of
  // the weights run at the next step's start, overlapped with its forward.
  if (p.overlap_param_gather.value_or(false)) {
    if (l.zero < 1 || dp == 1)
      throw_option_error("--layout", "overlap_param_gather",
                         "1: overlaps the distributed optimizer's all-gather of the weights with the next forward, "
                         "so it needs zero=1 (dist_opt=1) and dp > 1 (this layout has zero=" + std::to_string(l.zero) +
                             ", dp=" + std::to_string(dp) + "); use overlap_param_gather=0 or add dist_opt=1 with dp > 1");
    l.overlap_param_gather = true;
  }
  // The engine reduces each gradient bucket as soon as backward completes it
  // (Megatron's --overlap-grad-reduce), always, with or without a pipeline.
  if (p.overlap_grad_reduce && !*p.overlap_grad_reduce && dp > 1)
    throw_option_error("--layout", "overlap_grad_reduce",
                       "0: with data parallelism the engine always reduces each gradient bucket as soon as "
                       "backward completes it (Megatron's --overlap-grad-reduce); accepted: 1");
  l.overlap_grad_reduce = true;  // what the engine does, so what --compare and the checks predict
  pipeline_layout(p, l);
  return l;
}

// `--layout best`: the search's best layout of this run's ranks (the world a
// launcher started, one GPU without one) on the cluster that the engine
// executes: bf16 with flash attention, cp = ep = 1, and whatever else
// run_layout accepts (zero 0 or 1, no zero-bubble schedule, ...), tried in the
// search's order through run_layout itself, so the two never disagree.
// Every rank searches alike (the search's order is total), so all pick the same.
std::string best_layout(const sim::ModelConfig& model, const sim::ClusterConfig& cluster,
                        const sim::CostProfile& profile, int world_size, int global_batch, std::string& note) {
  if (global_batch <= 0)
    throw_option_error("--layout", "best", "needs the global batch: give --global-batch N");
  sim::PartialLayout partial;
  partial.gbs = global_batch;
  partial.cp = partial.ep = partial.etp = 1;
  partial.precision = sim::Precision::kBf16;
  partial.attention = sim::AttentionKernel::kFlash;
  search::SearchOptions options;
  options.top = 200;  // the engine's first is among them (zero-bubble and ZeRO-2/3 are skipped)
  options.constraints.tp_within_node = true;
  const long gpus = world_size;
  const search::SearchResult r = search::search_layouts(model, cluster, profile, gpus, partial, options);
  for (std::size_t i = 0; i < r.best.size(); ++i) {
    const sim::ParallelLayout& l = r.best[i].layout;
    const std::string spec = l.to_spec();
    try {
      run_layout(spec, world_size, global_batch);
    } catch (const sim::ConfigError&) {
      continue;  // a knob the engine does not execute
    }
    char line[512];
    std::snprintf(line, sizeof line,
                  "layout best: %s (the search's %s of %ld layouts on %ld x %s%s; profile %s, predicted %.1f ms/step)",
                  spec.c_str(), i == 0 ? "first" : ("#" + std::to_string(i + 1)).c_str(), r.evaluated, gpus,
                  cluster.gpu.name.c_str(), i == 0 ? "" : ", the fastest the engine runs", profile.name.c_str(),
                  r.best[i].step_time_s * 1e3);
    note = line;
    return spec;
  }
  throw_option_error("--layout", "best",
                     "no layout of " + model.name + " with global batch " + std::to_string(global_batch) +
                         " on " + std::to_string(gpus) + " x " + cluster.gpu.name + " fits and is one the engine runs (" +
                         std::to_string(r.evaluated) + " considered, " + std::to_string(r.feasible) + " fit)");
}

}  // namespace sextant::tools
