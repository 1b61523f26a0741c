#include "sim/compute/expert_kernels.h"

#include "sim/compute/gemm_time.h"
#include "sim/compute/grouped_gemm_time.h"
#include "sim/compute/pass_time_terms.h"

namespace sextant::sim {

namespace {
// One expert linear layer in_width → out_width over `mean_rows` rows per
// expert, `experts` of them: forward and input gradient are grouped GEMMs with
// the rows as M; the weight gradient's inner dimension is the rows
// (grouped_gemm_time.h says why the mean is exact there).
LinearTimes expert_linear_times(double mean_rows, double in_width, double out_width,
                                double experts, const DeviceRates& r) {
  const double f = r.compute_time_factor;
  LinearTimes g;
  g.forward_s = f * grouped_gemm_time_s(mean_rows, out_width, in_width, experts,
                                        r.gemm_flops_per_s, r);
  g.input_gradient_s = f * grouped_gemm_time_s(mean_rows, in_width, out_width, experts,
                                               r.gemm_flops_per_s, r);
  g.weight_gradient_s =
      f * gemm_time_s({in_width, out_width, mean_rows, experts, true}, r.gemm_flops_per_s, r);
  return g;
}
}  // namespace

void add_expert_mlp(PassTime& t, const ModelConfig& m, double rows, double ffn, double etp,
                    double local_experts, const DeviceRates& r) {
  if (ffn <= 0 || rows <= 0 || local_experts <= 0) return;
  const double h = static_cast<double>(m.hidden_size);
  const double mean_rows = rows / local_experts;
  const double width = ffn / etp;
  add_linear_times(t, expert_linear_times(mean_rows, h, width * m.mlp_input_projections(),
                                          local_experts, r));
  add_linear_times(t, expert_linear_times(mean_rows, width, h, local_experts, r));
  // Activation over all routed rows: GeLU reads and writes f; SwiGLU reads 2f, writes f.
  add_elementwise(t, 2.0 * rows * width * (m.mlp_input_projections() + 1), 1, r);
}

}  // namespace sextant::sim
