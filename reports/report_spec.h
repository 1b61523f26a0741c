// A scaling report's input: which model on which cluster at which GPU counts
// and batch, the layout of each row (or the search's best), and, where there
// is one, the published or measured value to compare with.
//
// Spec files (configs/reports/*.yaml) are read strictly, like every sextant
// YAML: unknown keys, wrong types and bad values are reported together, each
// as file:line:col. Format:
//
//   title: GPT-3 175B strong scaling on H100
//   notes: free text shown under the title
//   engine: analytic            # or event: the search's best 8 replayed on the event simulator
//   profile: ""                 # cost profile; default: each GPU's own
//   defaults:                   # any row key; a row's own value wins
//     cluster: dgx-h100
//     layout: zero=1,overlap_grad_reduce=1
//     search: {max_tp: 8, tp_within_node: true, allow_fp8: false, memory_headroom: 0.05}
//   rows:
//     - model: gpt3-175b        # preset name or path
//       seq_length: 4096        # optional overrides of the model preset
//       vocab_size: 131072
//       gpus: 96
//       global_batch: 1152
//       layout: tp=8,pp=12      # knobs left out are searched; "search" searches all
//       label: "175B"           # optional short name for plots
//       published: {mfu: 0.47, source: "Megatron-LM README"}  # or measured: {...}
//
// A published/measured value is exactly one of mfu (a fraction), step_time_s,
// tokens_per_s_per_gpu or tflops_per_gpu, with its source.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "search/search_constraints.h"
#include "sim/core/config_error.h"
#include "sim/core/parallel_layout.h"

namespace sextant::reports {

enum class ReferenceMetric { kMfu, kStepTime, kTokensPerSecondPerGpu, kTflopsPerGpu };

/// A published or measured number for one row.
struct ReferenceValue {
  ReferenceMetric metric = ReferenceMetric::kMfu;
  double value = 0;    // MFU as a fraction, step time in s, tokens/s/GPU, TFLOP/s/GPU
  std::string source;  // where it was published or measured
  bool measured = false;  // "measured:" (our own run) rather than "published:"
};

struct ReportRowSpec {
  std::string label;  // short name for plots; default the GPU count
  std::string model;  // preset name or path
  std::optional<long> seq_length, vocab_size;
  std::string cluster;
  long gpus = 0;
  int global_batch = 0;
  sim::PartialLayout layout;  // gbs always set; what is left out is searched
  search::SearchConstraints constraints;
  std::optional<ReferenceValue> reference;
  /// Where the row was given, for messages about it: the spec's file:line:col
  /// and "rows[i]", or the --gpus option of a flag sweep.
  sim::Diagnostic origin;
  /// Where its model and cluster were named (the row's or the defaults' key);
  /// file empty for a flag sweep, whose messages name --model and --cluster.
  sim::Diagnostic model_origin, cluster_origin;
};

enum class ReportEngine { kAnalytic, kEvent };

struct ReportSpec {
  std::string title;
  std::string notes;
  std::string source;   // the spec file, or the command line of a flag sweep
  std::string profile;  // empty: each GPU's default profile
  std::string framework;  // configs/frameworks preset for every row; empty: the profile's own
  ReportEngine engine = ReportEngine::kAnalytic;
  std::vector<ReportRowSpec> rows;
};

/// Throws sim::ConfigError listing every problem as file:line:col.
ReportSpec load_report_spec(const std::string& path);

/// The spec of a quick sweep (the flag form): one row per GPU count, the
/// layout's missing knobs searched. `layout` is a --layout string (may be
/// empty). Throws sim::ConfigError naming the option at fault.
ReportSpec sweep_spec(const std::string& model, const std::string& cluster,
                      const std::vector<long>& gpus, int global_batch,
                      const std::string& layout, const search::SearchConstraints& constraints);

/// "mfu", "step_time_s", "tokens_per_s_per_gpu", "tflops_per_gpu".
std::string_view metric_key(ReferenceMetric metric);

}  // namespace sextant::reports
