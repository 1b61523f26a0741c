// The warp-level tensor-core instructions the flash attention kernels are
// written in, as inline PTX (PTX ISA 8.x, "Warp-level matrix instructions"):
// mma.sync m16n8k16 bf16 with fp32 accumulators, ldmatrix (plain and .trans)
// and cp.async (kernels/cp_async.cuh). All exist from sm_80 on. Included by .cu files only.
//
// Fragment layouts of mma.m16n8k16 (PTX ISA, "Matrix fragments for
// mma.m16n8k16"); lane l, g = l / 4, t = l % 4, each register two adjacent
// bf16 with the lower column (or k) index in the low half:
//   A (16x16, row-major): a0 (g, 2t..2t+1)  a1 (g+8, 2t..)  a2 (g, 2t+8..)  a3 (g+8, 2t+8..)
//   B (16x8, k-major):    b0 (k 2t..2t+1, n g)  b1 (k 2t+8..2t+9, n g)
//   C (16x8, fp32):       c0, c1 (g, 2t..2t+1)  c2, c3 (g+8, 2t..2t+1)
// So the C fragments of two adjacent n-tiles are, once rounded to bf16, the A
// fragment of one 16-wide k-step: (c0 c1 | c2 c3) of tile 2j give a0 | a1 and
// of tile 2j+1 give a2 | a3 (FlashAttention-2, Dao 2023, section 3.3: P stays
// in registers between the two products).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cp_async.cuh"

namespace sextant::kernels::detail::flash {

/// c += a * b, one m16n8k16 tile, bf16 inputs, fp32 accumulation.
__device__ __forceinline__ void mma_bf16(float (&c)[4], const std::uint32_t (&a)[4],
                                         std::uint32_t b0, std::uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}


/// Four 8x8 b16 matrices; lanes 8i..8i+7 give the row addresses of matrix i,
/// and lane l receives row l/4, columns 2(l%4) and 2(l%4)+1 of each.
__device__ __forceinline__ void ldmatrix_x4(std::uint32_t (&r)[4], const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(row)));
}

/// As ldmatrix_x4, each matrix transposed: lane l receives rows 2(l%4) and
/// 2(l%4)+1 of column l/4 — the B fragment of a matrix stored k-rows-first.
__device__ __forceinline__ void ldmatrix_x4_trans(std::uint32_t (&r)[4], const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(row)));
}

/// Two floats rounded to bf16 (nearest even), `lo` in the low half.
__device__ __forceinline__ std::uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 pair = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const std::uint32_t*>(&pair);
}

/// 2^x by the special function unit (ex2.approx, relative error about 2^-22;
/// subnormal results flush to 0, exp2(-inf) = 0), without the range scaling
/// exp2f adds for subnormals: a softmax term below 2^-126 is negligible beside
/// the row's largest, which is exp2(0) = 1.
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

using detail::cp_async_16;
using detail::cp_async_4;
using detail::cp_async_commit;
using detail::cp_async_wait;
using detail::shared_address;

}  // namespace sextant::kernels::detail::flash
