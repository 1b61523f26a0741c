#include "sim/core/profile_tables_loader.h"

#include <cmath>
#include <cstdio>
#include <memory>
#include <string>

namespace sextant::sim {

namespace {

// What a table asks of a row beyond read_row's checks: "" when it holds, else why not.
using RowCheck = std::string (*)(const std::vector<double>& row);

// One row of a table: a YAML sequence of exactly `columns` finite numbers; the
// first `sizes` of them are sizes (>= 1), the rest times in seconds (> 0, < 1 h),
// and `check` (when given) holds.
std::optional<std::vector<double>> read_row(const YAML::Node& row, StrictMap& map,
                                            const std::string& key, std::size_t columns,
                                            std::size_t sizes, const char* header, RowCheck check) {
  auto bad = [&](const YAML::Node& at, const std::string& message) {
    map.diagnostics().push_back(diagnostic_at(at, map.file(), key, message));
    return std::nullopt;
  };
  if (!row.IsSequence() || row.size() != columns)
    return bad(row, "expected a row of " + std::to_string(columns) + " numbers " + header);
  std::vector<double> out(columns);
  for (std::size_t i = 0; i < columns; ++i) {
    const YAML::Node cell = row[i];
    double value = 0;
    if (!cell.IsScalar() || is_quoted_scalar(cell) || !YAML::convert<double>::decode(cell, value) ||
        !std::isfinite(value))
      return bad(cell, "expected a finite number in row " + std::string(header));
    if (i < sizes && value < 1)
      return bad(cell, "sizes must be at least 1, got " + cell.Scalar() + " " + header);
    if (i >= sizes && !(value > 0 && value < 3600))
      return bad(cell, "times must be in (0, 3600) s, got " + cell.Scalar() + " " + header);
    out[i] = value;
  }
  if (check) {
    if (const std::string problem = check(out); !problem.empty()) return bad(row, problem + " " + header);
  }
  return out;
}

// The rows of list `key` (absent: none), each parsed by read_row.
template <typename Point, typename Make>
std::vector<Point> read_rows(StrictMap& map, std::string_view key, std::size_t columns,
                             std::size_t sizes, const char* header, Make make, RowCheck check = nullptr) {
  std::vector<Point> out;
  const YAML::Node list = map.value(key);
  if (!list.IsDefined() || list.IsNull()) return out;
  const std::string name = map.full_key(key);
  if (!list.IsSequence()) {
    map.diagnostics().push_back(diagnostic_at(list, map.file(), name,
                                              std::string("expected a list of rows ") + header));
    return out;
  }
  for (const YAML::Node& row : list)
    if (auto values = read_row(row, map, name, columns, sizes, header, check)) out.push_back(make(*values));
  return out;
}

std::vector<LinearPoint> read_linear(StrictMap& map, std::string_view key) {
  return read_rows<LinearPoint>(
      map, key, 6, 3,
      "[tokens, in_width, out_width, forward_s, input_gradient_s, weight_gradient_s]",
      [](const std::vector<double>& v) { return LinearPoint{v[0], v[1], v[2], v[3], v[4], v[5]}; });
}

// `attention:` rows are multi-head (kv_heads = heads); `attention_gqa:` rows
// name their kv_heads, fewer than the heads and dividing them. An older profile
// has no `attention_gqa:` key: all its attention is multi-head.
std::vector<AttentionPoint> read_attention(StrictMap& map) {
  std::vector<AttentionPoint> out = read_rows<AttentionPoint>(
      map, "attention", 6, 4, "[batch, heads, seq, head_dim, forward_s, backward_s]",
      [](const std::vector<double>& v) { return AttentionPoint{v[0], v[1], v[1], v[2], v[3], v[4], v[5]}; });
  const std::vector<AttentionPoint> grouped = read_rows<AttentionPoint>(
      map, "attention_gqa", 7, 5, "[batch, heads, kv_heads, seq, head_dim, forward_s, backward_s]",
      [](const std::vector<double>& v) { return AttentionPoint{v[0], v[1], v[2], v[3], v[4], v[5], v[6]}; },
      [](const std::vector<double>& v) -> std::string {
        if (attention_group_size(v[1], v[2]) > 1) return "";
        char problem[160];
        std::snprintf(problem, sizeof problem,
                      "kv_heads (%g) must be fewer than heads (%g) and divide them (kv_heads = heads: a row of "
                      "attention:)",
                      v[2], v[1]);
        return problem;
      });
  out.insert(out.end(), grouped.begin(), grouped.end());
  return out;
}

std::vector<CollectivePoint> read_collective(StrictMap& map, std::string_view key) {
  return read_rows<CollectivePoint>(
      map, key, 3, 2, "[ranks, bytes, seconds]",
      [](const std::vector<double>& v) { return CollectivePoint{v[0], v[1], v[2]}; });
}

double overhead(StrictMap& map, std::string_view key) {
  const double value = map.required_double(key);
  map.require_in_range(key, value, 0, 1.0);
  return value;
}

void read_elementwise(StrictMap& map, MeasuredTables& t) {
  StrictMap kernels = map.child("elementwise");
  if (!kernels.is_map()) return;
  std::vector<std::string_view> accepted;
  for (int k = 0; k < kElementwiseKernels; ++k) {
    const std::string_view name = to_string(static_cast<ElementwiseKernel>(k));
    accepted.push_back(name);
    t.elementwise[static_cast<std::size_t>(k)] = read_rows<ElementwisePoint>(
        kernels, name, 3, 2, "[rows, width, seconds]",
        [](const std::vector<double>& v) { return ElementwisePoint{v[0], v[1], v[2]}; });
  }
  kernels.finish(accepted);
}

void read_provenance(StrictMap& map, MeasuredTables& t) {
  static const std::vector<std::string_view> kKeys{
      "gpu_name", "driver_version", "cuda_runtime_version", "cublas_version", "nccl_version",
      "gpu_count", "commit", "date", "command", "method", "duration_s"};
  StrictMap m = map.child("measurement");
  if (!m.is_map()) return;
  for (std::string_view key : kKeys)
    if (auto value = m.optional_string(key)) t.measurement.emplace_back(std::string(key), *value);
  m.finish(kKeys);
}

std::optional<ProfileFit> read_fit(StrictMap& map) {
  StrictMap f = map.child("fit");
  if (!f.is_map()) return std::nullopt;
  ProfileFit fit;
  fit.data_set = f.required_string("data_set");
  StrictMap parameters = f.child("parameters");
  if (parameters.is_map()) {
    const std::vector<std::string> names = parameters.keys();
    for (const std::string& name : names) {
      if (name != kFitComputeTimeFactor && name != kFitStepOverhead &&
          name != kFitMicrobatchOverhead && name != kFitPowerCapHfu)
        continue;  // finish() reports it with the accepted names
      fit.parameters.emplace_back(name, parameters.required_double(name));
    }
    parameters.finish({kFitComputeTimeFactor, kFitStepOverhead, kFitMicrobatchOverhead, kFitPowerCapHfu});
  } else if (!f.has("parameters")) {
    f.report("parameters", "missing: the fitted parameters, name: value");
  }
  fit.log_residual_sd = f.required_double("log_residual_sd");
  f.require_in_range("log_residual_sd", fit.log_residual_sd, 0, 5);
  const std::int64_t runs = f.required_int("runs");
  f.require_in_range("runs", static_cast<double>(runs), 1, 1e6);
  fit.runs = static_cast<int>(std::max<std::int64_t>(0, std::min<std::int64_t>(runs, 1000000)));
  f.finish({"data_set", "parameters", "log_residual_sd", "runs"});
  return fit;
}

}  // namespace

const std::vector<std::string_view>& measured_profile_keys() {
  static const std::vector<std::string_view> kKeys{
      "software", "measurement", "linear_bf16", "linear_fp8", "linear_bf16_epilogues",
      "attention", "attention_gqa", "elementwise", "overheads", "nccl", "fit"};
  return kKeys;
}

void read_measured_profile_part(StrictMap& map, CostProfile& p) {
  if (auto software = map.optional_string("software")) {
    if (auto parsed = parse_software(*software)) p.software = *parsed;
    else map.report("software", "got '" + *software + "'; accepted: sextant-engine, megatron-published");
  }
  bool any = false;
  for (std::string_view key : {"measurement", "linear_bf16", "linear_fp8", "linear_bf16_epilogues", "attention",
                               "attention_gqa", "elementwise", "overheads", "nccl"})
    any = any || map.has(key);
  p.fit = read_fit(map);
  if (!any) return;

  auto t = std::make_shared<MeasuredTables>();
  read_provenance(map, *t);
  t->linear_bf16 = read_linear(map, "linear_bf16");
  t->linear_fp8 = read_linear(map, "linear_fp8");
  t->linear_bf16_epilogues = read_rows<LinearEpiloguePoint>(
      map, "linear_bf16_epilogues", 8, 3,
      "[tokens, in_width, out_width, forward_bias_s, forward_residual_s, forward_bias_residual_s, "
      "forward_bias_gelu_s, input_gradient_dgelu_s]",
      [](const std::vector<double>& v) {
        return LinearEpiloguePoint{v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]};
      });
  t->attention = read_attention(map);
  read_elementwise(map, *t);
  StrictMap o = map.child("overheads");
  if (o.is_map()) {
    MeasuredOverheads m;
    m.kernel_launch_s = overhead(o, "kernel_launch_s");
    m.graph_kernel_s = overhead(o, "graph_kernel_s");
    m.graph_launch_s = overhead(o, "graph_launch_s");
    m.host_step_s = overhead(o, "host_step_s");
    o.finish({"kernel_launch_s", "graph_kernel_s", "graph_launch_s", "host_step_s"});
    t->overheads = m;
  }
  StrictMap n = map.child("nccl");
  if (n.is_map()) {
    t->all_reduce = read_collective(n, "all_reduce");
    t->reduce_scatter = read_collective(n, "reduce_scatter");
    t->all_gather = read_collective(n, "all_gather");
    t->all_to_all = read_collective(n, "all_to_all");
    t->send_recv = read_collective(n, "send_recv");
    n.finish({"all_reduce", "reduce_scatter", "all_gather", "all_to_all", "send_recv"});
  }
  t->build_lookup();
  p.tables = std::move(t);
}

}  // namespace sextant::sim
