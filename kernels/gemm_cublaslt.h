// Matrix products through cuBLASLt: bf16 inputs, fp32 accumulation, bf16 or
// fp32 output, and the epilogues a transformer's linear layers fuse (bias,
// GELU with its input saved for the backward, GELU's derivative with the bias
// gradient, a residual added through C).
//
// Everything here is row-major, as the rest of kernels/ is:
//   D (m, n) = alpha * op(A) (m, k) . op(B) (k, n) + beta * C,  D = `c`, and C
//   = `c_source` when given (a residual added in the epilogue), else `c` itself
// A linear layer with PyTorch's weight layout W (out, in) needs three shapes:
//   forward       Y (tokens, out)  = X (tokens, in) . W^T        transpose_b
//   input grad    dX (tokens, in)  = dY (tokens, out) . W         (none)
//   weight grad   dW (out, in)    += dY^T . X  (fp32 C, beta 1)   transpose_a
// cuBLASLt is column-major; a row-major C is the column-major C^T = op(B)^T
// op(A)^T, so the wrapper passes B as cuBLASLt's first operand and A as its second.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kernels/bf16.h"
#include "kernels/stream.h"

struct cublasLtContext;  // cublasLtHandle_t is a pointer to it (cublasLt.h)

namespace sextant::kernels {

/// cuBLAS's recommended workspace for Hopper (cuBLAS documentation,
/// cublasSetWorkspace: 32 MiB on Hopper, 4 MiB on earlier GPUs).
inline constexpr std::size_t kCublasLtWorkspaceBytes = std::size_t{32} << 20;

enum class Transpose { kNo, kYes };
// kGeluBackward: D = GELU'(gelu_input) * (op(A) op(B)), the input gradient of
// a GELU whose input the forward saved. (cuBLASLt's DGELU_BGRAD, which also sums
// the bias gradient, ran at 291 TFLOP/s against 672 without it on an H100 and takes only a
// bf16 bias: reports/measurements/2026-11-22-h100-profile-1.3b/gemm.txt.)
enum class GemmEpilogue { kNone, kBias, kGelu, kBiasGelu, kGeluBackward };
enum class GemmOutput { kBf16, kFp32 };
/// The dimension of a product whose size changes from call to call (an MoE
/// expert's rows: m of its forward and input gradient, k of its weight
/// gradient), or none. CublasLtGemm then picks the algorithm once per power of
/// two of that size (the smallest at least 64 and at least the size) and runs
/// each call at its own size: cuBLASLt's heuristic, tens of microseconds of host
/// time, runs once per bucket instead of once per size.
enum class VaryingDim { kNone, kM, kK };

struct GemmArgs {
  int m = 0, n = 0, k = 0;
  const Bf16* a = nullptr;  // (m, k) row-major, or (k, m) when transpose_a
  Transpose transpose_a = Transpose::kNo;
  const Bf16* b = nullptr;  // (k, n) row-major, or (n, k) when transpose_b
  Transpose transpose_b = Transpose::kNo;
  void* c = nullptr;  // (m, n) row-major, bf16 or fp32 as c_type; read when beta != 0
                      // and c_source is null
  const void* c_source = nullptr;  // (m, n) like c: the C read when beta != 0, if not c
  GemmOutput c_type = GemmOutput::kBf16;
  float alpha = 1.0f;
  float beta = 0.0f;
  GemmEpilogue epilogue = GemmEpilogue::kNone;  // needs a bf16 output
  const Bf16* bias = nullptr;                   // (n) bf16, added to every row
  Bf16* gelu_input = nullptr;  // (m, n) bf16: written by kGelu/kBiasGelu when not null (the
                               // values GELU was applied to, after the bias); read by the
                               // GELU backward epilogues, which need it
  VaryingDim varying = VaryingDim::kNone;
  int sm_count_target = 0;  // > 0: choose algorithms for this many multiprocessors, the
                            // rest being busy with a concurrent stream's kernels
                            // (CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET); 0: all of them
};

/// Empty when `args` can run; otherwise what is wrong, with the values.
std::string gemm_check(const GemmArgs& args);

/// Owns one cuBLASLt handle; the workspace belongs to the caller (the engine's
/// arena) and must outlive the object and every product queued with it.
/// Not thread-safe: one object per thread or stream of control.
class CublasLtGemm {
 public:
  /// workspace: device memory, 256-byte aligned; kCublasLtWorkspaceBytes is enough.
  CublasLtGemm(void* workspace, std::size_t workspace_bytes);
  ~CublasLtGemm();
  CublasLtGemm(const CublasLtGemm&) = delete;
  CublasLtGemm& operator=(const CublasLtGemm&) = delete;

  /// Queues the product on `stream`. The first product of each problem (shapes,
  /// transposes, types, epilogue, pointer alignments) builds cuBLASLt's
  /// descriptors and asks its heuristic for an algorithm; later ones reuse both.
  /// Throws KernelArgumentError when gemm_check fails, CudaError when cuBLASLt
  /// has no algorithm or fails.
  void run(const GemmArgs& args, cudaStream_t stream);

  /// Times up to `candidates` of the heuristic's algorithms for `args`' problem
  /// (one warm-up launch, then `repeats` launches between CUDA events, each),
  /// keeps the fastest for every later run of that problem, and returns each
  /// candidate's mean milliseconds in the heuristic's order (NaN where one
  /// failed to launch). Synchronises `stream`. Runs the product 1 + repeats
  /// times per candidate: with beta != 0 and no c_source, C accumulates each time.
  std::vector<float> tune(const GemmArgs& args, cudaStream_t stream, int candidates, int repeats);

  /// When true, run() tunes each new problem on first sight (16 candidates, 3
  /// repeats): for a warm-up pass whose outputs are thrown away.
  void set_tune_new_problems(bool on) { tune_new_problems_ = on; }

  /// Problems seen and their chosen algorithms' heuristic ranks (0: the
  /// heuristic's first choice), for reports.
  std::vector<std::pair<std::string, int>> chosen_algorithms() const;

 private:
  struct Problem;
  Problem& problem(const GemmArgs& args);
  void launch(const GemmArgs& args, Problem& p, int algorithm, cudaStream_t stream);

  cublasLtContext* handle_ = nullptr;
  void* workspace_;
  std::size_t workspace_bytes_;
  bool tune_new_problems_ = false;
  std::map<std::string, std::unique_ptr<Problem>> problems_;
};

}  // namespace sextant::kernels
