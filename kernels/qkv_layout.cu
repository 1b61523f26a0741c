#include "kernels/qkv_layout.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>


#include "kernels/cuda_check.h"
#include "kernels/device_common.cuh"

namespace sextant::kernels {
namespace {

using detail::kBf16PerVector;
constexpr int kThreads = 256;

// One thread copies 8 consecutive elements (16 bytes) of one head of one token
// between the fused row and the split arrays, in the direction kToFused says.
template <bool kToFused>
__global__ void qkv_copy_kernel(uint4* fused, uint4* q, uint4* k, uint4* v, long long tokens,
                                int heads, int kv_heads, int vectors_per_head) {
  const int row_heads = heads + 2 * kv_heads;
  const long long index = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (index >= tokens * row_heads * vectors_per_head) return;
  const int vec = static_cast<int>(index % vectors_per_head);
  const int head = static_cast<int>((index / vectors_per_head) % row_heads);
  const long long token = index / (static_cast<long long>(vectors_per_head) * row_heads);
  uint4* split;
  if (head < heads) {
    split = q + (token * heads + head) * vectors_per_head;
  } else if (head < heads + kv_heads) {
    split = k + (token * kv_heads + (head - heads)) * vectors_per_head;
  } else {
    split = v + (token * kv_heads + (head - heads - kv_heads)) * vectors_per_head;
  }
  uint4* row = fused + (token * row_heads + head) * vectors_per_head;
  if (kToFused)
    row[vec] = split[vec];
  else
    split[vec] = row[vec];
}

void launch(bool to_fused, Bf16* fused, Bf16* q, Bf16* k, Bf16* v, const QkvShape& s,
            cudaStream_t stream) {
  const char* name = to_fused ? "qkv_merge_gradients" : "qkv_split";
  const std::string problem = qkv_shape_problem(s);
  require_argument(problem.empty(), name, problem);
  require_argument(fused != nullptr && q != nullptr && k != nullptr && v != nullptr, name,
                   "a pointer is null");
  require_argument(is_aligned(fused, 16) && is_aligned(q, 16) && is_aligned(k, 16) && is_aligned(v, 16),
                   name, "pointers must be 16-byte aligned");
  const long long tokens = static_cast<long long>(s.batch) * s.seq;
  const int vectors_per_head = s.head_dim / kBf16PerVector;
  const long long threads = tokens * (s.heads + 2 * s.kv_heads) * vectors_per_head;
  const unsigned blocks = static_cast<unsigned>((threads + kThreads - 1) / kThreads);
  auto* f = reinterpret_cast<uint4*>(fused);
  auto* vq = reinterpret_cast<uint4*>(q);
  auto* vk = reinterpret_cast<uint4*>(k);
  auto* vv = reinterpret_cast<uint4*>(v);
  if (to_fused)
    qkv_copy_kernel<true><<<blocks, kThreads, 0, stream>>>(f, vq, vk, vv, tokens, s.heads, s.kv_heads,
                                                           vectors_per_head);
  else
    qkv_copy_kernel<false><<<blocks, kThreads, 0, stream>>>(f, vq, vk, vv, tokens, s.heads,
                                                            s.kv_heads, vectors_per_head);
  SEXTANT_CHECK_LAUNCH(name);
}

}  // namespace

std::string qkv_shape_problem(const QkvShape& s) {
  std::string problems;
  auto need = [&](bool ok, const std::string& what) {
    if (!ok) problems += (problems.empty() ? "" : "; ") + what;
  };
  need(s.batch >= 1 && s.seq >= 1, "batch (" + std::to_string(s.batch) + ") and seq (" +
                                       std::to_string(s.seq) + ") must be positive");
  need(s.heads >= 1 && s.kv_heads >= 1, "heads (" + std::to_string(s.heads) + ") and kv_heads (" +
                                            std::to_string(s.kv_heads) + ") must be positive");
  need(s.head_dim >= 8 && s.head_dim % 8 == 0,
       "head_dim (" + std::to_string(s.head_dim) + ") must be a positive multiple of 8");
  return problems;
}

void qkv_split(Bf16* q, Bf16* k, Bf16* v, const Bf16* qkv, const QkvShape& shape, cudaStream_t stream) {
  launch(false, const_cast<Bf16*>(qkv), q, k, v, shape, stream);
}

void qkv_merge_gradients(Bf16* dqkv, const Bf16* dq, const Bf16* dk, const Bf16* dv,
                         const QkvShape& shape, cudaStream_t stream) {
  launch(true, dqkv, const_cast<Bf16*>(dq), const_cast<Bf16*>(dk), const_cast<Bf16*>(dv), shape, stream);
}

}  // namespace sextant::kernels
