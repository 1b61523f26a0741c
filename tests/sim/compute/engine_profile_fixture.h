// The fixture profile the engine's kernel-list tests cost from
// (tests/data/profiles/engine-measured-tiny.yaml: every table follows one rate,
// its header says which), on an H100, and the one-GPU layouts they use.
#pragma once

#include <string>

#include "sim/compute/device_rates.h"
#include "sim/core/config_loader.h"
#include "sim/core/preset_catalog.h"

namespace sextant::sim::test_fixtures {

struct EngineProfileFixture {
  PresetCatalog catalog{SEXTANT_TEST_CONFIG_DIR};
  CostProfile profile =
      load_profile_file(std::string(SEXTANT_TEST_DATA_DIR) + "/profiles/engine-measured-tiny.yaml");
  GpuConfig gpu = catalog.gpu("h100-sxm-80gb");
  DeviceRates rates() const { return device_rates(gpu, profile, Precision::kBf16); }
};

/// One GPU running `mbs` sequences per micro-batch, one micro-batch per step.
inline ParallelLayout one_gpu(int mbs, Recompute recompute = Recompute::kNone) {
  ParallelLayout l;
  l.mbs = mbs;
  l.gbs = mbs;
  l.recompute = recompute;
  return l;
}

}  // namespace sextant::sim::test_fixtures
