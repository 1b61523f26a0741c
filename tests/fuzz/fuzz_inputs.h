// What the fuzzers do with one input, shared with fuzz_regression_test.cc so
// that every saved input (seed corpus and found crashes) runs in normal CI.
//
// Contract under test: user input either loads or is rejected with a
// sim::ConfigError. Anything else -- another exception, a crash, a sanitizer
// report, or a loaded config that breaks the invariants validation promises --
// is a bug. Each run_* function returns the broken invariants (empty: none);
// other exceptions propagate, so libFuzzer and GoogleTest both see them.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

#include "sim/core/config_error.h"
#include "sim/core/config_loader.h"
#include "sim/core/layout_check.h"
#include "sim/core/parallel_layout.h"

namespace sextant::fuzz {

// Collects the invariants an input breaks.
class Problems {
 public:
  void require(bool ok, const char* what) {
    if (!ok) text_ += (text_.empty() ? "" : "; ") + std::string(what);
  }
  const std::string& text() const { return text_; }

 private:
  std::string text_;
};

// Runs `load`; a ConfigError is an accepted outcome, and so is success.
template <typename Load>
void load_or_reject(Problems& problems, Load&& load) {
  try {
    load();
  } catch (const sim::ConfigError& e) {
    problems.require(!e.diagnostics().empty(), "ConfigError without diagnostics");
  }
}

/// Feeds `text` to every YAML loader, as if it were each kind of preset.
inline std::string run_yaml_input(const std::string& text) {
  Problems problems;
  load_or_reject(problems, [&] {
    const sim::ModelConfig m = sim::load_model_text(text, "fuzz.yaml");
    problems.require(m.num_layers > 0 && m.hidden_size > 0 && m.ffn_hidden_size > 0,
                     "model sizes > 0");
    problems.require(m.num_attention_heads > 0 && m.num_query_groups > 0, "heads and groups > 0");
    problems.require(m.num_attention_heads % m.num_query_groups == 0, "groups divide heads");
    problems.require(m.kv_channels > 0, "kv_channels > 0");
    problems.require(m.vocab_size > 0 && m.seq_length > 0, "vocab and sequence > 0");
    if (m.moe) {
      problems.require(m.moe->num_experts > 0 && m.moe->ffn_hidden_size > 0, "moe sizes > 0");
      problems.require(m.moe->router_topk > 0 && m.moe->router_topk <= m.moe->num_experts, "topk");
      problems.require(m.moe->first_dense_layers >= 0 && m.moe->first_dense_layers < m.num_layers,
                       "first_dense_layers in [0, num_layers)");
    }
  });
  load_or_reject(problems, [&] {
    const sim::GpuConfig g = sim::load_gpu_text(text, "fuzz.yaml");
    problems.require(g.peak_bf16_flops_per_s > 0 && g.peak_fp32_flops_per_s > 0, "gpu peaks > 0");
    problems.require(g.peak_fp8_flops_per_s >= 0, "fp8 peak >= 0");
    problems.require(g.memory_bytes > 0 && g.memory_bandwidth_bytes_per_s > 0 && g.sm_count > 0,
                     "gpu memory and SMs > 0");
  });
  load_or_reject(problems, [&] {
    const sim::ClusterFile f = sim::load_cluster_text(text, "fuzz.yaml");
    problems.require(f.cluster.gpus_per_node > 0 && f.cluster.num_nodes > 0, "cluster sizes > 0");
    problems.require(f.cluster.intra_node_bandwidth_bytes_per_s > 0 &&
                         f.cluster.inter_node_bandwidth_bytes_per_s > 0,
                     "bandwidths > 0");
  });
  load_or_reject(problems, [&] {
    const sim::CostProfile p = sim::load_profile_text(text, "fuzz.yaml");
    problems.require(p.gemm_efficiency > 0 && p.gemm_efficiency <= 1, "gemm_efficiency in (0, 1]");
    problems.require(p.gemm_tile_m > 0 && p.gemm_tile_n > 0, "tiles > 0");
    if (p.tables) {
      for (const sim::LinearPoint& q : p.tables->linear_bf16)
        problems.require(q.tokens >= 1 && q.in_width >= 1 && q.out_width >= 1 && q.forward_s > 0 &&
                             q.input_gradient_s > 0 && q.weight_gradient_s > 0,
                         "measured linear rows: sizes >= 1, times > 0");
      for (const sim::AttentionPoint& q : p.tables->attention)
        problems.require(q.seq >= 1 && q.forward_s > 0 && q.backward_s > 0,
                         "measured attention rows: sizes >= 1, times > 0");
    }
    if (p.fit) problems.require(p.fit->log_residual_sd >= 0, "fit: log_residual_sd >= 0");
  });
  return problems.text();
}

/// A complete layout: the knobs `p` gives, ParallelLayout's defaults for the rest.
inline sim::ParallelLayout completed(const sim::PartialLayout& p) {
  sim::ParallelLayout l;
  l.tp = p.tp.value_or(l.tp);
  l.pp = p.pp.value_or(l.pp);
  l.vpp = p.vpp.value_or(l.vpp);
  l.dp = p.dp.value_or(l.dp);
  l.cp = p.cp.value_or(l.cp);
  l.ep = p.ep.value_or(l.ep);
  l.etp = p.etp.value_or(l.etp);
  l.mbs = p.mbs.value_or(l.mbs);
  l.gbs = p.gbs.value_or(l.gbs);
  l.sp = p.sp.value_or(l.sp);
  l.recompute = p.recompute.value_or(l.recompute);
  l.zero = p.zero.value_or(l.zero);
  l.schedule = p.schedule.value_or(l.schedule);
  l.precision = p.precision.value_or(l.precision);
  l.attention = p.attention.value_or(l.attention);
  l.overlap_grad_reduce = p.overlap_grad_reduce.value_or(l.overlap_grad_reduce);
  l.overlap_param_gather = p.overlap_param_gather.value_or(l.overlap_param_gather);
  l.tp_comm_overlap = p.tp_comm_overlap.value_or(l.tp_comm_overlap);
  return l;
}

/// Parses `spec` as --layout; a layout that parses must survive to_spec and back.
inline std::string run_layout_input(std::string_view spec) {
  Problems problems;
  load_or_reject(problems, [&] {
    const sim::PartialLayout p = sim::parse_layout(spec);
    for (const std::optional<int>* knob :
         {&p.tp, &p.pp, &p.vpp, &p.dp, &p.cp, &p.ep, &p.etp, &p.mbs, &p.gbs}) {
      problems.require(!*knob || **knob >= 1, "parallel sizes >= 1");
    }
    problems.require(!p.zero || (*p.zero >= 0 && *p.zero <= 3), "zero in [0, 3]");
    const sim::ParallelLayout l = completed(p);
    const std::string spec_again = l.to_spec();
    const sim::ParallelLayout again = completed(sim::parse_layout(spec_again));
    problems.require(again.to_spec() == spec_again, "to_spec round trip");
  });
  return problems.text();
}

/// A small dense and a small MoE model on a 32-GPU A100 cluster (no FP8), for check_layout.
struct LayoutCheckFixture {
  sim::ModelConfig dense, moe;
  sim::ClusterConfig cluster;

  LayoutCheckFixture() {
    dense.name = "dense";
    dense.num_layers = 8;
    dense.hidden_size = 1024;
    dense.ffn_hidden_size = 4096;
    dense.num_attention_heads = 16;
    dense.num_query_groups = 4;
    dense.kv_channels = 64;
    dense.vocab_size = 32000;
    dense.seq_length = 2048;
    moe = dense;
    moe.name = "moe";
    moe.moe = sim::MoeConfig{8, 2, 2048, 0, 0};
    cluster.name = "cluster";
    cluster.gpu.name = "a100";
    cluster.gpu.peak_bf16_flops_per_s = 312e12;
    cluster.gpus_per_node = 8;
    cluster.num_nodes = 4;
  }
};

/// Parses `spec` and, when it parses, checks the completed layout on both
/// models: check_layout and is_valid_layout must agree and must not crash.
inline std::string run_layout_check_input(std::string_view spec, const LayoutCheckFixture& f) {
  Problems problems;
  load_or_reject(problems, [&] {
    const sim::ParallelLayout l = completed(sim::parse_layout(spec));
    for (const sim::ModelConfig* m : {&f.dense, &f.moe}) {
      // The product in double: four ints can overflow even a long.
      const double product = static_cast<double>(l.tp) * l.cp * l.pp * l.dp;
      for (long gpus : {8L, product < 1e15 ? static_cast<long>(product) : 8L}) {
        const bool valid = sim::check_layout(*m, f.cluster, gpus, l).empty();
        problems.require(valid == sim::is_valid_layout(*m, f.cluster, gpus, l),
                         "check_layout and is_valid_layout agree");
      }
    }
  });
  return problems.text();
}

/// For the fuzz targets: a broken invariant is a crash, so libFuzzer keeps the input.
inline void abort_on(const std::string& problems) {
  if (problems.empty()) return;
  std::fprintf(stderr, "fuzz invariant broken: %s\n", problems.c_str());
  std::abort();
}

}  // namespace sextant::fuzz
