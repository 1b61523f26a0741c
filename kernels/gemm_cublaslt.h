// Matrix products through cuBLASLt: bf16 inputs, fp32 accumulation, bf16 or
// fp32 output, and the epilogues a transformer's linear layers fuse (bias,
// GELU with its input saved for the backward).
//
// Everything here is row-major, as the rest of kernels/ is:
//   C (m, n) = alpha * op(A) (m, k) . op(B) (k, n) + beta * C
// A linear layer with PyTorch's weight layout W (out, in) needs three shapes:
//   forward       Y (tokens, out)  = X (tokens, in) . W^T        transpose_b
//   input grad    dX (tokens, in)  = dY (tokens, out) . W         (none)
//   weight grad   dW (out, in)    += dY^T . X  (fp32 C, beta 1)   transpose_a
// cuBLASLt is column-major; a row-major C is the column-major C^T = op(B)^T
// op(A)^T, so the wrapper passes B as cuBLASLt's first operand and A as its second.
#pragma once

#include <cstddef>
#include <string>

#include "kernels/bf16.h"
#include "kernels/stream.h"

struct cublasLtContext;  // cublasLtHandle_t is a pointer to it (cublasLt.h)

namespace sextant::kernels {

/// cuBLAS's recommended workspace for Hopper (cuBLAS documentation,
/// cublasSetWorkspace: 32 MiB on Hopper, 4 MiB on earlier GPUs).
inline constexpr std::size_t kCublasLtWorkspaceBytes = std::size_t{32} << 20;

enum class Transpose { kNo, kYes };
enum class GemmEpilogue { kNone, kBias, kGelu, kBiasGelu };  // GELU after the bias
enum class GemmOutput { kBf16, kFp32 };

struct GemmArgs {
  int m = 0, n = 0, k = 0;
  const Bf16* a = nullptr;  // (m, k) row-major, or (k, m) when transpose_a
  Transpose transpose_a = Transpose::kNo;
  const Bf16* b = nullptr;  // (k, n) row-major, or (n, k) when transpose_b
  Transpose transpose_b = Transpose::kNo;
  void* c = nullptr;  // (m, n) row-major, bf16 or fp32 as c_type; read when beta != 0
  GemmOutput c_type = GemmOutput::kBf16;
  float alpha = 1.0f;
  float beta = 0.0f;
  GemmEpilogue epilogue = GemmEpilogue::kNone;  // needs a bf16 output
  const Bf16* bias = nullptr;                   // (n) bf16, added to every row
  Bf16* gelu_input = nullptr;  // (m, n) bf16, optional with a GELU epilogue: the values GELU
                               // was applied to (after the bias), for gelu_backward with no bias
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

  /// Queues the product on `stream`. Throws KernelArgumentError when gemm_check
  /// fails, CudaError when cuBLASLt has no algorithm or fails.
  void run(const GemmArgs& args, cudaStream_t stream) const;

 private:
  cublasLtContext* handle_ = nullptr;
  void* workspace_;
  std::size_t workspace_bytes_;
};

}  // namespace sextant::kernels
