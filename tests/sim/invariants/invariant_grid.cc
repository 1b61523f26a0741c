#include "tests/sim/invariants/invariant_grid.h"

#include <cctype>

#include "sim/core/layout_check.h"
#include "sim/core/preset_catalog.h"

namespace sextant::testing {

namespace {

const char* const kModels[] = {"gpt-350m", "gpt-1.3b",    "gpt-6.7b",   "gpt3-175b",
                               "llama3-8b", "llama3-70b", "llama3-405b", "mixtral-8x7b"};

std::vector<GridCase> build_grid() {
  const sim::PresetCatalog catalog(SEXTANT_TEST_CONFIG_DIR);
  std::vector<GridCase> out;
  for (const char* name : kModels) {
    const sim::ModelConfig model = catalog.model(name);
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
  }
  return out;
}

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

const std::vector<GridCase>& invariant_grid() {
  static const std::vector<GridCase> grid = build_grid();
  return grid;
}

std::vector<GridCase> grid_where(bool (*keep)(const sim::ParallelLayout&)) {
  std::vector<GridCase> out;
  for (const GridCase& c : invariant_grid()) {
    if (keep(c.layout)) out.push_back(c);
  }
  return out;
}

std::vector<GridCase> sampled_grid(std::size_t stride) {
  std::vector<GridCase> out;
  std::size_t seen = 0;
  for (const GridCase& c : invariant_grid()) {
    const bool small = c.model.name == "gpt-350m" || c.model.name == "gpt-1.3b" ||
                       c.model.name == "llama3-8b" || c.model.name == "mixtral-8x7b";
    if (small && seen++ % stride == 0) out.push_back(c);
  }
  return out;
}

std::string grid_case_name(const GridCase& c, std::size_t index) {
  const sim::ParallelLayout& l = c.layout;
  std::string name = std::to_string(index) + "_" + c.model.name + "_tp" + std::to_string(l.tp) +
                     "pp" + std::to_string(l.pp) + "v" + std::to_string(l.vpp) + "dp" +
                     std::to_string(l.dp) + "ep" + std::to_string(l.ep) + "mbs" +
                     std::to_string(l.mbs) + "z" + std::to_string(l.zero) + "rc" +
                     std::string(sim::to_string(l.recompute));
  for (char& ch : name) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return name;
}

bool grid_valid(const sim::ModelConfig& model, const sim::ParallelLayout& l) {
  return sim::is_valid_layout(model, grid_hardware().cluster, l.total_gpus(), l);
}

}  // namespace sextant::testing
