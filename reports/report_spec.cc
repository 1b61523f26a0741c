#include "reports/report_spec.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "sim/core/config_error.h"
#include "sim/core/strict_yaml.h"

namespace sextant::reports {

using sim::Diagnostic;
using sim::StrictMap;

std::string_view metric_key(ReferenceMetric metric) {
  switch (metric) {
    case ReferenceMetric::kMfu: return "mfu";
    case ReferenceMetric::kStepTime: return "step_time_s";
    case ReferenceMetric::kTokensPerSecondPerGpu: return "tokens_per_s_per_gpu";
    case ReferenceMetric::kTflopsPerGpu: return "tflops_per_gpu";
  }
  return "";
}

namespace {

const std::vector<std::string_view> kRowKeys = {"model",  "seq_length", "vocab_size", "cluster",
                                                "gpus",   "global_batch", "layout",   "label",
                                                "search", "published",  "measured"};

// Knobs set in `over` replace those of `base`.
sim::PartialLayout merge(sim::PartialLayout base, const sim::PartialLayout& over) {
  sim::for_each_knob(base, over, [](auto& to, const auto& from) {
    if (from) to = from;
  });
  return base;
}

// `layout: search` or a --layout string; errors are reported at the key.
sim::PartialLayout read_layout(StrictMap& map) {
  const std::optional<std::string> text = map.optional_string("layout");
  if (!text || *text == "search" || text->empty()) return {};
  try {
    return sim::parse_layout(*text, "layout");
  } catch (const sim::ConfigError& e) {
    for (const Diagnostic& d : e.diagnostics()) {
      map.report("layout", (d.key.empty() ? "" : d.key + ": ") + d.message +
                               " (or 'search' to search every knob)");
    }
    return {};
  }
}

void read_constraints(StrictMap& map, search::SearchConstraints& c) {
  StrictMap s = map.child("search");
  if (!s.is_map()) return;
  if (auto v = s.optional_int("max_tp")) {
    if (*v < 1) s.report("max_tp", "must be a positive integer");
    c.max_tp = static_cast<int>(*v);
  }
  if (auto v = s.optional_bool("tp_within_node")) c.tp_within_node = *v;
  if (auto v = s.optional_bool("allow_fp8")) c.allow_fp8 = *v;
  if (auto v = s.optional_double("memory_headroom")) {
    s.require_in_range("memory_headroom", *v, 0, 0.9);
    c.memory_headroom = *v;
  }
  s.finish({"max_tp", "tp_within_node", "allow_fp8", "memory_headroom"});
}

std::optional<ReferenceValue> read_reference(StrictMap& map) {
  std::optional<ReferenceValue> out;
  for (const char* key : {"published", "measured"}) {
    StrictMap r = map.child(key);
    if (!r.is_map()) continue;
    if (out) {
      map.report(key, "give either published or measured, not both");
      continue;
    }
    ReferenceValue value;
    value.measured = std::string_view(key) == "measured";
    int given = 0;
    for (ReferenceMetric m : {ReferenceMetric::kMfu, ReferenceMetric::kStepTime,
                              ReferenceMetric::kTokensPerSecondPerGpu,
                              ReferenceMetric::kTflopsPerGpu}) {
      if (auto v = r.optional_double(metric_key(m))) {
        ++given;
        value.metric = m;
        value.value = *v;
        r.require_positive(metric_key(m), *v);
        if (m == ReferenceMetric::kMfu) r.require_in_range("mfu", *v, 0, 1);
      }
    }
    if (given != 1) {
      map.report(key, "give exactly one of mfu (a fraction), step_time_s, tokens_per_s_per_gpu, "
                      "tflops_per_gpu (got " + std::to_string(given) + ")");
    }
    value.source = r.required_string("source");
    r.finish({"mfu", "step_time_s", "tokens_per_s_per_gpu", "tflops_per_gpu", "source"});
    out = value;
  }
  return out;
}

// Reads the row keys of `map` over `row` (which holds the defaults).
// Where `key` of `map` is, for messages about the preset it names.
Diagnostic origin_of(StrictMap& map, std::string_view key) {
  return sim::diagnostic_at(map.value(key), map.file(), map.full_key(key), "");
}

void read_row(StrictMap& map, ReportRowSpec& row) {
  if (map.has("model")) row.model_origin = origin_of(map, "model");
  if (map.has("cluster")) row.cluster_origin = origin_of(map, "cluster");
  if (auto v = map.optional_string("model")) row.model = *v;
  if (auto v = map.optional_int("seq_length")) {
    map.require_positive("seq_length", static_cast<double>(*v));
    row.seq_length = *v;
  }
  if (auto v = map.optional_int("vocab_size")) {
    map.require_positive("vocab_size", static_cast<double>(*v));
    row.vocab_size = *v;
  }
  if (auto v = map.optional_string("cluster")) row.cluster = *v;
  if (auto v = map.optional_int("gpus")) {
    map.require_positive("gpus", static_cast<double>(*v));
    row.gpus = static_cast<long>(*v);
  }
  if (auto v = map.optional_int("global_batch")) {
    map.require_positive("global_batch", static_cast<double>(*v));
    row.global_batch = static_cast<int>(*v);
  }
  row.layout = merge(row.layout, read_layout(map));
  if (auto v = map.optional_string("label")) row.label = *v;
  read_constraints(map, row.constraints);
  if (auto r = read_reference(map)) row.reference = r;
}

}  // namespace

ReportSpec load_report_spec(const std::string& path) {
  std::error_code error;
  if (std::filesystem::is_directory(path, error)) {
    std::vector<std::string> specs;  // the specs it holds, to name one
    for (const auto& entry : std::filesystem::directory_iterator(path, error)) {
      if (entry.path().extension() == ".yaml") specs.push_back(entry.path().string());
    }
    std::sort(specs.begin(), specs.end());
    throw sim::ConfigError(
        {{"--spec", 0, 0, "",
          "'" + path + "' is a folder, expected a report spec YAML file (e.g. " +
              (specs.empty() ? std::string("configs/reports/megatron-weak-h100.yaml")
                             : specs.front()) +
              ")"}});
  }
  std::ifstream in(path);
  if (!in) {
    throw sim::ConfigError(
        {{path, 0, 0, "", "cannot open report spec (does it exist and is it readable?)"}});
  }
  std::stringstream text;
  text << in.rdbuf();
  std::vector<Diagnostic> diags;
  ReportSpec spec;
  spec.source = path;
  std::optional<YAML::Node> root = sim::parse_yaml_text(text.str(), path, diags);
  if (root && !root->IsMap()) {
    diags.push_back(sim::diagnostic_at(*root, path, "", "a report spec is a mapping with rows:"));
    root.reset();
  }
  if (root) {
    // The row list is read here (StrictMap reads mappings); the rest strictly.
    const YAML::Node rows = static_cast<const YAML::Node&>(*root)["rows"];
    root->remove("rows");
    StrictMap top(*root, path, diags);
    spec.title = top.required_string("title");
    spec.notes = top.optional_string("notes").value_or("");
    spec.profile = top.optional_string("profile").value_or("");
    spec.framework = top.optional_string("framework").value_or("");
    const std::string engine = top.optional_string("engine").value_or("analytic");
    if (engine == "event") spec.engine = ReportEngine::kEvent;
    else if (engine != "analytic") top.report("engine", "got '" + engine + "'; accepted: analytic, event");
    ReportRowSpec defaults;
    StrictMap d = top.child("defaults");
    if (d.is_map()) {
      read_row(d, defaults);
      d.finish(kRowKeys);
    }
    top.finish({"title", "notes", "profile", "framework", "engine", "defaults", "rows"});
    if (!rows.IsDefined() || !rows.IsSequence() || rows.size() == 0) {
      diags.push_back(sim::diagnostic_at(rows.IsDefined() ? rows : *root, path, "rows",
                                         "expected a non-empty list of rows"));
    } else {
      int index = 0;
      for (const YAML::Node& node : rows) {
        const std::string prefix = "rows[" + std::to_string(index++) + "].";
        StrictMap r(node, path, diags, prefix);
        if (!r.is_map()) {
          diags.push_back(sim::diagnostic_at(node, path, prefix, "each row must be a mapping"));
          continue;
        }
        ReportRowSpec row = defaults;
        row.origin = sim::diagnostic_at(node, path, prefix + "gpus", "");
        read_row(r, row);
        r.finish(kRowKeys);
        auto missing = [&](const char* key, bool absent) {
          if (absent) diags.push_back(sim::diagnostic_at(node, path, prefix + key,
                                                         "required (in the row or in defaults)"));
        };
        missing("model", row.model.empty());
        missing("cluster", row.cluster.empty());
        missing("gpus", row.gpus == 0);
        missing("global_batch", row.global_batch == 0 && !row.layout.gbs);
        if (row.global_batch == 0 && row.layout.gbs) row.global_batch = *row.layout.gbs;
        if (row.layout.gbs && *row.layout.gbs != row.global_batch) {
          diags.push_back(sim::diagnostic_at(node, path, prefix + "global_batch",
                                             "global_batch (" + std::to_string(row.global_batch) +
                                                 ") contradicts gbs= of the layout (" +
                                                 std::to_string(*row.layout.gbs) + ")"));
        }
        row.layout.gbs = row.global_batch;
        if (row.label.empty()) row.label = std::to_string(row.gpus);
        spec.rows.push_back(std::move(row));
      }
    }
  }
  sim::throw_if_any(std::move(diags));
  return spec;
}

ReportSpec sweep_spec(const std::string& model, const std::string& cluster,
                      const std::vector<long>& gpus, int global_batch,
                      const std::string& layout, const search::SearchConstraints& constraints) {
  std::vector<Diagnostic> diags;
  if (gpus.empty()) diags.push_back({"--gpus", 0, 0, "", "give at least one GPU count, e.g. 64,128,256"});
  for (long g : gpus) {
    if (g < 1) diags.push_back({"--gpus", 0, 0, "", "GPU counts must be positive, got " + std::to_string(g)});
  }
  if (global_batch < 1) {
    diags.push_back({"--global-batch", 0, 0, "", "must be a positive number of sequences"});
  }
  sim::throw_if_any(std::move(diags));
  ReportSpec spec;
  spec.title = model + " on " + cluster + ": strong scaling at global batch " +
               std::to_string(global_batch);
  spec.source = "command line";
  sim::PartialLayout partial = layout.empty() ? sim::PartialLayout{} : sim::parse_layout(layout);
  if (partial.gbs && *partial.gbs != global_batch) {
    throw sim::ConfigError({{"--global-batch", 0, 0, "",
                             "contradicts gbs=" + std::to_string(*partial.gbs) + " of --layout"}});
  }
  partial.gbs = global_batch;
  for (long g : gpus) {
    ReportRowSpec row;
    row.label = std::to_string(g);
    row.model = model;
    row.cluster = cluster;
    row.gpus = g;
    row.global_batch = global_batch;
    row.layout = partial;
    row.constraints = constraints;
    row.origin = {"--gpus", 0, 0, "", ""};
    spec.rows.push_back(row);
  }
  return spec;
}

}  // namespace sextant::reports
