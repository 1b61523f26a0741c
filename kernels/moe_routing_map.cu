// The routing map in a few passes over the tokens x topk (token, choice) pairs,
// each pair named by its slot s = token * topk + choice:
// 1. count the pairs per expert; one block scans the counts into each expert's
//    start in the dropless order, in the kept order and in the output rows;
// 2. sort the slots by expert (CUB's radix sort is stable, so by token within an
//    expert): a pair's rank within its expert is its sorted position minus the
//    expert's start;
// 3. dropless and kPosition: the rank is the row within the expert's block, kept
//    while below the capacity;
//    kProbs: sort the slots again by (expert, weight descending) for the priority
//    rank, keep those below the capacity, and number the kept ones in token order
//    (an exclusive scan of the keep flags in the order of step 2).
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
#include "kernels/moe_router.h"  // kMoeMaxExperts

namespace sextant::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kScanThreads = kMoeMaxExperts;  // one thread per expert
constexpr std::size_t kAlign = 256;

std::size_t round_up(std::size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

int expert_bits(int experts) { return std::max(1, static_cast<int>(std::bit_width(static_cast<unsigned>(experts - 1)))); }

unsigned blocks(std::int64_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

__global__ void count_pairs_kernel(std::int32_t* counts, const std::int32_t* topk_ids, std::int64_t pairs) {
  const std::int64_t s = static_cast<std::int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (s < pairs) atomicAdd(&counts[topk_ids[s]], 1);  // integers: exact in any order
}

struct ExpertStarts {
  std::int32_t* dropless;  // (experts) start of the expert's pairs in the sorted order
  std::int32_t* kept;      // (experts) start of its kept pairs among all kept pairs
  std::int32_t* rows;      // (experts) first row of its block in the permuted activations
};

__global__ void __launch_bounds__(kScanThreads)
    expert_starts_kernel(ExpertStarts starts, std::int32_t* kept_tokens_per_expert,
                         std::int32_t* expert_rows, const std::int32_t* counts, int experts,
                         int capacity, bool pad, int rows_multiple) {
  using BlockScan = cub::BlockScan<std::int32_t, kScanThreads>;
  __shared__ typename BlockScan::TempStorage scan_space;
  const int e = threadIdx.x;
  const std::int32_t count = e < experts ? counts[e] : 0;
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

__global__ void iota_kernel(std::int32_t* out, std::int64_t n) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (i < n) out[i] = static_cast<std::int32_t>(i);
}

// Dropless or kPosition: the rank within the expert is the row, kept below the capacity.
__global__ void rows_by_position_kernel(std::int32_t* token_rows, const std::uint32_t* sorted_experts,
                                        const std::int32_t* sorted_slots, ExpertStarts starts,
                                        std::int64_t pairs, int capacity) {
  const std::int64_t p = static_cast<std::int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (p >= pairs) return;
  const std::uint32_t e = sorted_experts[p];
  const std::int32_t rank = static_cast<std::int32_t>(p) - starts.dropless[e];
  token_rows[sorted_slots[p]] = capacity == 0 || rank < capacity ? starts.rows[e] + rank : -1;
}

// (expert, weight descending): weights >= 0 order as their bits do; NaN and
// non-positive weights (which the routers never give) rank last.
__global__ void priority_keys_kernel(std::uint64_t* keys, const std::int32_t* topk_ids,
                                     const float* topk_weights, std::int64_t pairs) {
  const std::int64_t s = static_cast<std::int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (s >= pairs) return;
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
  std::int32_t* counts;
  ExpertStarts starts;
  std::int32_t* slots;            // (pairs) 0, 1, 2, ...
  std::uint32_t* sorted_experts;  // (pairs)
  std::int32_t* sorted_slots;     // (pairs)
  std::uint64_t* priority_keys;   // (pairs), kProbs only from here on
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
  std::size_t by_expert = 0, by_priority = 0, scan = 0;
  SEXTANT_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(
      nullptr, by_expert, static_cast<const std::uint32_t*>(nullptr), static_cast<std::uint32_t*>(nullptr),
      static_cast<const std::int32_t*>(nullptr), static_cast<std::int32_t*>(nullptr), n, 0,
      expert_bits(experts)));
  SEXTANT_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(
      nullptr, by_priority, static_cast<const std::uint64_t*>(nullptr), static_cast<std::uint64_t*>(nullptr),
      static_cast<const std::int32_t*>(nullptr), static_cast<std::int32_t*>(nullptr), n, 0,
      32 + expert_bits(experts)));
  SEXTANT_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, scan, static_cast<const std::int32_t*>(nullptr),
                                                   static_cast<std::int32_t*>(nullptr), n));
  return std::max({by_expert, by_priority, scan});
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
  w.counts = reinterpret_cast<std::int32_t*>(take(expert_ints));
  w.starts.dropless = reinterpret_cast<std::int32_t*>(take(expert_ints));
  w.starts.kept = reinterpret_cast<std::int32_t*>(take(expert_ints));
  w.starts.rows = reinterpret_cast<std::int32_t*>(take(expert_ints));
  w.slots = reinterpret_cast<std::int32_t*>(take(pair_ints));
  w.sorted_experts = reinterpret_cast<std::uint32_t*>(take(pair_ints));
  w.sorted_slots = reinterpret_cast<std::int32_t*>(take(pair_ints));
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

  SEXTANT_CUDA_CHECK(cudaMemsetAsync(w.counts, 0, sizeof(std::int32_t) * experts, stream));
  if (pairs > 0) {
    count_pairs_kernel<<<blocks(pairs), kThreads, 0, stream>>>(w.counts, topk_ids, pairs);
    SEXTANT_CHECK_LAUNCH("count_pairs_kernel");
  }
  expert_starts_kernel<<<1, kScanThreads, 0, stream>>>(w.starts, kept_tokens_per_expert, expert_rows,
                                                       w.counts, experts, options.capacity,
                                                       options.pad_to_capacity, options.rows_multiple);
  SEXTANT_CHECK_LAUNCH("expert_starts_kernel");
  if (pairs == 0) return;

  const int n = static_cast<int>(pairs);
  iota_kernel<<<blocks(pairs), kThreads, 0, stream>>>(w.slots, pairs);
  SEXTANT_CHECK_LAUNCH("iota_kernel");
  std::size_t cub_bytes = w.cub_bytes;
  // Expert ids are non-negative, so their bits sort as uint32.
  SEXTANT_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(
      w.cub_space, cub_bytes, reinterpret_cast<const std::uint32_t*>(topk_ids), w.sorted_experts, w.slots,
      w.sorted_slots, n, 0, expert_bits(experts), stream));
  if (!by_priority) {
    rows_by_position_kernel<<<blocks(pairs), kThreads, 0, stream>>>(token_rows, w.sorted_experts,
                                                                    w.sorted_slots, w.starts, pairs,
                                                                    options.capacity);
    SEXTANT_CHECK_LAUNCH("rows_by_position_kernel");
    return;
  }
  priority_keys_kernel<<<blocks(pairs), kThreads, 0, stream>>>(w.priority_keys, topk_ids, topk_weights, pairs);
  SEXTANT_CHECK_LAUNCH("priority_keys_kernel");
  cub_bytes = w.cub_bytes;
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
