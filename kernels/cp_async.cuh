// Asynchronous global-to-shared copies (cp.async, PTX ISA 8.x, "Data
// Movement and Conversion Instructions: cp.async"), sm_80 on: a thread issues
// copies, commits them as a group, and waits for its groups later, so loads
// stay in flight while it computes. Used by the flash attention, norm backward
// and cross-entropy kernels. Included by .cu files only.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace sextant::kernels::detail {

__device__ __forceinline__ std::uint32_t shared_address(const void* pointer) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(pointer));
}

/// Asynchronous 16-byte global-to-shared copy, bypassing L1; when !valid the
/// 16 bytes are zero-filled and `src` is not read (src-size 0).
__device__ __forceinline__ void cp_async_16(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(shared_address(dst)),
               "l"(src), "r"(valid ? 16 : 0));
}

/// As cp_async_16 for one 4-byte word.
__device__ __forceinline__ void cp_async_4(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(shared_address(dst)),
               "l"(src), "r"(valid ? 4 : 0));
}

__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}

/// Waits until at most `kPending` of this thread's committed groups are in flight.
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

}  // namespace sextant::kernels::detail
