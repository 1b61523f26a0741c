// The experts' matrix products, all local experts in one call: expert e owns
// rows [start_e, start_e + rows_e) of the permuted activations (the blocks
// kernels/moe_routing_map.h lays out, start_e = sum of the rows before it) and a
// weight W_e (out, in), PyTorch's layout for a linear layer, the experts'
// weights contiguous as (experts, out, in). Row-major throughout, bf16 operands,
// fp32 accumulation:
//   forward         Y_e (rows_e, out) = X_e (rows_e, in) . W_e^T
//   input grad      dX_e (rows_e, in) = dY_e (rows_e, out) . W_e
//   weight grad     dW_e (out, in)  = beta dW_e + dY_e^T . X_e    (fp32 or bf16)
// An expert with no rows is skipped (its dW_e is zeroed when beta = 0).
//
// Two backends, chosen at construction so they can be timed against each other
// (tests/bench/kernels/moe_grouped_gemm_bench.cc):
// - kCublasGrouped: cublasGemmGroupedBatchedEx (cuBLAS 12.5+), one call for every
//   expert with rows, each its own group (the sizes differ). Its table of types
//   takes bf16 inputs to a bf16 output only (cuBLAS documentation,
//   cublasGemmGroupedBatchedEx), so an fp32 weight gradient is computed in bf16
//   into a caller's staging buffer and added into the fp32 one by a second kernel:
//   one more bf16 rounding of each product than the loop.
// - kCublasLtLoop: one cuBLASLt product per expert with rows (kernels/gemm_cublaslt.h),
//   each shape's algorithm chosen once per power of two of the rows (VaryingDim:
//   the rows change with every routing) and cached; an fp32 weight gradient is
//   accumulated by cuBLASLt itself. One launch per expert, so many small experts
//   pay a launch each.
// Both take the row counts on the host: cuBLAS needs the sizes to launch (the
// counts come back from the device once per layer, as Megatron's do).
//
// Not thread-safe; the device pointer tables the grouped backend fills are one
// per product kind, so a forward, an input gradient and a weight gradient may be
// in flight on different streams, but two products of one kind must be ordered
// on one stream.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "kernels/bf16.h"
#include "kernels/gemm_cublaslt.h"  // GemmOutput, kCublasLtWorkspaceBytes
#include "kernels/stream.h"

struct cublasContext;  // cublasHandle_t is a pointer to it (cublas_api.h)

namespace sextant::kernels {

enum class MoeGemmBackend { kCublasGrouped, kCublasLtLoop };

const char* to_string(MoeGemmBackend backend);

class MoeGroupedGemm {
 public:
  /// Device workspace for up to max_experts experts: the grouped backend's pointer
  /// tables and cuBLAS's (or cuBLASLt's) workspace, kCublasLtWorkspaceBytes.
  static std::size_t workspace_bytes(int max_experts);

  /// workspace: device memory, 256-byte aligned, at least workspace_bytes(max_experts);
  /// it must outlive the object and every product queued with it.
  MoeGroupedGemm(MoeGemmBackend backend, int max_experts, void* workspace, std::size_t workspace_bytes);
  ~MoeGroupedGemm();
  MoeGroupedGemm(const MoeGroupedGemm&) = delete;
  MoeGroupedGemm& operator=(const MoeGroupedGemm&) = delete;

  MoeGemmBackend backend() const { return backend_; }

  /// The loop backend: when on, each product seen for the first time (per
  /// power-of-two bucket of its rows, VaryingDim) runs the fastest of cuBLASLt's
  /// candidates, timed on this call (CublasLtGemm::set_tune_new_problems), as the
  /// engine's dense products are in its throw-away warm-up pass; without it
  /// every expert product ran the heuristic's first choice. The grouped backend
  /// has no choice of algorithm: nothing changes.
  void set_tune_new_problems(bool on);

  /// Y (sum rows, out) bf16, written; X (sum rows, in) bf16; weights (experts, out, in) bf16;
  /// rows_per_expert: experts entries >= 0. Requires in % 8 == 0, out % 8 == 0 and
  /// 16-byte aligned pointers (so every expert's block is aligned too).
  void forward(Bf16* y, const Bf16* x, const Bf16* weights, std::span<const std::int32_t> rows_per_expert,
               int in, int out, cudaStream_t stream);

  /// dX (sum rows, in) bf16, written; dY (sum rows, out) bf16.
  void backward_input(Bf16* dx, const Bf16* dy, const Bf16* weights,
                      std::span<const std::int32_t> rows_per_expert, int in, int out, cudaStream_t stream);

  /// dweights (experts, out, in), fp32 or bf16 as dweights_type, = beta * dweights +
  /// dY_e^T X_e (beta 0 or 1). staging: (experts, out, in) bf16 scratch, needed by the
  /// grouped backend for an fp32 output (see above); null otherwise.
  void backward_weight(void* dweights, GemmOutput dweights_type, float beta, const Bf16* dy, const Bf16* x,
                       std::span<const std::int32_t> rows_per_expert, int in, int out, Bf16* staging,
                       cudaStream_t stream);

 private:
  enum class Product { kForward, kInputGrad, kWeightGrad };
  struct Problem;
  void check(const char* name, std::span<const std::int32_t> rows, int in, int out, const void* a,
             const void* b, const void* c) const;
  void run(const Problem& problem, cudaStream_t stream);
  void run_grouped(const Problem& problem, cudaStream_t stream);

  MoeGemmBackend backend_;
  int max_experts_;
  void** pointer_tables_;  // device: 3 product kinds x (A, B, C) x max_experts
  void* library_workspace_;
  std::size_t library_workspace_bytes_;
  cublasContext* cublas_ = nullptr;            // kCublasGrouped
  std::unique_ptr<CublasLtGemm> cublaslt_;     // kCublasLtLoop
};

}  // namespace sextant::kernels
