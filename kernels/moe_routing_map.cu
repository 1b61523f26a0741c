// The routing map as a counting sort of the tokens x topk (token, choice) pairs
// by expert, each pair named by its slot s = token * topk + choice, the slots cut
// into chunks of chunk_pairs consecutive ones (a block each):
// 1. chunk_counts: each chunk's pairs per expert (a shared-memory histogram);
// 2. expert_starts (one block): per expert, an exclusive scan of its counts over
//    the chunks (the pairs of that expert in earlier chunks), then scans over the
//    experts of the totals into each expert's start in the dropless order, in the
//    kept order and in the output rows;
// 3. chunk_ranks: each pair's rank within its expert, the pairs before it in slot
//    order: the earlier chunks' (step 2), the chunk's earlier warps' (a
//    shared-memory scan of per-warp counts), then each warp walks its pairs 32 at
//    a time in slot order, __match_any_sync grouping the lanes of one expert and a
//    running count per expert in shared memory. This is the stable sort by expert
//    (by token within an expert) that a radix sort would give.
//    Dropless and kPosition: the rank is the row within the expert's block, kept
//    while below the capacity.
//    kProbs: the rank places the slot in the expert-sorted order; then CUB sorts
//    the slots again by (expert, weight descending) for the priority rank, keeps
//    those below the capacity, and numbers the kept ones in token order (an
//    exclusive scan of the keep flags in the expert-sorted order).
// Three kernels for the dropless map (they were seven with CUB's radix sort and
// global atomics on the E counts: ~40 us for 16k pairs on an H100,
// reports/measurements/2026-11-28-h100-moe-step-kernels/).
#include "kernels/moe_routing_map.h"

#include <cub/block/block_scan.cuh>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <string>

#include "kernels/cuda_check.h"
#include "kernels/device_common.cuh"
#include "kernels/moe_router.h"  // kMoeMaxExperts

namespace sextant::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / detail::kWarpSize;
constexpr int kScanThreads = kMoeMaxExperts;  // one thread per expert
constexpr std::size_t kAlign = 256;
// Pairs per chunk: 1024 (4 rounds of 32 per warp), more when there would be more
// than kMaxChunks chunks, so expert_starts' loop over the chunks stays short.
constexpr std::int64_t kMinChunkPairs = 1024;
constexpr std::int64_t kMaxChunks = 128;
static_assert(kMinChunkPairs % kThreads == 0);

std::size_t round_up(std::size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

int expert_bits(int experts) { return std::max(1, static_cast<int>(std::bit_width(static_cast<unsigned>(experts - 1)))); }

unsigned blocks(std::int64_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

// A multiple of kMinChunkPairs (so of kThreads: each warp's share is whole rounds of 32).
std::int64_t chunk_pairs_for(std::int64_t pairs) {
  const std::int64_t per_chunk = (pairs + kMaxChunks - 1) / kMaxChunks;
  return std::max<std::int64_t>(1, (per_chunk + kMinChunkPairs - 1) / kMinChunkPairs) * kMinChunkPairs;
}

std::int64_t chunks_for(std::int64_t pairs) {
  const std::int64_t chunk_pairs = chunk_pairs_for(pairs);
  return (pairs + chunk_pairs - 1) / chunk_pairs;
}

// chunk_counts: (chunks, experts) the pairs of each chunk per expert.
__global__ void __launch_bounds__(kThreads)
    chunk_counts_kernel(std::int32_t* chunk_counts, const std::int32_t* topk_ids, std::int64_t pairs,
                        std::int64_t chunk_pairs, int experts) {
  __shared__ std::int32_t counts[kMoeMaxExperts];
  for (int e = threadIdx.x; e < experts; e += kThreads) counts[e] = 0;
  __syncthreads();
  const std::int64_t begin = blockIdx.x * chunk_pairs, end = min(begin + chunk_pairs, pairs);
  for (std::int64_t s = begin + threadIdx.x; s < end; s += kThreads)
    atomicAdd(&counts[topk_ids[s]], 1);  // integers: exact in any order
  __syncthreads();
  std::int32_t* out = chunk_counts + static_cast<std::int64_t>(blockIdx.x) * experts;
  for (int e = threadIdx.x; e < experts; e += kThreads) out[e] = counts[e];
}

struct ExpertStarts {
  std::int32_t* dropless;  // (experts) start of the expert's pairs in the sorted order
  std::int32_t* kept;      // (experts) start of its kept pairs among all kept pairs
  std::int32_t* rows;      // (experts) first row of its block in the permuted activations
};

// chunk_counts in, and out in place: each chunk's pairs of each expert in the
// chunks before it (thread e scans column e, the loads batched so they overlap).
__global__ void __launch_bounds__(kScanThreads)
    expert_starts_kernel(ExpertStarts starts, std::int32_t* kept_tokens_per_expert,
                         std::int32_t* expert_rows, std::int32_t* chunk_counts, int chunks, int experts,
                         int capacity, bool pad, int rows_multiple) {
  using BlockScan = cub::BlockScan<std::int32_t, kScanThreads>;
  __shared__ typename BlockScan::TempStorage scan_space;
  constexpr int kBatch = 16;  // a batch's loads overlap; kMaxChunks (128) is 8 batches
  const int e = threadIdx.x;
  std::int32_t count = 0;
  if (e < experts) {
    for (int c0 = 0; c0 < chunks; c0 += kBatch) {
      std::int32_t batch[kBatch];
#pragma unroll
      for (int u = 0; u < kBatch; ++u)
        batch[u] = c0 + u < chunks ? chunk_counts[static_cast<std::int64_t>(c0 + u) * experts + e] : 0;
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        if (c0 + u < chunks) chunk_counts[static_cast<std::int64_t>(c0 + u) * experts + e] = count;
        count += batch[u];
      }
    }
  }
  const std::int32_t kept = capacity > 0 ? min(count, capacity) : count;
  const std::int32_t rows =
      e < experts ? (pad ? capacity : (kept + rows_multiple - 1) / rows_multiple * rows_multiple) : 0;
  std::int32_t start = 0;
  BlockScan(scan_space).ExclusiveSum(count, start);
  if (e < experts) starts.dropless[e] = start;
  __syncthreads();
  BlockScan(scan_space).ExclusiveSum(kept, start);
  if (e < experts) starts.kept[e] = start;
  __syncthreads();
  BlockScan(scan_space).ExclusiveSum(rows, start);
  if (e < experts) {
    starts.rows[e] = start;
    kept_tokens_per_expert[e] = kept;
    expert_rows[e] = rows;
  }
}

// Where chunk_ranks puts each pair's rank r (its place among its expert's pairs).
struct RankOutput {
  // Dropless and kPosition: token_rows[s] = rows[e] + r, or -1 when r >= capacity (> 0).
  std::int32_t* token_rows;
  int capacity;
  // kProbs (token_rows null): the expert-sorted order, p = dropless[e] + r:
  // sorted_experts[p] = e, sorted_slots[p] = s.
  std::uint32_t* sorted_experts;
  std::int32_t* sorted_slots;
};

__global__ void __launch_bounds__(kThreads)
    chunk_ranks_kernel(RankOutput out, const std::int32_t* topk_ids, const std::int32_t* chunk_before,
                       ExpertStarts starts, std::int64_t pairs, std::int64_t chunk_pairs, int experts) {
  // before[w][e]: expert e's pairs ahead of warp w's next round: first warp w's
  // own count, then (after the scan) those of the earlier chunks and warps, then
  // advanced by the warp round by round.
  __shared__ std::int32_t before[kWarps][kMoeMaxExperts];
  __shared__ std::int32_t start[kMoeMaxExperts];  // rows[e] or dropless[e]
  const int warp = threadIdx.x / detail::kWarpSize, lane = threadIdx.x % detail::kWarpSize;
  for (int i = threadIdx.x; i < kWarps * experts; i += kThreads) before[i / experts][i % experts] = 0;
  __syncthreads();
  const std::int64_t chunk_begin = blockIdx.x * chunk_pairs;
  const std::int64_t warp_pairs = chunk_pairs / kWarps;  // a multiple of 32
  const std::int64_t begin = chunk_begin + warp * warp_pairs, end = min(begin + warp_pairs, pairs);
  for (std::int64_t s = begin + lane; s < end; s += detail::kWarpSize)
    atomicAdd(&before[warp][topk_ids[s]], 1);
  __syncthreads();
  const std::int32_t* chunk = chunk_before + static_cast<std::int64_t>(blockIdx.x) * experts;
  for (int e = threadIdx.x; e < experts; e += kThreads) {
    std::int32_t running = chunk[e];
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      const std::int32_t count = before[w][e];
      before[w][e] = running;
      running += count;
    }
    start[e] = out.token_rows != nullptr ? starts.rows[e] : starts.dropless[e];
  }
  __syncthreads();
  // Rounds of 32 consecutive slots in order; `begin` and `end` are the same on
  // every lane, so the whole warp takes each round and __match_any_sync sees it all.
  const unsigned lanes_below = (1u << lane) - 1u;
  for (std::int64_t round = begin; round < end; round += detail::kWarpSize) {
    const std::int64_t s = round + lane;
    const bool valid = s < end;
    const int e = valid ? topk_ids[s] : -1;
    const unsigned peers = __match_any_sync(0xffffffffu, e);
    const int below = __popc(peers & lanes_below);
    const std::int32_t ahead = valid ? before[warp][e] : 0;
    __syncwarp();  // every lane has read its expert's count before the first of its peers adds to it
    if (valid && below == 0) before[warp][e] = ahead + __popc(peers);
    __syncwarp();
    if (!valid) continue;
    const std::int32_t rank = ahead + below;
    if (out.token_rows != nullptr) {
      out.token_rows[s] = out.capacity == 0 || rank < out.capacity ? start[e] + rank : -1;
    } else {
      const std::int32_t p = start[e] + rank;
      out.sorted_experts[p] = static_cast<std::uint32_t>(e);
      out.sorted_slots[p] = static_cast<std::int32_t>(s);
    }
  }
}

// (expert, weight descending): weights >= 0 order as their bits do; NaN and
// non-positive weights (which the routers never give) rank last.
// Also writes the slots 0, 1, 2, ... the priority sort carries along.
__global__ void priority_keys_kernel(std::uint64_t* keys, std::int32_t* slots, const std::int32_t* topk_ids,
                                     const float* topk_weights, std::int64_t pairs) {
  const std::int64_t s = static_cast<std::int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (s >= pairs) return;
  slots[s] = static_cast<std::int32_t>(s);
  const float w = topk_weights[s];
  const std::uint32_t bits = w > 0.0f ? __float_as_uint(w) : 0u;
  keys[s] = (static_cast<std::uint64_t>(topk_ids[s]) << 32) | (0xffffffffu - bits);
}

__global__ void keep_by_priority_kernel(std::int32_t* keep, const std::uint64_t* sorted_keys,
                                        const std::int32_t* sorted_slots, ExpertStarts starts,
                                        std::int64_t pairs, int capacity) {
  const std::int64_t p = static_cast<std::int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (p >= pairs) return;
  const auto e = static_cast<std::uint32_t>(sorted_keys[p] >> 32);
  keep[sorted_slots[p]] = static_cast<std::int32_t>(p) - starts.dropless[e] < capacity ? 1 : 0;
}

__global__ void gather_keep_kernel(std::int32_t* flags, const std::int32_t* keep,
                                   const std::int32_t* sorted_slots, std::int64_t pairs) {
  const std::int64_t p = static_cast<std::int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (p < pairs) flags[p] = keep[sorted_slots[p]];
}

// kProbs: kept pairs numbered in token order within their expert.
__global__ void rows_by_priority_kernel(std::int32_t* token_rows, const std::uint32_t* sorted_experts,
                                        const std::int32_t* sorted_slots, const std::int32_t* flags,
                                        const std::int32_t* kept_before, ExpertStarts starts,
                                        std::int64_t pairs) {
  const std::int64_t p = static_cast<std::int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (p >= pairs) return;
  const std::uint32_t e = sorted_experts[p];
  token_rows[sorted_slots[p]] = flags[p] != 0 ? starts.rows[e] + kept_before[p] - starts.kept[e] : -1;
}

// The workspace, carved in this order, each array 256-byte aligned.
struct Workspace {
  std::int32_t* chunk_counts;  // (chunks, experts), then the pairs before each chunk
  ExpertStarts starts;
  std::uint32_t* sorted_experts;  // (pairs), kProbs only from here on
  std::int32_t* sorted_slots;     // (pairs)
  std::int32_t* slots;            // (pairs) 0, 1, 2, ...
  std::uint64_t* priority_keys;   // (pairs)
  std::uint64_t* sorted_priority_keys;
  std::int32_t* priority_sorted_slots;
  std::int32_t* keep;         // (pairs) by slot
  std::int32_t* flags;        // (pairs) keep in the sorted order
  std::int32_t* kept_before;  // (pairs) exclusive scan of flags
  void* cub_space;
  std::size_t cub_bytes;
};

std::size_t cub_bytes(std::int64_t pairs, int experts) {
  const int n = static_cast<int>(pairs);
  std::size_t by_priority = 0, scan = 0;
  SEXTANT_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(
      nullptr, by_priority, static_cast<const std::uint64_t*>(nullptr), static_cast<std::uint64_t*>(nullptr),
      static_cast<const std::int32_t*>(nullptr), static_cast<std::int32_t*>(nullptr), n, 0,
      32 + expert_bits(experts)));
  SEXTANT_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, scan, static_cast<const std::int32_t*>(nullptr),
                                                   static_cast<std::int32_t*>(nullptr), n));
  return std::max(by_priority, scan);
}

// Carves `base` (nullptr: only sizes it); returns the bytes used.
std::size_t carve(char* base, std::int64_t pairs, int experts, Workspace& w) {
  std::size_t at = 0;
  auto take = [&](std::size_t bytes) {
    char* p = base == nullptr ? nullptr : base + at;
    at += round_up(bytes);
    return p;
  };
  const std::size_t expert_ints = sizeof(std::int32_t) * experts;
  const std::size_t pair_ints = sizeof(std::int32_t) * pairs, pair_keys = sizeof(std::uint64_t) * pairs;
  w.chunk_counts = reinterpret_cast<std::int32_t*>(take(expert_ints * chunks_for(pairs)));
  w.starts.dropless = reinterpret_cast<std::int32_t*>(take(expert_ints));
  w.starts.kept = reinterpret_cast<std::int32_t*>(take(expert_ints));
  w.starts.rows = reinterpret_cast<std::int32_t*>(take(expert_ints));
  w.sorted_experts = reinterpret_cast<std::uint32_t*>(take(pair_ints));
  w.sorted_slots = reinterpret_cast<std::int32_t*>(take(pair_ints));
  w.slots = reinterpret_cast<std::int32_t*>(take(pair_ints));
  w.priority_keys = reinterpret_cast<std::uint64_t*>(take(pair_keys));
  w.sorted_priority_keys = reinterpret_cast<std::uint64_t*>(take(pair_keys));
  w.priority_sorted_slots = reinterpret_cast<std::int32_t*>(take(pair_ints));
  w.keep = reinterpret_cast<std::int32_t*>(take(pair_ints));
  w.flags = reinterpret_cast<std::int32_t*>(take(pair_ints));
  w.kept_before = reinterpret_cast<std::int32_t*>(take(pair_ints));
  w.cub_bytes = pairs > 0 ? cub_bytes(pairs, experts) : 0;
  w.cub_space = take(w.cub_bytes);
  return at;
}

void check_shape(const char* launcher, int tokens, int topk, int experts) {
  require_argument(tokens >= 0, launcher, "tokens (" + std::to_string(tokens) + ") must be >= 0");
  require_argument(experts >= 1 && experts <= kMoeMaxExperts, launcher,
                   "experts (" + std::to_string(experts) + ") must be in [1, " +
                       std::to_string(kMoeMaxExperts) + "]");
  require_argument(topk >= 1 && topk <= experts, launcher,
                   "topk (" + std::to_string(topk) + ") must be in [1, experts (" +
                       std::to_string(experts) + ")]");
  require_argument(static_cast<std::int64_t>(tokens) * topk <= std::numeric_limits<std::int32_t>::max(),
                   launcher, "tokens x topk must fit in int32");
}

}  // namespace

int moe_expert_capacity(int tokens, int topk, int experts, double capacity_factor, int min_capacity) {
  constexpr const char* kName = "moe_expert_capacity";
  check_shape(kName, tokens, topk, experts);
  require_argument(capacity_factor > 0.0 && std::isfinite(capacity_factor), kName,
                   "capacity_factor (" + std::to_string(capacity_factor) + ") must be positive");
  // Megatron-Core get_capacity(num_tokens = tokens * topk, ...), in its order of operations.
  const double capacity = std::ceil(static_cast<double>(tokens) * topk / experts * capacity_factor);
  require_argument(capacity <= std::numeric_limits<std::int32_t>::max(), kName, "the capacity must fit in int32");
  return std::max(static_cast<int>(capacity), min_capacity);
}

std::int64_t moe_permuted_rows_bound(int tokens, int topk, int experts, const MoeRoutingOptions& options) {
  return options.pad_to_capacity
             ? static_cast<std::int64_t>(experts) * options.capacity
             : static_cast<std::int64_t>(tokens) * topk +
                   static_cast<std::int64_t>(experts) * (std::max(options.rows_multiple, 1) - 1);
}

std::size_t moe_routing_map_workspace_bytes(int tokens, int topk, int experts) {
  check_shape("moe_routing_map_workspace_bytes", tokens, topk, experts);
  Workspace w{};
  return carve(nullptr, static_cast<std::int64_t>(tokens) * topk, experts, w);
}

void moe_routing_map(std::int32_t* token_rows, std::int32_t* kept_tokens_per_expert,
                     std::int32_t* expert_rows, const std::int32_t* topk_ids,
                     const float* topk_weights, int tokens, int topk, int experts,
                     const MoeRoutingOptions& options, void* workspace, std::size_t workspace_bytes,
                     cudaStream_t stream) {
  constexpr const char* kName = "moe_routing_map";
  check_shape(kName, tokens, topk, experts);
  require_argument(options.capacity >= 0, kName,
                   "capacity (" + std::to_string(options.capacity) + ") must be >= 0 (0: dropless)");
  require_argument(!options.pad_to_capacity || options.capacity > 0, kName,
                   "pad_to_capacity needs a capacity");
  require_argument(options.rows_multiple >= 1, kName,
                   "rows_multiple (" + std::to_string(options.rows_multiple) + ") must be >= 1");
  require_argument(moe_permuted_rows_bound(tokens, topk, experts, options) <=
                       std::numeric_limits<std::int32_t>::max(),
                   kName, "the permuted rows must fit in int32");
  const bool by_priority = options.capacity > 0 && options.drop_policy == MoeDropPolicy::kProbs;
  require_argument(kept_tokens_per_expert != nullptr && expert_rows != nullptr, kName,
                   "kept_tokens_per_expert and expert_rows must not be null");
  require_argument(tokens == 0 || (token_rows != nullptr && topk_ids != nullptr), kName,
                   "token_rows and topk_ids must not be null");
  require_argument(tokens == 0 || !by_priority || topk_weights != nullptr, kName,
                   "the kProbs drop policy needs topk_weights");
  require_argument(is_aligned(workspace, kAlign), kName, "workspace must be 256-byte aligned");
  const std::int64_t pairs = static_cast<std::int64_t>(tokens) * topk;
  Workspace w{};
  const std::size_t needed = carve(static_cast<char*>(workspace), pairs, experts, w);
  require_argument(workspace_bytes >= needed, kName,
                   "workspace (" + std::to_string(workspace_bytes) + " bytes) is smaller than the " +
                       std::to_string(needed) + " bytes moe_routing_map_workspace_bytes asks for");

  const std::int64_t chunk_pairs = chunk_pairs_for(pairs);
  const auto chunks = static_cast<int>(chunks_for(pairs));
  if (pairs > 0) {
    chunk_counts_kernel<<<chunks, kThreads, 0, stream>>>(w.chunk_counts, topk_ids, pairs, chunk_pairs, experts);
    SEXTANT_CHECK_LAUNCH("chunk_counts_kernel");
  }
  expert_starts_kernel<<<1, kScanThreads, 0, stream>>>(w.starts, kept_tokens_per_expert, expert_rows,
                                                       w.chunk_counts, chunks, experts, options.capacity,
                                                       options.pad_to_capacity, options.rows_multiple);
  SEXTANT_CHECK_LAUNCH("expert_starts_kernel");
  if (pairs == 0) return;

  RankOutput ranks{};
  if (by_priority) {
    ranks.sorted_experts = w.sorted_experts;
    ranks.sorted_slots = w.sorted_slots;
  } else {
    ranks.token_rows = token_rows;
    ranks.capacity = options.capacity;
  }
  chunk_ranks_kernel<<<chunks, kThreads, 0, stream>>>(ranks, topk_ids, w.chunk_counts, w.starts, pairs,
                                                      chunk_pairs, experts);
  SEXTANT_CHECK_LAUNCH("chunk_ranks_kernel");
  if (!by_priority) return;

  const int n = static_cast<int>(pairs);
  priority_keys_kernel<<<blocks(pairs), kThreads, 0, stream>>>(w.priority_keys, w.slots, topk_ids, topk_weights,
                                                               pairs);
  SEXTANT_CHECK_LAUNCH("priority_keys_kernel");
  std::size_t cub_bytes = w.cub_bytes;
  SEXTANT_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(w.cub_space, cub_bytes, w.priority_keys,
                                                     w.sorted_priority_keys, w.slots,
                                                     w.priority_sorted_slots, n, 0,
                                                     32 + expert_bits(experts), stream));
  keep_by_priority_kernel<<<blocks(pairs), kThreads, 0, stream>>>(w.keep, w.sorted_priority_keys,
                                                                  w.priority_sorted_slots, w.starts,
                                                                  pairs, options.capacity);
  SEXTANT_CHECK_LAUNCH("keep_by_priority_kernel");
  gather_keep_kernel<<<blocks(pairs), kThreads, 0, stream>>>(w.flags, w.keep, w.sorted_slots, pairs);
  SEXTANT_CHECK_LAUNCH("gather_keep_kernel");
  cub_bytes = w.cub_bytes;
  SEXTANT_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(w.cub_space, cub_bytes, w.flags, w.kept_before, n, stream));
  rows_by_priority_kernel<<<blocks(pairs), kThreads, 0, stream>>>(token_rows, w.sorted_experts,
                                                                  w.sorted_slots, w.flags, w.kept_before,
                                                                  w.starts, pairs);
  SEXTANT_CHECK_LAUNCH("rows_by_priority_kernel");
}

}  // namespace sextant::kernels
