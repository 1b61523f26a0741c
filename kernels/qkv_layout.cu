#include "kernels/qkv_layout.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>

#include "kernels/cuda_check.h"
#include "kernels/device_common.cuh"

namespace sextant::kernels {
namespace {

using detail::kBf16PerVector;
constexpr int kThreads = 256;

// One thread moves 8 elements of the first half of one head and the 8 that pair
// with them in the second half. `direction` is +1 (forward rotation) or -1.
// `to_fused` says whether the fused row is the destination (merge) or the source.
template <bool kToFused>
__global__ void qkv_kernel(__nv_bfloat16* fused, __nv_bfloat16* q, __nv_bfloat16* k,
                           __nv_bfloat16* v, long long tokens, int seq, int heads, int kv_heads,
                           int head_dim, bool rotary, float log2_theta, float direction) {
  const int half = head_dim / 2;
  const int vectors_per_head = half / kBf16PerVector;
  const int row_heads = heads + 2 * kv_heads;
  const long long index = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (index >= tokens * row_heads * vectors_per_head) return;
  const int vec = static_cast<int>(index % vectors_per_head);
  const int head = static_cast<int>((index / vectors_per_head) % row_heads);
  const long long token = index / (static_cast<long long>(vectors_per_head) * row_heads);

  __nv_bfloat16* fused_head = fused + (token * row_heads + head) * head_dim;
  __nv_bfloat16* split_head;
  if (head < heads) {
    split_head = q + (token * heads + head) * head_dim;
  } else if (head < heads + kv_heads) {
    split_head = k + (token * kv_heads + (head - heads)) * head_dim;
  } else {
    split_head = v + (token * kv_heads + (head - heads - kv_heads)) * head_dim;
  }
  const int first = vec * kBf16PerVector;
  const __nv_bfloat16* source = kToFused ? split_head : fused_head;
  __nv_bfloat16* destination = kToFused ? fused_head : split_head;
  const bool rotate = rotary && head < heads + kv_heads;
  if (!rotate) {
    *reinterpret_cast<uint4*>(destination + first) = *reinterpret_cast<const uint4*>(source + first);
    *reinterpret_cast<uint4*>(destination + first + half) =
        *reinterpret_cast<const uint4*>(source + first + half);
    return;
  }
  float x1[kBf16PerVector], x2[kBf16PerVector], y1[kBf16PerVector], y2[kBf16PerVector];
  detail::load_bf16x8(source + first, x1);
  detail::load_bf16x8(source + first + half, x2);
  const float position = static_cast<float>(token % seq);
#pragma unroll
  for (int j = 0; j < kBf16PerVector; ++j) {
    // theta^(-2i/d) = 2^(-(2i/d) log2 theta); sincosf (not __sincosf) keeps
    // full accuracy at the large angles of long sequences.
    const float inverse_frequency = exp2f(-static_cast<float>(2 * (first + j)) / head_dim * log2_theta);
    float s, c;
    sincosf(position * inverse_frequency, &s, &c);
    s *= direction;
    y1[j] = x1[j] * c - x2[j] * s;
    y2[j] = x2[j] * c + x1[j] * s;
  }
  detail::store_bf16x8(destination + first, y1);
  detail::store_bf16x8(destination + first + half, y2);
}

void launch(bool to_fused, Bf16* fused, Bf16* q, Bf16* k, Bf16* v, const QkvShape& s,
            cudaStream_t stream) {
  const std::string problem = qkv_shape_problem(s);
  require_argument(problem.empty(), to_fused ? "qkv_merge_gradients" : "qkv_split", problem);
  require_argument(is_aligned(fused, 16) && is_aligned(q, 16) && is_aligned(k, 16) && is_aligned(v, 16),
                   to_fused ? "qkv_merge_gradients" : "qkv_split", "pointers must be 16-byte aligned");
  const long long tokens = static_cast<long long>(s.batch) * s.seq;
  const long long threads = tokens * (s.heads + 2 * s.kv_heads) * (s.head_dim / 2 / kBf16PerVector);
  const unsigned blocks = static_cast<unsigned>((threads + kThreads - 1) / kThreads);
  const float log2_theta = std::log2(s.rope_theta);
  auto* f = detail::cuda_bf16(fused);
  if (to_fused) {
    qkv_kernel<true><<<blocks, kThreads, 0, stream>>>(f, detail::cuda_bf16(q), detail::cuda_bf16(k),
                                                      detail::cuda_bf16(v), tokens, s.seq, s.heads,
                                                      s.kv_heads, s.head_dim, s.rotary, log2_theta, -1.0f);
    SEXTANT_CHECK_LAUNCH("qkv_kernel<merge>");
  } else {
    qkv_kernel<false><<<blocks, kThreads, 0, stream>>>(f, detail::cuda_bf16(q), detail::cuda_bf16(k),
                                                       detail::cuda_bf16(v), tokens, s.seq, s.heads,
                                                       s.kv_heads, s.head_dim, s.rotary, log2_theta, 1.0f);
    SEXTANT_CHECK_LAUNCH("qkv_kernel<split>");
  }
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
  need(s.head_dim >= 16 && s.head_dim % 16 == 0,
       "head_dim (" + std::to_string(s.head_dim) + ") must be a positive multiple of 16");
  need(!s.rotary || s.rope_theta > 1.0f, "rope_theta must be above 1");
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
