// Invariants of data-parallel and pipeline communication over the generated
// grid (invariant_grid.h); a failure names the model and layout.
#include <algorithm>

#include <gtest/gtest.h>

#include "sim/analytic/analytic_model.h"
#include "sim/comm/data_parallel_volume.h"
#include "tests/sim/invariants/invariant_grid.h"

namespace sextant::testing {
namespace {

using sim::ParallelLayout;

sim::SimulationResult analytic(const GridCase& c, const ParallelLayout& l) {
  const GridHardware& h = grid_hardware();
  return sim::simulate_analytic(c.model, h.cluster, h.profile, l);
}

bool zero_three(const ParallelLayout& l) { return l.zero == 3; }
bool interleaved(const ParallelLayout& l) { return l.pp > 1 && l.vpp == 2; }

class ZeroThreeInvariant : public ::testing::TestWithParam<std::string> {};
class InterleavingInvariant : public ::testing::TestWithParam<std::string> {};

// Reason: ZeRO-3 gathers every weight twice per micro-batch and reduce-scatters
// every gradient per micro-batch; ZeRO-1 reduce-scatters and gathers once per step.
TEST_P(ZeroThreeInvariant, MovesAtLeastTheBytesOfZeroOne) {
  for (const GridCase& c : grid_cases_where(GetParam(), zero_three)) {
    ParallelLayout zero1 = c.layout;
    zero1.zero = 1;
    zero1.overlap_grad_reduce = true;
    zero1.overlap_param_gather = true;
    ASSERT_TRUE(grid_valid(c.model, zero1)) << c.describe();
    EXPECT_GE(sim::data_parallel_bytes_per_step(c.model, c.layout),
              sim::data_parallel_bytes_per_step(c.model, zero1))
        << c.describe();
  }
}

// Reason: at a fixed number of micro-batches per rank (gbs grows with dp, as in
// weak scaling) each rank sends (n−1)/n of the same buffers over a ring that only
// gets longer and no faster, so ZeRO-3's bytes, exposed time and step never shrink
// (the step less the optimizer, whose shard does shrink with dp).
TEST_P(ZeroThreeInvariant, NeverMovesLessAsDpGrows) {
  for (const GridCase& c : grid_cases_where(GetParam(), zero_three)) {
    ParallelLayout wider = c.layout;
    wider.dp = 4 * c.layout.dp;
    wider.gbs = 4 * c.layout.gbs;
    if (!grid_valid(c.model, wider)) continue;
    EXPECT_GE(sim::data_parallel_bytes_per_step(c.model, wider),
              sim::data_parallel_bytes_per_step(c.model, c.layout))
        << c.describe();
    const sim::SimulationResult narrow_r = analytic(c, c.layout);
    const sim::SimulationResult wide_r = analytic(c, wider);
    EXPECT_GE(wide_r.exposed_dp_s, narrow_r.exposed_dp_s * (1 - 1e-12)) << c.describe();
    EXPECT_GE(wide_r.step_time_s - wide_r.time.optimizer_s,
              (narrow_r.step_time_s - narrow_r.time.optimizer_s) * (1 - 1e-12))
        << c.describe();
  }
}

// Reason: interleaving over v chunks sends the same-sized activations at every one
// of p·v − 1 virtual-stage boundaries (Narayanan et al. 2021, Sec. 2.2.2), so more
// chunks mean more sends: strictly more time on them (pp > 1 always sends).
TEST_P(InterleavingInvariant, MoreVppNeverLowersPipelineSendTime) {
  for (const GridCase& c : grid_cases_where(GetParam(), interleaved)) {
    const int per_stage = c.model.num_layers / c.layout.pp;
    double previous_s = 0;
    int previous_v = 0;
    for (int v = 2; v <= per_stage; ++v) {
      if (per_stage % v != 0) continue;
      ParallelLayout l = c.layout;
      l.vpp = v;
      if (!grid_valid(c.model, l)) continue;
      const double pp_s = analytic(c, l).exposed_pp_s;
      EXPECT_GT(pp_s, previous_s) << c.describe() << ": vpp=" << v << " sends " << pp_s
                                  << " s, vpp=" << previous_v << " sent " << previous_s << " s";
      previous_s = pp_s;
      previous_v = v;
    }
  }
}

std::string model_name(const ::testing::TestParamInfo<std::string>& info) {
  return grid_model_name(info.param);
}
INSTANTIATE_TEST_SUITE_P(Grid, ZeroThreeInvariant, ::testing::ValuesIn(grid_models()),
                         model_name);
INSTANTIATE_TEST_SUITE_P(Grid, InterleavingInvariant, ::testing::ValuesIn(grid_models()),
                         model_name);

}  // namespace
}  // namespace sextant::testing
