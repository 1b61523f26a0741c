#include "kernels/attention_merge.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <string>

#include "kernels/cuda_check.h"

namespace sextant::kernels {
namespace {

// One thread per element of a (row, head) output vector, blockDim.x =
// head_dim; blockDim.y (row, head) pairs per block. Every thread reads the two
// LSEs before any thread of the pair writes the merged one (__syncthreads),
// so a pair is handled within one block. Its output element is independent
// of the others'.
__global__ void merge_attention_partial_kernel(float* __restrict__ out_acc, float* __restrict__ lse_acc,
                                               const __nv_bfloat16* __restrict__ part_out,
                                               const float* __restrict__ part_lse, int rows, int heads,
                                               int head_dim, bool first) {
  const long long pair = static_cast<long long>(blockIdx.x) * blockDim.y + threadIdx.y;
  const bool active = pair < static_cast<long long>(rows) * heads;
  const int row = active ? static_cast<int>(pair / heads) : 0;
  const int head = active ? static_cast<int>(pair % heads) : 0;
  const std::size_t lse_index = static_cast<std::size_t>(head) * rows + row;
  float l_part = 0.0f, l_acc = 0.0f;
  if (active) {
    l_part = part_lse[lse_index];
    l_acc = first ? -INFINITY : lse_acc[lse_index];
  }
  __syncthreads();  // every thread of the pair has read lse_acc before it is written
  if (!active) return;
  const float m = fmaxf(l_part, l_acc);
  float w_part = 0.0f, w_acc = 0.0f, l = -INFINITY;
  if (m != -INFINITY) {  // some key seen: L = m + log(e^(L_A - m) + e^(L_B - m))
    const float e_part = expf(l_part - m), e_acc = expf(l_acc - m);
    const float sum = e_part + e_acc;
    l = m + logf(sum);
    w_part = e_part / sum;  // = exp(L_part - L)
    w_acc = e_acc / sum;
  }
  const std::size_t element = (static_cast<std::size_t>(row) * heads + head) * head_dim + threadIdx.x;
  const float o_part = __bfloat162float(part_out[element]);
  out_acc[element] = first ? w_part * o_part : w_acc * out_acc[element] + w_part * o_part;
  if (threadIdx.x == 0) lse_acc[lse_index] = l;
}

}  // namespace

std::string attention_merge_problem(const AttentionMergeShape& s) {
  std::string why;
  auto add = [&](const std::string& reason) { why += (why.empty() ? "" : "; ") + reason; };
  if (s.rows <= 0) add("rows (" + std::to_string(s.rows) + ") must be positive");
  if (s.heads <= 0) add("heads (" + std::to_string(s.heads) + ") must be positive");
  if (s.head_dim <= 0 || s.head_dim > 1024 || s.head_dim % 8 != 0)
    add("head_dim (" + std::to_string(s.head_dim) + ") must be a positive multiple of 8, at most 1024");
  return why;
}

void merge_attention_partial(float* out_acc, float* lse_acc, const Bf16* part_out, const float* part_lse,
                             const AttentionMergeShape& shape, bool first, cudaStream_t stream) {
  const std::string problem = attention_merge_problem(shape);
  require_argument(problem.empty(), "merge_attention_partial", problem);
  require_argument(out_acc != nullptr && lse_acc != nullptr && part_out != nullptr && part_lse != nullptr,
                   "merge_attention_partial", "a pointer is null");
  const int pairs_per_block = shape.head_dim >= 256 ? 1 : 256 / shape.head_dim;
  const long long pairs = static_cast<long long>(shape.rows) * shape.heads;
  const dim3 block(static_cast<unsigned>(shape.head_dim), static_cast<unsigned>(pairs_per_block));
  const dim3 grid(static_cast<unsigned>((pairs + pairs_per_block - 1) / pairs_per_block));
  merge_attention_partial_kernel<<<grid, block, 0, stream>>>(
      out_acc, lse_acc, reinterpret_cast<const __nv_bfloat16*>(part_out), part_lse, shape.rows, shape.heads,
      shape.head_dim, first);
  SEXTANT_CHECK_LAUNCH("merge_attention_partial_kernel");
}

}  // namespace sextant::kernels
