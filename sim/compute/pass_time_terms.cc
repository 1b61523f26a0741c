#include "sim/compute/pass_time_terms.h"

namespace sextant::sim {

namespace {
// Element-wise backward traffic over forward traffic (see the header).
constexpr double kBackwardToForwardElementwiseBytes = 2.0;
}  // namespace

void add_linear(PassTime& t, double m, double n, double k, double batch, const DeviceRates& r) {
  add_linear_times(t, linear_times(m, k, n, batch, r));
}

void add_linear_times(PassTime& t, const LinearTimes& g) {
  const double backward = g.input_gradient_s + g.weight_gradient_s;
  t.forward_s += g.forward_s;
  t.backward_s += backward;
  t.gemm_forward_s += g.forward_s;
  t.gemm_backward_s += backward;
  t.weight_gradient_s += g.weight_gradient_s;
}

void add_elementwise(PassTime& t, double forward_bytes, int forward_kernels,
                     const DeviceRates& r) {
  t.forward_s += forward_bytes / r.memory_bytes_per_s + forward_kernels * r.kernel_overhead_s;
  t.backward_s += kBackwardToForwardElementwiseBytes *
                  (forward_bytes / r.memory_bytes_per_s + forward_kernels * r.kernel_overhead_s);
}

}  // namespace sextant::sim
