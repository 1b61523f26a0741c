#include "sim/core/layout_check.h"

#include <string>

#include "sim/core/pipeline_split.h"

namespace sextant::sim {

namespace {

// Runs every rule; `report(knob, message-builder)` is called for each broken one.
// The message is built lazily so the search's yes/no path allocates nothing.
// `split` is check_pipeline_split(m, l).
template <typename Report>
void run_rules(const ModelConfig& m, const ClusterConfig& cluster, long gpus,
               const ParallelLayout& l, SplitProblem split, Report&& report) {
  using std::to_string;
  // Products in 64 bits: knobs come from users and may be large.
  const long long product = l.total_gpus();
  const long long mbs_dp = 1LL * l.mbs * l.dp;
  const long long ep_etp = 1LL * l.ep * l.etp;
  const long long tp_cp_dp = 1LL * l.tp * l.cp * l.dp;
  if (product != gpus) {
    report("dp", [&] {
      return "tp·cp·pp·dp = " + to_string(l.tp) + "·" + to_string(l.cp) + "·" + to_string(l.pp) +
             "·" + to_string(l.dp) + " = " + to_string(product) + " must equal the GPU count (" +
             to_string(gpus) + ")";
    });
  }
  if (gpus > cluster.total_gpus()) {
    report("gpus", [&] {
      return "cluster '" + cluster.name + "' has " + to_string(cluster.total_gpus()) +
             " GPUs, asked for " + to_string(gpus);
    });
  }
  if (m.num_attention_heads % l.tp != 0) {
    report("tp", [&] {
      return "num_attention_heads (" + to_string(m.num_attention_heads) +
             ") must be a multiple of tp (" + to_string(l.tp) + ")";
    });
  } else if (m.num_query_groups % l.tp != 0) {
    report("tp", [&] {
      return "num_query_groups (" + to_string(m.num_query_groups) +
             ") must be a multiple of tp (" + to_string(l.tp) + ")";
    });
  }
  if (m.ffn_hidden_size % l.tp != 0) {
    report("tp", [&] {
      return "ffn_hidden_size (" + to_string(m.ffn_hidden_size) + ") must be a multiple of tp (" +
             to_string(l.tp) + ")";
    });
  }
  if (split != SplitProblem::kNone) {
    report(split_problem_knob(split), [&] { return split_problem_message(split, m, l); });
  }
  if (l.gbs % mbs_dp != 0) {
    report("gbs", [&] {
      return "gbs (" + to_string(l.gbs) + ") must be a multiple of mbs·dp (" + to_string(l.mbs) +
             "·" + to_string(l.dp) + ")";
    });
  }
  if (l.vpp > 1 && l.schedule != Schedule::kInterleaved) {
    report("vpp", [&] {
      return "vpp=" + to_string(l.vpp) + " needs schedule=1f1b-interleaved, got schedule=" +
             std::string(to_string(l.schedule));
    });
  }
  if (l.schedule == Schedule::kZeroBubbleH1 && l.pp < 2) {
    report("schedule", [&] { return std::string("zb-h1 needs pp >= 2 (it is a pipeline schedule)"); });
  }
  if (l.schedule == Schedule::kInterleaved) {
    if (l.vpp < 2 || l.pp < 2) {
      report("schedule", [&] {
        return "1f1b-interleaved needs pp >= 2 and vpp >= 2, got pp=" + to_string(l.pp) +
               ", vpp=" + to_string(l.vpp);
      });
    } else if (l.gbs % mbs_dp == 0 && l.num_microbatches() % l.pp != 0) {
      // Narayanan et al. 2021, Sec. 2.2.2: micro-batches go round the stages in groups of pp.
      report("schedule", [&] {
        return "1f1b-interleaved needs the micro-batch count (gbs/(mbs·dp) = " +
               to_string(l.num_microbatches()) + ") to be a multiple of pp (" + to_string(l.pp) +
               ")";
      });
    }
  }
  if (l.cp > 1 && m.seq_length % (2LL * l.cp) != 0) {
    // Causal load balancing gives each CP rank two chunks (Megatron-Core context parallel).
    report("cp", [&] {
      return "seq_length (" + to_string(m.seq_length) + ") must be a multiple of 2·cp (2·" +
             to_string(l.cp) + ")";
    });
  }
  if (!m.moe) {
    if (l.ep != 1 || l.etp != 1) {
      report("ep", [&] {
        return "model '" + m.name + "' has no experts; ep and etp must be 1, got ep=" +
               to_string(l.ep) + ", etp=" + to_string(l.etp);
      });
    }
  } else {
    if (m.moe->num_experts % l.ep != 0) {
      report("ep", [&] {
        return "num_experts (" + to_string(m.moe->num_experts) + ") must be a multiple of ep (" +
               to_string(l.ep) + ")";
      });
    }
    if (tp_cp_dp % ep_etp != 0) {
      report("ep", [&] {
        return "ep·etp (" + to_string(l.ep) + "·" + to_string(l.etp) +
               ") must divide tp·cp·dp (" + to_string(tp_cp_dp) + ")";
      });
    }
    if (m.moe->ffn_hidden_size % l.etp != 0) {
      report("etp", [&] {
        return "moe.ffn_hidden_size (" + to_string(m.moe->ffn_hidden_size) +
               ") must be a multiple of etp (" + to_string(l.etp) + ")";
      });
    }
  }
  if (l.moe_a2a_overlap) {
    // Megatron-Core runs the combined 1F1B step only without pipelining or in
    // the interleaved schedule (schedules.py), refuses full recomputation
    // (combined_1f1b.py asserts no activation checkpointing) and the shared
    // expert overlap beside it.
    if (!m.moe || l.ep <= 1) {
      report("moe_a2a_overlap", [&] { return std::string("needs a MoE model and ep > 1 (it hides the expert-parallel all-to-all)"); });
    }
    if (l.pp > 1 && l.schedule != Schedule::kInterleaved) {
      report("moe_a2a_overlap", [&] {
        return "needs pp=1 or schedule=1f1b-interleaved (Megatron-Core's combined 1F1B), got pp=" +
               to_string(l.pp) + " with schedule=" + std::string(sim::to_string(l.schedule));
      });
    }
    if (l.recompute == Recompute::kFull) {
      report("moe_a2a_overlap", [&] { return std::string("does not run with recompute=full (accepted: none, selective)"); });
    }
    if (l.moe_shared_expert_overlap) {
      report("moe_shared_expert_overlap", [&] { return std::string("cannot be combined with moe_a2a_overlap (Megatron-Core refuses both)"); });
    }
  }
  if (l.moe_shared_expert_overlap && (!m.moe || m.moe->shared_expert_ffn_hidden_size <= 0 || l.ep <= 1)) {
    report("moe_shared_expert_overlap", [&] { return std::string("needs a MoE model with a shared expert and ep > 1"); });
  }
  // With tp=1 there is no TP communication: the overlap is a no-op, as in Megatron.
  if (l.tp_comm_overlap && l.tp > 1 && !l.sp) {
    report("tp_comm_overlap", [&] { return std::string("needs sp=1 (Megatron overlaps the sequence-parallel all-gather and reduce-scatter)"); });
  }
  if (l.overlap_param_gather && l.zero < 1) {
    report("overlap_param_gather",
           [&] { return std::string("needs the distributed optimizer (zero >= 1)"); });
  }
  if (l.zero >= 2 && l.pp > 1) {
    report("zero", [&] {
      return "zero=" + to_string(l.zero) +
             " needs pp=1: sharded gradients or parameters would be re-gathered for every "
             "micro-batch (DeepSpeed forbids ZeRO-2/3 with pipeline parallelism)";
    });
  }
  if (l.precision == Precision::kFp8 && cluster.gpu.peak_fp8_flops_per_s <= 0) {
    report("precision", [&] {
      return "GPU '" + cluster.gpu.name + "' has no FP8 tensor cores; accepted: bf16, fp16";
    });
  }
}

}  // namespace

std::vector<Diagnostic> check_layout(const ModelConfig& model, const ClusterConfig& cluster,
                                     long gpus, const ParallelLayout& layout) {
  std::vector<Diagnostic> out;
  run_rules(model, cluster, gpus, layout, check_pipeline_split(model, layout), [&](const char* knob, auto&& message) {
    out.push_back({"--layout", 0, 0, knob, message()});
  });
  return out;
}

bool is_valid_layout(const ModelConfig& model, const ClusterConfig& cluster, long gpus,
                     const ParallelLayout& layout) {
  return is_valid_layout(model, cluster, gpus, layout, check_pipeline_split(model, layout));
}

bool is_valid_layout(const ModelConfig& model, const ClusterConfig& cluster, long gpus,
                     const ParallelLayout& layout, SplitProblem split) {
  bool valid = true;
  run_rules(model, cluster, gpus, layout, split, [&](const char*, auto&&) { valid = false; });
  return valid;
}

}  // namespace sextant::sim
