#include "engine/calibration/profile_fit.h"

#include <Eigen/Dense>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "sim/analytic/analytic_model.h"
#include "sim/core/config_error.h"

namespace sextant::engine::calibration {

namespace {

double predicted_step_s(const sim::ModelConfig& model, const sim::ClusterConfig& cluster,
                        const sim::CostProfile& profile, const sim::ParallelLayout& layout) {
  return sim::simulate_analytic(model, cluster, profile, layout).step_time_s;
}

sim::CostProfile with_parameters(sim::CostProfile p, double factor, double step_s, double microbatch_s) {
  p.fit = sim::ProfileFit{"", {{std::string(sim::kFitComputeTimeFactor), factor},
                               {std::string(sim::kFitStepOverhead), step_s},
                               {std::string(sim::kFitMicrobatchOverhead), microbatch_s}}, 0, 0};
  return p;
}

// The run's model as the engine trained it: without dropout.
sim::ModelConfig trained_model(const MeasuredStep& run) {
  sim::ModelConfig m = run.model;
  m.hidden_dropout = m.attention_dropout = 0;
  return m;
}

void check_run_count(int n) {
  if (n < 3)
    throw sim::ConfigError({{"--runs", 0, 0, "",
                             std::to_string(n) + " run(s) found; the fit needs at least 3 "
                             "(`sextant run --compare --format json` outputs, one per file)"}});
}

std::string number(double value) {
  char text[64];
  std::snprintf(text, sizeof text, "%.6g", value);
  return text;
}

}  // namespace

ProfileFitResult fit_profile(const sim::CostProfile& profile, const sim::ClusterConfig& cluster,
                             const std::vector<MeasuredStep>& runs) {
  const int n = static_cast<int>(runs.size());
  check_run_count(n);
  const sim::CostProfile neutral = with_parameters(profile, 1, 0, 0);
  const sim::CostProfile unscaled = with_parameters(profile, 0, 0, 0);
  Eigen::MatrixXd x(n, 3);
  Eigen::VectorXd y(n), weight(n);
  std::vector<sim::ModelConfig> models;
  bool microbatches_vary = false;
  for (int i = 0; i < n; ++i) {
    const MeasuredStep& r = runs[static_cast<std::size_t>(i)];
    sim::ModelConfig m = trained_model(r);
    const double u = predicted_step_s(m, cluster, unscaled, r.layout);
    const double s = predicted_step_s(m, cluster, neutral, r.layout) - u;
    const double microbatches = r.layout.num_microbatches();
    const double measured = r.measured_s;
    x.row(i) << s, 1.0, microbatches;
    y(i) = measured - u;
    weight(i) = 1.0 / measured;
    microbatches_vary = microbatches_vary || microbatches != x(0, 2);
    models.push_back(std::move(m));
  }
  // Overheads are times: an overhead fitted negative (noise, or a mechanism
  // the runs do not show) is held at 0 and the rest refitted — the active-set
  // step of non-negative least squares (Lawson & Hanson 1974, Ch. 23) for the
  // two overhead columns; the factor is free.
  std::vector<int> columns{0, 1};
  if (microbatches_vary && n >= 4) columns.push_back(2);
  Eigen::VectorXd beta;
  for (;;) {
    Eigen::MatrixXd a(n, static_cast<Eigen::Index>(columns.size()));
    for (std::size_t c = 0; c < columns.size(); ++c) a.col(static_cast<Eigen::Index>(c)) = x.col(columns[c]);
    beta = (weight.asDiagonal() * a).colPivHouseholderQr().solve(weight.asDiagonal() * y);
    std::size_t most_negative = 0;
    for (std::size_t c = 1; c < columns.size(); ++c)
      if (beta(static_cast<Eigen::Index>(c)) < 0 &&
          (most_negative == 0 || beta(static_cast<Eigen::Index>(c)) < beta(static_cast<Eigen::Index>(most_negative))))
        most_negative = c;
    if (most_negative == 0) break;
    columns.erase(columns.begin() + static_cast<std::ptrdiff_t>(most_negative));
  }
  double value[3] = {0, 0, 0};
  for (std::size_t c = 0; c < columns.size(); ++c) value[columns[c]] = beta(static_cast<Eigen::Index>(c));

  ProfileFitResult out;
  out.fit.parameters = {{std::string(sim::kFitComputeTimeFactor), value[0]},
                        {std::string(sim::kFitStepOverhead), value[1]}};
  if (microbatches_vary && n >= 4)
    out.fit.parameters.emplace_back(std::string(sim::kFitMicrobatchOverhead), value[2]);
  const sim::CostProfile fitted = with_parameters(profile, value[0], value[1], value[2]);
  const int free_parameters = static_cast<int>(columns.size());
  double sum_squares = 0;
  for (int i = 0; i < n; ++i) {
    const MeasuredStep& r = runs[static_cast<std::size_t>(i)];
    const double p = predicted_step_s(models[static_cast<std::size_t>(i)], cluster, fitted, r.layout);
    out.predicted_s.push_back(p);
    out.measured_s.push_back(r.measured_s);
    const double log_error = std::log(r.measured_s / p);
    sum_squares += log_error * log_error;
  }
  // Residual sd with the fitted parameters' degrees of freedom taken out.
  out.fit.log_residual_sd = std::sqrt(sum_squares / std::max(1, n - free_parameters));
  out.fit.runs = n;
  return out;
}

ProfileFitResult fit_power_cap(const sim::CostProfile& profile, const sim::ClusterConfig& cluster,
                               const std::vector<MeasuredStep>& runs) {
  const int n = static_cast<int>(runs.size());
  check_run_count(n);
  std::vector<sim::ModelConfig> models;
  for (const MeasuredStep& r : runs) models.push_back(trained_model(r));
  auto with_cap = [&](double cap) {
    sim::CostProfile p = profile;
    p.fit = sim::ProfileFit{"", {{std::string(sim::kFitPowerCapHfu), cap}}, 0, 0};
    return p;
  };
  auto predictions = [&](double cap) {
    const sim::CostProfile p = with_cap(cap);
    std::vector<double> out;
    for (int i = 0; i < n; ++i)
      out.push_back(predicted_step_s(models[static_cast<std::size_t>(i)], cluster, p,
                                     runs[static_cast<std::size_t>(i)].layout));
    return out;
  };
  auto sum_squares = [&](const std::vector<double>& predicted) {
    double s = 0;
    for (int i = 0; i < n; ++i) {
      const double e = std::log(runs[static_cast<std::size_t>(i)].measured_s / predicted[static_cast<std::size_t>(i)]);
      s += e * e;
    }
    return s;
  };
  // The cap at 0 is "no cap" (power_cap_slowdown returns 1); a grid is enough for one
  // parameter whose effect is a cube root (steps of 0.001 move a prediction by < 0.1 %).
  double best_cap = 0;
  std::vector<double> best = predictions(0);
  double best_ss = sum_squares(best);
  for (int k = 100; k <= 1500; ++k) {
    const double cap = k / 1000.0;
    std::vector<double> p = predictions(cap);
    const double ss = sum_squares(p);
    if (ss < best_ss) best_cap = cap, best_ss = ss, best = std::move(p);
  }
  ProfileFitResult out;
  out.fit.parameters = {{std::string(sim::kFitPowerCapHfu), best_cap}};
  out.predicted_s = best;
  for (const MeasuredStep& r : runs) out.measured_s.push_back(r.measured_s);
  out.fit.log_residual_sd = std::sqrt(best_ss / std::max(1, n - 1));
  out.fit.runs = n;
  return out;
}

std::string with_fit_block(const std::string& text, const sim::ProfileFit& fit) {
  // Keep every line but an existing top-level `fit:` block (it runs to the
  // next line that starts a top-level key).
  std::istringstream in(text);
  std::string line, kept;
  bool in_fit = false;
  while (std::getline(in, line)) {
    const bool top_level = !line.empty() && line[0] != ' ' && line[0] != '#' && line[0] != '-';
    if (top_level) in_fit = line.rfind("fit:", 0) == 0;
    if (!in_fit) kept += line + "\n";
  }
  // The comment as the committed profiles carry it (the fit lived in tools/
  // then), so that fitting one again changes only its numbers.
  std::string block = "fit:                             # sextant fit-profile (tools/profile_fit.h)\n";
  block += "  data_set: \"" + fit.data_set + "\"\n  parameters: {";
  for (std::size_t i = 0; i < fit.parameters.size(); ++i)
    block += (i ? ", " : "") + fit.parameters[i].first + ": " + number(fit.parameters[i].second);
  block += "}\n  log_residual_sd: " + number(fit.log_residual_sd) +
           "   # sd of ln(measured / predicted) over the runs, (n - parameters) degrees of freedom\n";
  block += "  runs: " + std::to_string(fit.runs) + "\n";
  return kept + block;
}

}  // namespace sextant::engine::calibration
