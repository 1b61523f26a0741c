// `sextant run --layout best`: the search's fastest layout that the engine
// executes, on the GPUs of the run (one, or the world a launcher started).
#include "tools/run_layout.h"

#include <gtest/gtest.h>

#include <string>

#include "search/layout_search.h"
#include "sim/core/config_error.h"
#include "sim/core/preset_catalog.h"

namespace sextant::tools {
namespace {

struct Inputs {
  sim::PresetCatalog catalog{SEXTANT_TEST_CONFIG_DIR};
  sim::ModelConfig model = catalog.model("gpt-1.3b");
  sim::ClusterConfig cluster = catalog.cluster("dgx-h100");
  sim::CostProfile profile = catalog.profile("", cluster.gpu.name);
};

bool engine_runs(const sim::ParallelLayout& l, int world_size, int global_batch) {
  try {
    run_layout(l.to_spec(), world_size, global_batch);
    return true;
  } catch (const sim::ConfigError&) {
    return false;
  }
}

TEST(BestLayout, OnEightRanksIsTheFastestTheEngineRuns) {
  const Inputs in;
  std::string note;
  const std::string spec = best_layout(in.model, in.cluster, in.profile, 8, 64, note);
  const sim::ParallelLayout l = run_layout(spec, 8, 64);  // the engine takes it as it is
  EXPECT_EQ(l.tp * l.pp * l.dp, 8) << spec;
  EXPECT_EQ(l.cp, 1);
  EXPECT_LE(l.zero, 1);
  EXPECT_EQ(l.gbs, 64);
  EXPECT_NE(note.find("layout best: " + spec + " (the search's"), std::string::npos) << note;
  EXPECT_NE(note.find(" layouts on 8 x h100-sxm-80gb"), std::string::npos) << note;

  // Every layout the search ranks before it is one the engine refuses.
  sim::PartialLayout partial;
  partial.gbs = 64;
  partial.cp = partial.ep = partial.etp = 1;
  partial.precision = sim::Precision::kBf16;
  partial.attention = sim::AttentionKernel::kFlash;
  search::SearchOptions options;
  options.top = 200;
  options.constraints.tp_within_node = true;
  const search::SearchResult r = search::search_layouts(in.model, in.cluster, in.profile, 8, partial, options);
  bool found = false;
  for (const sim::SimulationResult& candidate : r.best) {
    if (candidate.layout.to_spec() == spec) {
      found = true;
      break;
    }
    EXPECT_FALSE(engine_runs(candidate.layout, 8, 64)) << candidate.layout.to_spec() << " ranks before " << spec;
  }
  EXPECT_TRUE(found) << spec;
}

TEST(BestLayout, OnOneGpuUsesNoParallelism) {
  const Inputs in;
  std::string note;
  const std::string spec = best_layout(in.model, in.cluster, in.profile, 1, 64, note);
  const sim::ParallelLayout l = run_layout(spec, 1, 64);
  EXPECT_EQ(l.tp * l.pp * l.dp, 1);
  EXPECT_EQ(l.zero, 0);
  EXPECT_EQ(64 % l.mbs, 0);
}

TEST(BestLayout, NeedsTheGlobalBatchAndSaysWhenNothingFits) {
  const Inputs in;
  std::string note;
  try {
    best_layout(in.model, in.cluster, in.profile, 8, 0, note);
    ADD_FAILURE() << "no global batch accepted";
  } catch (const sim::ConfigError& e) {
    EXPECT_EQ(e.diagnostics().at(0).message, "needs the global batch: give --global-batch N");
  }
  // Llama 3 405B on one GPU fits in no layout.
  try {
    best_layout(in.catalog.model("llama3-405b"), in.cluster, in.profile, 1, 16, note);
    ADD_FAILURE() << "a layout of 405B parameters on one GPU";
  } catch (const sim::ConfigError& e) {
    EXPECT_NE(e.diagnostics().at(0).message.find("no layout of llama3-405b with global batch 16 on 1 x h100-sxm-80gb "
                                                 "fits and is one the engine runs"),
              std::string::npos)
        << e.diagnostics().at(0).message;
  }
}

}  // namespace
}  // namespace sextant::tools
