#include "kernels/rmsnorm.h"

#include <string>

#include "kernels/cuda_check.h"
#include "kernels/norm_kernels.cuh"

namespace sextant::kernels {
void rmsnorm_forward(Bf16* out, float* rstd, const Bf16* inp, const Bf16* gamma, int rows,
                     int cols, float eps, cudaStream_t stream) {
  constexpr const char* kName = "rmsnorm_forward";
  detail::check_norm_shape(kName, rows, cols);
  require_argument(is_aligned(out, 16) && is_aligned(inp, 16) && is_aligned(gamma, 16), kName,
                   "out, inp and gamma must be 16-byte aligned");
  require_argument(gamma != nullptr, kName, "gamma must not be null");
  if (rows == 0) return;
  detail::launch_norm_forward<false>(detail::cuda_bf16(out), nullptr, rstd, detail::cuda_bf16(inp),
                                     detail::cuda_bf16(gamma), nullptr, rows, cols, eps, stream);
  SEXTANT_CHECK_LAUNCH("norm_forward_kernel<rmsnorm>");
}

std::size_t rmsnorm_backward_workspace_bytes(int rows, int cols) {
  return 2 * detail::column_partials_bytes(rows, cols);
}

void rmsnorm_backward(Bf16* dinp, float* dgamma, const Bf16* dout, const Bf16* inp,
                      const Bf16* gamma, const float* rstd, int rows, int cols, void* workspace,
                      std::size_t workspace_bytes, cudaStream_t stream,
                      const NormBackwardOptions& options) {
  constexpr const char* kName = "rmsnorm_backward";
  detail::check_norm_shape(kName, rows, cols);
  require_argument(is_aligned(dinp, 16) && is_aligned(dout, 16) && is_aligned(inp, 16) &&
                       is_aligned(gamma, 16) && is_aligned(workspace, 16) &&
                       is_aligned(options.residual_grad, 16),
                   kName, "dinp, dout, inp, gamma, workspace and residual_grad must be 16-byte aligned");
  require_argument(dgamma != nullptr && rstd != nullptr, kName, "dgamma and rstd must not be null");
  const std::size_t needed = rmsnorm_backward_workspace_bytes(rows, cols);
  require_argument(workspace_bytes >= needed, kName,
                   "workspace (" + std::to_string(workspace_bytes) + " bytes) is smaller than the " +
                       std::to_string(needed) + " bytes rmsnorm_backward_workspace_bytes asks for");
  require_argument(options.dinp_column_sums == nullptr || cols <= kNormBackwardMaxSummedCols, kName,
                   "dinp_column_sums needs cols (" + std::to_string(cols) + ") <= " +
                       std::to_string(kNormBackwardMaxSummedCols));
  if (rows == 0) return;

  detail::run_norm_backward<false>(detail::cuda_bf16(dinp), dgamma, nullptr, detail::cuda_bf16(dout),
                                   detail::cuda_bf16(inp), detail::cuda_bf16(gamma), nullptr, rstd,
                                   rows, cols, static_cast<float*>(workspace), options, stream);
}

}  // namespace sextant::kernels
