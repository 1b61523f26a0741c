#include "tests/sim/invariants/invariant_grid.h"

#include <cctype>

#include "sim/core/layout_check.h"
#include "sim/core/preset_catalog.h"

namespace sextant::testing {

namespace {

const char* const kModels[] = {"gpt-350m", "gpt-1.3b",    "gpt-6.7b",   "gpt3-175b",
                               "llama3-8b", "llama3-70b", "llama3-405b", "mixtral-8x7b"};

}  // namespace

std::string GridCase::describe() const { return model.name + " " + layout.to_spec(); }

const GridHardware& grid_hardware() {
  static const GridHardware hardware = [] {
    const sim::PresetCatalog catalog(SEXTANT_TEST_CONFIG_DIR);
    GridHardware h;
    h.cluster = catalog.cluster("dgx-h100");
    h.profile = catalog.profile("", h.cluster.gpu.name);
    return h;
  }();
  return hardware;
}

std::vector<std::string> grid_models() { return {std::begin(kModels), std::end(kModels)}; }

std::vector<std::string> small_grid_models() {
  return {"gpt-350m", "gpt-1.3b", "llama3-8b", "mixtral-8x7b"};
}

std::vector<GridCase> grid_cases(const std::string& name) {
  const sim::PresetCatalog catalog(SEXTANT_TEST_CONFIG_DIR);
  const sim::ModelConfig model = catalog.model(name);
  std::vector<GridCase> out;
  for (int tp : {1, 8})
    for (int pp : {1, 4})
      for (int vpp : {1, 2})
        for (int dp : {2, 16})
          for (int mbs : {1, 2})
            for (int zero : {0, 1, 3})
              for (sim::Recompute recompute : {sim::Recompute::kSelective, sim::Recompute::kFull})
                for (int ep : {1, 8}) {
                  if (vpp > 1 && pp == 1) continue;
                  if (ep > 1 && !model.moe) continue;
                  sim::ParallelLayout l;
                  l.tp = tp;
                  l.pp = pp;
                  l.vpp = vpp;
                  l.schedule = vpp > 1 ? sim::Schedule::kInterleaved : sim::Schedule::kOneFOneB;
                  l.dp = dp;
                  l.ep = ep;
                  l.mbs = mbs;
                  l.gbs = mbs * dp * 2 * pp;  // 2·pp micro-batches: interleaving allows it
                  l.sp = tp > 1;
                  l.tp_comm_overlap = tp > 1;
                  l.recompute = recompute;
                  l.zero = zero;
                  l.overlap_grad_reduce = zero < 3;
                  l.overlap_param_gather = zero == 1;
                  if (grid_valid(model, l)) out.push_back({model, l});
                }
  return out;
}

std::vector<GridCase> grid_cases_where(const std::string& model,
                                       bool (*keep)(const sim::ParallelLayout&)) {
  std::vector<GridCase> out;
  for (GridCase& c : grid_cases(model)) {
    if (keep(c.layout)) out.push_back(std::move(c));
  }
  return out;
}

std::vector<GridCase> sampled_cases(const std::string& model, std::size_t stride) {
  std::vector<GridCase> out;
  std::size_t seen = 0;
  for (GridCase& c : grid_cases(model)) {
    if (seen++ % stride == 0) out.push_back(std::move(c));
  }
  return out;
}

std::string grid_model_name(const std::string& model) {
  std::string name = model;
  for (char& ch : name) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return name;
}

bool grid_valid(const sim::ModelConfig& model, const sim::ParallelLayout& l) {
  return sim::is_valid_layout(model, grid_hardware().cluster, l.total_gpus(), l);
}

}  // namespace sextant::testing
