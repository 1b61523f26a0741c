// Hopper (sm_90a) primitives the flash attention backward needs beyond
// kernels/wgmma.cuh: a 1-D bulk copy (global to shared memory, counted on an
// mbarrier like a TMA tensor copy) and named barriers among a subset of the
// block's warps. Inline PTX, PTX ISA 8.x: "cp.async.bulk" and "bar.sync".
// Included by .cu files only; call from code inside
// `#if defined(__CUDA_ARCH_FEAT_SM90_ALL)`, as kernels/wgmma.cuh says.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/wgmma.cuh"

namespace sextant::kernels::detail::sm90 {

/// Copies `bytes` (a multiple of 16) from global `source` to shared
/// `destination`, both 16-byte aligned, by the bulk-copy unit; the bytes are
/// counted on `barrier` as a TMA tensor copy's are (mbarrier_arrive_expect_tx).
__device__ __forceinline__ void bulk_load(void* destination, const void* source,
                                          std::uint32_t bytes, std::uint64_t* barrier) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::
          "r"(shared_u32(destination)),
      "l"(source), "r"(bytes), "r"(shared_u32(barrier))
      : "memory");
}

/// bar.sync on hardware barrier `id` (1..15; __syncthreads uses 0) for
/// `threads` threads (a multiple of 32), so two warpgroups can meet without
/// stopping the block's other warps. Orders shared-memory accesses among the
/// participants as __syncthreads does.
__device__ __forceinline__ void named_barrier_sync(std::uint32_t id, std::uint32_t threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

}  // namespace sextant::kernels::detail::sm90
