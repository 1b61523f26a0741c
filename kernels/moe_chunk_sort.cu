#include "kernels/moe_chunk_sort.h"

#include <algorithm>
#include <cub/block/block_scan.cuh>
#include <string>

#include "kernels/cuda_check.h"
#include "kernels/device_common.cuh"

namespace sextant::kernels {
namespace {

using detail::kBf16PerVector;
using detail::kWarpSize;

constexpr int kThreads = 256;
constexpr int kItemsPerThread = kMoeChunkSortMaxChunks / kThreads;
constexpr int kMaxBlocks = 1024;
using BlockScan = cub::BlockScan<std::int32_t, kThreads>;

// The input's k-th chunk is (s, e) = (k / experts, k % experts) in source-major
// order, (k % sources, k / sources) in expert-major order.
__device__ __forceinline__ int source_of(int k, int sources, int experts, bool source_major) {
  return source_major ? k / experts : k % sources;
}
__device__ __forceinline__ int expert_of(int k, int sources, int experts, bool source_major) {
  return source_major ? k % experts : k / sources;
}

__global__ void __launch_bounds__(kThreads)
    sort_chunks_kernel(__nv_bfloat16* out, const __nv_bfloat16* in, const std::int32_t* counts, int sources,
                       int experts, std::int64_t rows, int cols, bool in_source_major) {
  __shared__ typename BlockScan::TempStorage scan;
  __shared__ std::int32_t in_begin[kMoeChunkSortMaxChunks + 1];   // by input chunk index
  __shared__ std::int32_t out_begin[kMoeChunkSortMaxChunks];      // by input chunk index
  const int chunks = sources * experts;
  // Exclusive sums in each order: the input's by its chunk index, the
  // output's by the output's chunk index, then looked up by the input's.
  std::int32_t items[kItemsPerThread];
  for (int pass = 0; pass < 2; ++pass) {
    const bool order_source_major = pass == 0 ? in_source_major : !in_source_major;
    for (int i = 0; i < kItemsPerThread; ++i) {
      const int k = threadIdx.x * kItemsPerThread + i;
      items[i] = k < chunks ? counts[source_of(k, sources, experts, order_source_major) * experts +
                                     expert_of(k, sources, experts, order_source_major)]
                            : 0;
    }
    BlockScan(scan).ExclusiveSum(items, items);
    __syncthreads();
    for (int i = 0; i < kItemsPerThread; ++i) {
      const int k = threadIdx.x * kItemsPerThread + i;
      if (k >= chunks) continue;
      if (pass == 0) {
        in_begin[k] = items[i];
      } else {
        // Output chunk k is (s, e): its index in the input's order.
        const int s = source_of(k, sources, experts, order_source_major);
        const int e = expert_of(k, sources, experts, order_source_major);
        const int in_k = in_source_major ? s * experts + e : e * sources + s;
        out_begin[in_k] = items[i];
      }
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) in_begin[chunks] = static_cast<std::int32_t>(rows);
  __syncthreads();

  const int lane = threadIdx.x % kWarpSize;
  const int warps_per_block = kThreads / kWarpSize;
  const std::int64_t first = static_cast<std::int64_t>(blockIdx.x) * warps_per_block + threadIdx.x / kWarpSize;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * warps_per_block;
  for (std::int64_t row = first; row < rows; row += stride) {
    // The last chunk beginning at or before the row (empty chunks share a
    // beginning with the next: the search skips them).
    int lo = 0, hi = chunks;  // in_begin[lo] <= row < in_begin[hi]
    while (hi - lo > 1) {
      const int mid = (lo + hi) / 2;
      if (in_begin[mid] <= row)
        lo = mid;
      else
        hi = mid;
    }
    const std::int64_t to = out_begin[lo] + (row - in_begin[lo]);
    const uint4* src = reinterpret_cast<const uint4*>(in + row * cols);
    uint4* dst = reinterpret_cast<uint4*>(out + to * cols);
    for (int v = lane; v < cols / kBf16PerVector; v += kWarpSize) dst[v] = src[v];
  }
}

}  // namespace

void moe_sort_chunks(Bf16* out, const Bf16* in, const std::int32_t* counts, int sources, int experts,
                     std::int64_t rows, int cols, MoeChunkOrder in_order, cudaStream_t stream) {
  constexpr const char* kName = "moe_sort_chunks";
  require_argument(sources >= 1 && experts >= 1, kName, "sources and experts must be >= 1");
  require_argument(static_cast<std::int64_t>(sources) * experts <= kMoeChunkSortMaxChunks, kName,
                   std::to_string(sources) + " sources x " + std::to_string(experts) + " experts: at most " +
                       std::to_string(kMoeChunkSortMaxChunks) + " chunks");
  require_argument(rows >= 0 && rows <= INT32_MAX, kName, "rows must lie in [0, 2^31)");
  require_argument(cols > 0 && cols % kBf16PerVector == 0, kName,
                   "cols (" + std::to_string(cols) + ") must be a positive multiple of 8");
  require_argument(is_aligned(out, 16) && is_aligned(in, 16), kName, "out and in must be 16-byte aligned");
  if (rows == 0) return;
  const std::int64_t warps = kThreads / kWarpSize;
  const int blocks = static_cast<int>(std::min<std::int64_t>((rows + warps - 1) / warps, kMaxBlocks));
  sort_chunks_kernel<<<blocks, kThreads, 0, stream>>>(reinterpret_cast<__nv_bfloat16*>(out),
                                                      reinterpret_cast<const __nv_bfloat16*>(in), counts, sources,
                                                      experts, rows, cols, in_order == MoeChunkOrder::kSourceMajor);
  SEXTANT_CHECK_LAUNCH(kName);
}

}  // namespace sextant::kernels
