#include "reports/compare_report.h"

#include <algorithm>
#include <set>

namespace sextant::reports {

std::string compare_layout_text(const sim::ParallelLayout& l) {
  std::string out;
  auto add = [&](const char* knob, int value) {
    if (value > 1) out += std::string(knob) + "=" + std::to_string(value) + ",";
  };
  add("tp", l.tp);
  if (l.tp > 1 && l.sp) out += "sp=1,";
  add("cp", l.cp);
  add("ep", l.ep);
  add("pp", l.pp);
  add("vpp", l.vpp);
  if (l.pp > 1 && l.custom_split()) out += l.split_spec() + ",";
  add("dp", l.dp);
  if (l.dp > 1 && l.zero > 0) out += "zero=" + std::to_string(l.zero) + ",";
  if (l.dp > 1 && l.zero > 0 && l.overlap_param_gather) out += "overlap_param_gather=1,";
  if (l.tp_comm_overlap) out += "tp_comm_overlap=1,";
  return out + "mbs=" + std::to_string(l.mbs) + ",gbs=" + std::to_string(l.gbs) +
         ",recompute=" + std::string(sim::to_string(l.recompute));
}

bool measurement_includes_wait(std::string_view task_kind, bool pipeline) {
  return task_kind.find("pp.send_") != std::string_view::npos || (pipeline && task_kind == "optimizer.step");
}

CompareReport make_compare_report(const ComparePrediction& predicted, double measured_step_s,
                                  const std::map<std::string, double>& measured,
                                  std::span<const double> measured_stage_compute_s) {
  CompareReport r;
  r.step_time_interval_s = predicted.step_time_interval_s;
  const bool pipeline = predicted.stage_compute_s.size() > 1;
  auto row = [pipeline](const std::string& kind, double p, double m) {
    const bool waits = measurement_includes_wait(kind, pipeline);
    return CompareRow{kind, p, m, m > 0 && !waits ? (p - m) / m : 0.0, waits};
  };
  r.rows.push_back(row(kStepRow, predicted.step_time_s, measured_step_s));
  if (predicted.stage_compute_s.size() > 1 && measured_stage_compute_s.size() == predicted.stage_compute_s.size())
    for (std::size_t s = 0; s < measured_stage_compute_s.size(); ++s)
      r.rows.push_back(row("stage" + std::to_string(s) + ".compute", predicted.stage_compute_s[s],
                           measured_stage_compute_s[s]));
  std::set<std::string> kinds;
  for (const auto& [kind, s] : predicted.task_seconds_per_step) kinds.insert(kind);
  for (const auto& [kind, s] : measured) kinds.insert(kind);
  std::vector<CompareRow> tasks;
  for (const std::string& kind : kinds) {
    const auto p = predicted.task_seconds_per_step.find(kind);
    const auto m = measured.find(kind);
    tasks.push_back(row(kind, p == predicted.task_seconds_per_step.end() ? 0.0 : p->second,
                        m == measured.end() ? 0.0 : m->second));
  }
  std::stable_sort(tasks.begin(), tasks.end(), [](const CompareRow& a, const CompareRow& b) {
    return std::max(a.measured_s, a.predicted_s) > std::max(b.measured_s, b.predicted_s);
  });
  r.rows.insert(r.rows.end(), tasks.begin(), tasks.end());
  return r;
}

}  // namespace sextant::reports
