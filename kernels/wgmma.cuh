// Hopper (sm_90a) device primitives: warpgroup matrix multiply-accumulate
// (wgmma) with its shared-memory matrix descriptors and 128-byte swizzle, the
// mbarrier and tensor-memory-accelerator (TMA) copies that feed it, and
// setmaxnreg. Inline PTX, PTX ISA 8.x:
//   "Asynchronous Warpgroup Level Matrix Multiply-Accumulate" (wgmma.*),
//   "Matrix Descriptor Format" and "Shared Memory Matrix Layout" (the
//   descriptor and swizzle modes), "Parallel Synchronization and
//   Communication Instructions: mbarrier", "cp.async.bulk.tensor", "setmaxnreg".
// Included by .cu files only. Everything here exists only on sm_90a: call it
// from code inside `#if defined(__CUDA_ARCH_FEAT_SM90_ALL)` (nvcc defines the
// macro when compiling for sm_90a, not for sm_80 or the compute_90 PTX), and
// launch such kernels only on compute capability 9.0 devices.
//
// Warpgroup: 4 consecutive warps (threads 128w .. 128w + 127) that issue a
// wgmma together. The product is m64nNk16: D (64, N) fp32 += A (64, 16) B (16, N).
//
// Accumulator fragment of m64nN (fp32), thread `tid` of the warpgroup, warp
// w = tid / 32, lane l, g = l / 4, t = l % 4 (PTX ISA, "wgmma .m64nNk16
// register fragment layout for accumulator matrix D"): N / 2 registers,
//   d[4i + 0], d[4i + 1]  row 16w + g,     columns 8i + 2t, 8i + 2t + 1
//   d[4i + 2], d[4i + 3]  row 16w + g + 8, columns 8i + 2t, 8i + 2t + 1
// for i in [0, N/8): each warp owns 16 rows, laid out as mma.m16n8's C fragment
// repeated along N.
// A fragment from registers (bf16, 64 x 16): 4 registers of two bf16 each,
// lower k in the low half, as mma.m16n8k16's A fragment within each warp:
//   a[0] (16w + g, 2t..2t+1)  a[1] (16w + g + 8, 2t..)  a[2] (16w + g, 2t+8..)  a[3] (16w + g + 8, 2t+8..)
// So the fp32 accumulators of columns [16k, 16k + 16), rounded to bf16 in
// pairs, a[r] = pack(d[8k + 2r], d[8k + 2r + 1]), are the A fragment of k-step
// k of a following product (FlashAttention-3, Shah et al. 2024, section 3: P
// stays in registers between S = Q K^T and O = P V).
//
// Shared-memory operands, 128-byte swizzle (the layout TMA writes with
// CU_TENSOR_MAP_SWIZZLE_128B): a tile is stored in panels of 64 bf16 columns
// (128 bytes); within a panel row r occupies bytes [128 r, 128 r + 128), and its
// 16-byte chunk c is stored at chunk c ^ (r % 8) (sw128_offset_bytes). Panels
// (and so every 8-row group) start 1024-byte aligned: the hardware applies the
// XOR to address bits [4, 7) from bits [7, 10) of the address itself.
// - K-major operand (A (M, K) or B (N, K) stored with K contiguous, e.g. Q
//   and K of attention, both (rows, head_dim)): one k16 step reads 32 bytes of
//   each row; descriptor start = panel + 32 * (k-step % 4), stride byte offset
//   (between 8-row groups) 1024, leading byte offset unused (set 16).
// - MN-major B (B (K, N) stored with N contiguous, e.g. V (keys, head_dim) in
//   O = P V): transpose bit set; rows are k, one k16 step is 16 rows = 2048
//   bytes further; stride byte offset 1024 (between 8-k-row groups), leading
//   byte offset = the distance between 64-column panels (N > 64 spans panels).
// (The same canonical layouts as CUTLASS's GMMA::Layout_K_SW128_Atom and
// Layout_MN_SW128_Atom, cute/atom/mma_traits_sm90_gmma.hpp.)
//
// Ordering: registers a wgmma reads or writes must not be touched between its
// issue and the wgmma_wait_group that retires it. wgmma_fence() goes before
// the first wgmma that reads registers other instructions wrote;
// wgmma_fence_operand() keeps the compiler from moving accumulator reads or
// writes across the issue or the wait (it cannot see inside the asm).
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace sextant::kernels::detail::sm90 {

/// The 32-bit shared-memory address of a generic pointer into shared memory.
__device__ __forceinline__ std::uint32_t shared_u32(const void* pointer) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(pointer));
}

// ---------------------------------------------------------------------------
// Shared-memory matrix descriptors (PTX ISA, "Matrix Descriptor Format").

/// Descriptor bits 62-63.
enum class Swizzle : std::uint64_t { kNone = 0, k128B = 1, k64B = 2, k32B = 3 };

/// The 64-bit descriptor of a shared-memory wgmma operand starting at `start`:
/// bits 0-13 start address >> 4, 16-29 leading byte offset >> 4, 32-45 stride
/// byte offset >> 4, 49-51 base offset (0: swizzled tiles start 1024-byte
/// aligned), 62-63 swizzle mode.
__device__ __forceinline__ std::uint64_t make_smem_descriptor(const void* start,
                                                              std::uint32_t leading_byte_offset,
                                                              std::uint32_t stride_byte_offset,
                                                              Swizzle swizzle) {
  const std::uint32_t address = shared_u32(start);
  return static_cast<std::uint64_t>((address & 0x3FFFF) >> 4) |
         static_cast<std::uint64_t>((leading_byte_offset & 0x3FFFF) >> 4) << 16 |
         static_cast<std::uint64_t>((stride_byte_offset & 0x3FFFF) >> 4) << 32 |
         static_cast<std::uint64_t>(swizzle) << 62;
}

/// `descriptor` with its start address moved `bytes` (a multiple of 16) on:
/// the address field is the low 14 bits, which do not carry into the rest as
/// long as the operand stays inside shared memory.
__device__ __forceinline__ std::uint64_t advance_descriptor(std::uint64_t descriptor,
                                                            std::uint32_t bytes) {
  return descriptor + (bytes >> 4);
}

/// Byte offset of byte `byte_in_row` of row `row` of a 128-byte-swizzled
/// panel (64 bf16 columns per row): the 16-byte chunk index is XORed with
/// row % 8. The panel must start 1024-byte aligned.
__host__ __device__ __forceinline__ constexpr std::uint32_t sw128_offset_bytes(
    std::uint32_t row, std::uint32_t byte_in_row) {
  return row * 128 + ((((byte_in_row >> 4) ^ row) & 7) << 4) + (byte_in_row & 15);
}

// ---------------------------------------------------------------------------
// wgmma issue, ordering and completion.

/// wgmma.fence: orders this warpgroup's earlier register writes (accumulators,
/// A fragments) before the wgmma that follow.
__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}

/// Closes the group of wgmma issued since the last commit.
__device__ __forceinline__ void wgmma_commit_group() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}

/// Waits until at most `kPending` committed groups of this warpgroup are in flight.
template <int kPending>
__device__ __forceinline__ void wgmma_wait_group() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
}

/// A compiler-only fence on one register (no instruction): reads and writes of
/// it are not moved across this point (cute::warpgroup_fence_operand).
__device__ __forceinline__ void wgmma_fence_operand(float& r) { asm volatile("" : "+f"(r)::"memory"); }
__device__ __forceinline__ void wgmma_fence_operand(std::uint32_t& r) {
  asm volatile("" : "+r"(r)::"memory");
}
template <typename T, int kN>
__device__ __forceinline__ void wgmma_fence_operand(T (&registers)[kN]) {
#pragma unroll
  for (int i = 0; i < kN; ++i) wgmma_fence_operand(registers[i]);
}

// D (64, N) fp32 (+)= A (64, 16) B (16, N), bf16 inputs, for the whole
// warpgroup. `accumulate` false overwrites D (scale-d = 0). _ss: A and B from
// shared memory through descriptors; kTransposeA/B set the operand MN-major
// (0: K-major). _rs: A from registers (the fragment above), B through a
// descriptor. The operand lists are written out: PTX names every register.

template <bool kTransposeA, bool kTransposeB>
__device__ __forceinline__ void wgmma_m64n64k16_ss(float (&d)[32], std::uint64_t a_descriptor,
                                                    std::uint64_t b_descriptor, bool accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
      "}, %32, %33, p, 1, 1, %35, %36;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "l"(a_descriptor), "l"(b_descriptor), "r"(static_cast<int>(accumulate)), "n"(kTransposeA ? 1 : 0), "n"(kTransposeB ? 1 : 0));
}

template <bool kTransposeB>
__device__ __forceinline__ void wgmma_m64n64k16_rs(float (&d)[32], const std::uint32_t (&a)[4],
                                                    std::uint64_t b_descriptor, bool accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
      "}, {%32, %33, %34, %35}, %36, p, 1, 1, %38;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_descriptor), "r"(static_cast<int>(accumulate)), "n"(kTransposeB ? 1 : 0));
}

template <bool kTransposeA, bool kTransposeB>
__device__ __forceinline__ void wgmma_m64n128k16_ss(float (&d)[64], std::uint64_t a_descriptor,
                                                    std::uint64_t b_descriptor, bool accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
      "}, %64, %65, p, 1, 1, %67, %68;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(a_descriptor), "l"(b_descriptor), "r"(static_cast<int>(accumulate)), "n"(kTransposeA ? 1 : 0), "n"(kTransposeB ? 1 : 0));
}

template <bool kTransposeB>
__device__ __forceinline__ void wgmma_m64n128k16_rs(float (&d)[64], const std::uint32_t (&a)[4],
                                                    std::uint64_t b_descriptor, bool accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
      "}, {%64, %65, %66, %67}, %68, p, 1, 1, %70;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_descriptor), "r"(static_cast<int>(accumulate)), "n"(kTransposeB ? 1 : 0));
}

/// wgmma_m64n{64,128}k16_ss by N.
template <int kN, bool kTransposeA, bool kTransposeB>
__device__ __forceinline__ void wgmma_m64k16_ss(float (&d)[kN / 2], std::uint64_t a_descriptor,
                                                std::uint64_t b_descriptor, bool accumulate) {
  static_assert(kN == 64 || kN == 128, "written out for N = 64 and 128");
  if constexpr (kN == 64)
    wgmma_m64n64k16_ss<kTransposeA, kTransposeB>(d, a_descriptor, b_descriptor, accumulate);
  else
    wgmma_m64n128k16_ss<kTransposeA, kTransposeB>(d, a_descriptor, b_descriptor, accumulate);
}

/// wgmma_m64n{64,128}k16_rs by N.
template <int kN, bool kTransposeB>
__device__ __forceinline__ void wgmma_m64k16_rs(float (&d)[kN / 2], const std::uint32_t (&a)[4],
                                                std::uint64_t b_descriptor, bool accumulate) {
  static_assert(kN == 64 || kN == 128, "written out for N = 64 and 128");
  if constexpr (kN == 64)
    wgmma_m64n64k16_rs<kTransposeB>(d, a, b_descriptor, accumulate);
  else
    wgmma_m64n128k16_rs<kTransposeB>(d, a, b_descriptor, accumulate);
}

// ---------------------------------------------------------------------------
// mbarrier (PTX ISA, "mbarrier"): a 64-bit shared-memory barrier that
// completes a phase when its expected arrivals and, for TMA, its expected
// transaction bytes have all come in. Waiters name the phase by its parity:
// waiting on parity p returns once the phase of parity p has completed, and
// at once for parity 1 on a fresh barrier (its phase 0 is still open), so a
// producer starts waiting for "slot empty" on parity 1.

__device__ __forceinline__ void mbarrier_init(std::uint64_t* barrier, std::uint32_t arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(shared_u32(barrier)),
               "r"(arrivals)
               : "memory");
}

/// Makes mbarrier_init visible to the other threads and to the TMA unit;
/// follow with __syncthreads().
__device__ __forceinline__ void mbarrier_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

__device__ __forceinline__ void mbarrier_arrive(std::uint64_t* barrier) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(shared_u32(barrier)) : "memory");
}

/// One arrival that also adds `bytes` to the phase's expected transaction count.
__device__ __forceinline__ void mbarrier_arrive_expect_tx(std::uint64_t* barrier,
                                                          std::uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(
                   shared_u32(barrier)),
               "r"(bytes)
               : "memory");
}

/// True once the phase of parity `parity` has completed (may time out and return false).
__device__ __forceinline__ bool mbarrier_try_wait(std::uint64_t* barrier, std::uint32_t parity) {
  std::uint32_t done;
  asm volatile(
      "{\n.reg .pred p;\n"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
      "selp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(done)
      : "r"(shared_u32(barrier)), "r"(parity)
      : "memory");
  return done != 0;
}

__device__ __forceinline__ void mbarrier_wait(std::uint64_t* barrier, std::uint32_t parity) {
  while (!mbarrier_try_wait(barrier, parity)) {
  }
}

// ---------------------------------------------------------------------------
// TMA (PTX ISA, "cp.async.bulk.tensor"): one thread copies a box of a tensor
// described by a CUtensorMap (cuTensorMapEncodeTiled on the host, passed as a
// __grid_constant__ kernel parameter) into shared memory; the bytes are counted
// on `barrier`. Coordinates are elements, innermost dimension first; the box's
// rows that fall outside the tensor are zero-filled (and still counted).

__device__ __forceinline__ void tma_load_4d(void* destination, const CUtensorMap* map,
                                            std::uint64_t* barrier, int c0, int c1, int c2,
                                            int c3) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3, %4, %5}], [%6];\n" ::"r"(shared_u32(destination)),
      "l"(reinterpret_cast<std::uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3),
      "r"(shared_u32(barrier))
      : "memory");
}

/// Fetches the tensor map into the TMA unit's cache ahead of its first use.
__device__ __forceinline__ void tma_prefetch_map(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<std::uint64_t>(map))
               : "memory");
}

/// Orders this thread's earlier generic-proxy shared-memory writes (st.shared)
/// before later async-proxy accesses (wgmma operand reads, TMA stores) of the
/// same bytes; a barrier among the writers must still follow.
__device__ __forceinline__ void fence_proxy_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// ---------------------------------------------------------------------------
// setmaxnreg (PTX ISA, "setmaxnreg"): every warp of a warpgroup moves its
// per-thread register budget to kRegisters (a multiple of 8 in [24, 256]);
// registers a producer warpgroup gives up go to consumers that ask for more
// (FlashAttention-3, section 3.1, "warp-specialization").

template <int kRegisters>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegisters));
}

template <int kRegisters>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegisters));
}

}  // namespace sextant::kernels::detail::sm90
