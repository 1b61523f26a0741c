#include "kernels/context_parallel_kv.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "kernels/cuda_check.h"
#include "kernels/device_common.cuh"

namespace sextant::kernels {
namespace {

using detail::kBf16PerVector;
constexpr int kThreads = 256;

// The geometry every kernel indexes with, in 64-bit counts.
struct Geometry {
  int cp;
  int c;        // chunk tokens
  int L;        // local tokens, 2c
  int S;        // sequence tokens, 2·cp·c
  int width;    // W
  int vectors;  // W / 8: 16-byte bf16 vectors per token
  long long kv_elements;     // batch·L·W: one of K or V in a rank's block
  long long block_elements;  // 2·batch·L·W
};

Geometry geometry_of(const ContextParallelKvShape& s) {
  Geometry g{};
  g.cp = s.cp;
  g.c = s.chunk_tokens;
  g.L = s.local_tokens();
  g.S = s.sequence_tokens();
  g.width = s.width;
  g.vectors = s.width / kBf16PerVector;
  g.kv_elements = static_cast<long long>(s.batch) * g.L * g.width;
  g.block_elements = 2 * g.kv_elements;
  return g;
}

// Where global position p lives (the definition: engine/model/context_parallel_chunks.h).
struct Holder {
  int rank;
  int local_token;
};
__device__ __forceinline__ Holder holder_of(int p, const Geometry& g) {
  const int chunk = p / g.c;
  if (chunk < g.cp) return {chunk, p % g.c};
  return {2 * g.cp - 1 - chunk, g.c + p % g.c};
}
// The global position of rank r's local token t: ContextParallelChunks::global_position.
__device__ __forceinline__ int position_of(int rank, int t, const Geometry& g) {
  const int chunk = t < g.c ? rank : 2 * g.cp - 1 - rank;
  return chunk * g.c + t % g.c;
}

// 8 fp32 (32-byte aligned) as two 16-byte accesses.
__device__ __forceinline__ void load_float8(const float* p, float (&out)[8]) {
  const float4 a = reinterpret_cast<const float4*>(p)[0];
  const float4 b = reinterpret_cast<const float4*>(p)[1];
  out[0] = a.x, out[1] = a.y, out[2] = a.z, out[3] = a.w;
  out[4] = b.x, out[5] = b.y, out[6] = b.z, out[7] = b.w;
}
__device__ __forceinline__ void store_float8(float* p, const float (&in)[8]) {
  reinterpret_cast<float4*>(p)[0] = make_float4(in[0], in[1], in[2], in[3]);
  reinterpret_cast<float4*>(p)[1] = make_float4(in[4], in[5], in[6], in[7]);
}

// One thread per 8 elements of k_full or v_full: index over (kv, b, p, vector).
__global__ void gather_sequence_kv_kernel(__nv_bfloat16* k_full, __nv_bfloat16* v_full,
                                          const __nv_bfloat16* gathered, int batch, Geometry g) {
  const long long index = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  const long long per_kv = static_cast<long long>(batch) * g.S * g.vectors;
  if (index >= 2 * per_kv) return;
  const int kv = static_cast<int>(index / per_kv);
  const long long rest = index % per_kv;
  const int e = static_cast<int>(rest % g.vectors) * kBf16PerVector;
  const long long token = rest / g.vectors;  // b·S + p
  const int b = static_cast<int>(token / g.S);
  const int p = static_cast<int>(token % g.S);
  const Holder h = holder_of(p, g);
  const __nv_bfloat16* src = gathered + h.rank * g.block_elements + kv * g.kv_elements +
                             (static_cast<long long>(b) * g.L + h.local_token) * g.width + e;
  __nv_bfloat16* dst = (kv == 0 ? k_full : v_full) + token * g.width + e;
  *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(src);
}

// ChunkKvGradients with CUDA's bf16 type.
struct DeviceChunkGradients {
  const __nv_bfloat16* dk[2];
  const __nv_bfloat16* dv[2];
  int visible_tokens[2];
};

// One thread per 8 elements of rank_major: index over (r, kv, b, t, vector).
__global__ void sum_chunk_kv_gradients_kernel(float* rank_major, DeviceChunkGradients chunks, Geometry g) {
  const long long index = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (index * kBf16PerVector >= g.cp * g.block_elements) return;
  const long long element = index * kBf16PerVector;
  const int r = static_cast<int>(element / g.block_elements);
  const long long in_block = element % g.block_elements;
  const int kv = static_cast<int>(in_block / g.kv_elements);
  const long long in_kv = in_block % g.kv_elements;
  const int e = static_cast<int>(in_kv % g.width);
  const long long token = in_kv / g.width;  // b·L + t
  const int b = static_cast<int>(token / g.L);
  const int t = static_cast<int>(token % g.L);
  const int p = position_of(r, t, g);
  float sum[kBf16PerVector] = {};
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    const int visible = chunks.visible_tokens[j];
    if (p >= visible) continue;  // chunk j's queries did not see this key
    const __nv_bfloat16* gradient = kv == 0 ? chunks.dk[j] : chunks.dv[j];
    float values[kBf16PerVector];
    detail::load_bf16x8(gradient + (static_cast<long long>(b) * visible + p) * g.width + e, values);
#pragma unroll
    for (int i = 0; i < kBf16PerVector; ++i) sum[i] += values[i];
  }
  store_float8(rank_major + element, sum);
}

// One thread per 8 elements of dk or dv: index over (kv, row, vector).
__global__ void store_local_kv_gradients_kernel(__nv_bfloat16* dk, __nv_bfloat16* dv, long long row_stride,
                                                const float* local, Geometry g) {
  const long long index = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (index * kBf16PerVector >= g.block_elements) return;
  const long long element = index * kBf16PerVector;
  const int kv = static_cast<int>(element / g.kv_elements);
  const long long in_kv = element % g.kv_elements;
  const long long row = in_kv / g.width;
  const int e = static_cast<int>(in_kv % g.width);
  float values[kBf16PerVector];
  load_float8(local + element, values);
  detail::store_bf16x8((kv == 0 ? dk : dv) + row * row_stride + e, values);
}

unsigned blocks_for(long long threads) { return static_cast<unsigned>((threads + kThreads - 1) / kThreads); }

void require_shape(const ContextParallelKvShape& shape, const char* launcher) {
  const std::string problem = context_parallel_kv_problem(shape);
  require_argument(problem.empty(), launcher, problem);
}

}  // namespace

std::string context_parallel_kv_problem(const ContextParallelKvShape& s) {
  std::string problems;
  auto need = [&](bool ok, const std::string& what) {
    if (!ok) problems += (problems.empty() ? "" : "; ") + what;
  };
  need(s.batch > 0, "batch (" + std::to_string(s.batch) + ") must be positive");
  need(s.cp > 0, "cp (" + std::to_string(s.cp) + ") must be positive");
  need(s.chunk_tokens > 0, "chunk_tokens (" + std::to_string(s.chunk_tokens) + ") must be positive");
  need(s.width > 0 && s.width % kBf16PerVector == 0,
       "width (" + std::to_string(s.width) + ") must be a positive multiple of 8");
  // Positions and tokens are ints on the device.
  need(static_cast<long long>(s.cp) * s.chunk_tokens <= (1LL << 30),
       "the sequence (2 · cp · chunk_tokens = " + std::to_string(2LL * s.cp * s.chunk_tokens) +
           " tokens) must be at most 2^31 tokens");
  return problems;
}

void gather_sequence_kv(Bf16* k_full, Bf16* v_full, const Bf16* gathered, const ContextParallelKvShape& shape,
                        cudaStream_t stream) {
  require_shape(shape, "gather_sequence_kv");
  require_argument(k_full != nullptr && v_full != nullptr && gathered != nullptr, "gather_sequence_kv",
                   "a pointer is null");
  require_argument(is_aligned(k_full, 16) && is_aligned(v_full, 16) && is_aligned(gathered, 16),
                   "gather_sequence_kv", "k_full, v_full and gathered must be 16-byte aligned");
  const Geometry g = geometry_of(shape);
  const long long threads = 2LL * shape.batch * g.S * g.vectors;
  gather_sequence_kv_kernel<<<blocks_for(threads), kThreads, 0, stream>>>(
      detail::cuda_bf16(k_full), detail::cuda_bf16(v_full), detail::cuda_bf16(gathered), shape.batch, g);
  SEXTANT_CHECK_LAUNCH("gather_sequence_kv_kernel");
}

void sum_chunk_kv_gradients(float* rank_major, const ChunkKvGradients& chunks, const ContextParallelKvShape& shape,
                            cudaStream_t stream) {
  require_shape(shape, "sum_chunk_kv_gradients");
  bool aligned = is_aligned(rank_major, 16);
  bool present = rank_major != nullptr;
  for (int j = 0; j < 2; ++j) {
    const int visible = chunks.visible_tokens[j];
    require_argument(visible >= 1 && visible <= shape.sequence_tokens(), "sum_chunk_kv_gradients",
                     "visible_tokens[" + std::to_string(j) + "] (" + std::to_string(visible) +
                         ") must be in [1, " + std::to_string(shape.sequence_tokens()) + "]");
    present = present && chunks.dk[j] != nullptr && chunks.dv[j] != nullptr;
    aligned = aligned && is_aligned(chunks.dk[j], 16) && is_aligned(chunks.dv[j], 16);
  }
  require_argument(present, "sum_chunk_kv_gradients", "a pointer is null");
  require_argument(aligned, "sum_chunk_kv_gradients", "rank_major, dk and dv must be 16-byte aligned");
  DeviceChunkGradients device{};
  for (int j = 0; j < 2; ++j) {
    device.dk[j] = detail::cuda_bf16(chunks.dk[j]);
    device.dv[j] = detail::cuda_bf16(chunks.dv[j]);
    device.visible_tokens[j] = chunks.visible_tokens[j];
  }
  const Geometry g = geometry_of(shape);
  const long long threads = g.cp * g.block_elements / kBf16PerVector;
  sum_chunk_kv_gradients_kernel<<<blocks_for(threads), kThreads, 0, stream>>>(rank_major, device, g);
  SEXTANT_CHECK_LAUNCH("sum_chunk_kv_gradients_kernel");
}

void store_local_kv_gradients(Bf16* dk, Bf16* dv, int row_stride, const float* local,
                              const ContextParallelKvShape& shape, cudaStream_t stream) {
  require_shape(shape, "store_local_kv_gradients");
  require_argument(row_stride == 0 || (row_stride % kBf16PerVector == 0 && row_stride >= shape.width),
                   "store_local_kv_gradients",
                   "row_stride (" + std::to_string(row_stride) + ") must be 0 or a multiple of 8 no less than width (" +
                       std::to_string(shape.width) + ")");
  require_argument(dk != nullptr && dv != nullptr && local != nullptr, "store_local_kv_gradients",
                   "a pointer is null");
  require_argument(is_aligned(dk, 16) && is_aligned(dv, 16) && is_aligned(local, 16), "store_local_kv_gradients",
                   "dk, dv and local must be 16-byte aligned");
  const Geometry g = geometry_of(shape);
  const long long stride = row_stride == 0 ? shape.width : row_stride;
  const long long threads = g.block_elements / kBf16PerVector;
  store_local_kv_gradients_kernel<<<blocks_for(threads), kThreads, 0, stream>>>(
      detail::cuda_bf16(dk), detail::cuda_bf16(dv), stride, local, g);
  SEXTANT_CHECK_LAUNCH("store_local_kv_gradients_kernel");
}

}  // namespace sextant::kernels
