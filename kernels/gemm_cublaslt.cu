#include "kernels/gemm_cublaslt.h"

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "kernels/cuda_check.h"

namespace sextant::kernels {
namespace {

void check_cublas(cublasStatus_t status, const char* call, const char* file, int line) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  throw CudaError(call, file, line, cublasLtGetStatusName(status), cublasLtGetStatusString(status));
}
#define SEXTANT_CUBLAS_CHECK(call) check_cublas((call), #call, __FILE__, __LINE__)

// Descriptors freed on every path, exceptions included.
struct MatmulDesc {
  cublasLtMatmulDesc_t desc = nullptr;
  ~MatmulDesc() { if (desc != nullptr) cublasLtMatmulDescDestroy(desc); }
};
struct Layout {
  cublasLtMatrixLayout_t desc = nullptr;
  ~Layout() { if (desc != nullptr) cublasLtMatrixLayoutDestroy(desc); }
};
struct Preference {
  cublasLtMatmulPreference_t desc = nullptr;
  ~Preference() { if (desc != nullptr) cublasLtMatmulPreferenceDestroy(desc); }
};

template <typename T>
void set_attribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attribute,
                   const T& value) {
  SEXTANT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, attribute, &value, sizeof(value)));
}

bool has_gelu(GemmEpilogue e) { return e == GemmEpilogue::kGelu || e == GemmEpilogue::kBiasGelu; }
bool has_bias(GemmEpilogue e) { return e == GemmEpilogue::kBias || e == GemmEpilogue::kBiasGelu; }

cublasLtEpilogue_t to_cublas(GemmEpilogue e, bool save_gelu_input) {
  switch (e) {
    case GemmEpilogue::kNone: return CUBLASLT_EPILOGUE_DEFAULT;
    case GemmEpilogue::kBias: return CUBLASLT_EPILOGUE_BIAS;
    case GemmEpilogue::kGelu:
      return save_gelu_input ? CUBLASLT_EPILOGUE_GELU_AUX : CUBLASLT_EPILOGUE_GELU;
    case GemmEpilogue::kBiasGelu:
      return save_gelu_input ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_BIAS;
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

std::string shape(const GemmArgs& a) {
  return "m=" + std::to_string(a.m) + " n=" + std::to_string(a.n) + " k=" + std::to_string(a.k);
}

}  // namespace

std::string gemm_check(const GemmArgs& args) {
  if (args.m < 0 || args.n < 0 || args.k <= 0)
    return "m and n must be >= 0 and k > 0 (" + shape(args) + ")";
  if (args.a == nullptr || args.b == nullptr || args.c == nullptr) return "a, b and c must not be null";
  if (!is_aligned(args.a, 16) || !is_aligned(args.b, 16) || !is_aligned(args.c, 16) ||
      !is_aligned(args.bias, 16) || !is_aligned(args.gelu_input, 16))
    return "a, b, c, bias and gelu_input must be 16-byte aligned";
  if (args.epilogue != GemmEpilogue::kNone && args.c_type != GemmOutput::kBf16)
    return "epilogues need a bf16 output (the fp32 output is for weight gradients)";
  if (has_bias(args.epilogue) != (args.bias != nullptr))
    return has_bias(args.epilogue) ? "a bias epilogue needs a bias" : "a bias needs a bias epilogue";
  if (args.gelu_input != nullptr && !has_gelu(args.epilogue))
    return "gelu_input needs a GELU epilogue";
  if (args.gelu_input != nullptr && args.n % 8 != 0)
    return "saving gelu_input needs n (" + std::to_string(args.n) +
           ") to be a multiple of 8 (cuBLASLt: the auxiliary leading dimension)";
  return {};
}

CublasLtGemm::CublasLtGemm(void* workspace, std::size_t workspace_bytes)
    : workspace_(workspace), workspace_bytes_(workspace_bytes) {
  require_argument(is_aligned(workspace, 256), "CublasLtGemm", "workspace must be 256-byte aligned");
  cublasLtHandle_t handle = nullptr;
  SEXTANT_CUBLAS_CHECK(cublasLtCreate(&handle));
  handle_ = handle;
}

CublasLtGemm::~CublasLtGemm() {
  if (handle_ != nullptr) cublasLtDestroy(handle_);
}

void CublasLtGemm::run(const GemmArgs& args, cudaStream_t stream) const {
  if (const std::string problem = gemm_check(args); !problem.empty())
    throw KernelArgumentError("CublasLtGemm::run: " + problem);
  if (args.m == 0 || args.n == 0) return;

  const bool ta = args.transpose_a == Transpose::kYes;
  const bool tb = args.transpose_b == Transpose::kYes;
  const cudaDataType_t c_type = args.c_type == GemmOutput::kBf16 ? CUDA_R_16BF : CUDA_R_32F;

  MatmulDesc op;
  SEXTANT_CUBLAS_CHECK(cublasLtMatmulDescCreate(&op.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  // Column-major view: D^T (n, m) = op(B)^T (n, k) . op(A)^T (k, m).
  const cublasOperation_t first_op = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t second_op = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  set_attribute(op.desc, CUBLASLT_MATMUL_DESC_TRANSA, first_op);
  set_attribute(op.desc, CUBLASLT_MATMUL_DESC_TRANSB, second_op);
  const cublasLtEpilogue_t epilogue = to_cublas(args.epilogue, args.gelu_input != nullptr);
  set_attribute(op.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, epilogue);
  if (args.bias != nullptr) {
    const void* bias = args.bias;
    set_attribute(op.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias);
  }
  if (args.gelu_input != nullptr) {
    void* aux = args.gelu_input;
    const std::int64_t aux_ld = args.n;
    set_attribute(op.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, aux);
    set_attribute(op.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, aux_ld);
  }

  // Row-major (r, c) memory is the column-major (c, r) matrix with leading dimension c.
  const std::uint64_t first_rows = tb ? args.k : args.n, first_cols = tb ? args.n : args.k;
  const std::uint64_t second_rows = ta ? args.m : args.k, second_cols = ta ? args.k : args.m;
  Layout first, second, out;
  SEXTANT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&first.desc, CUDA_R_16BF, first_rows, first_cols,
                                                  static_cast<std::int64_t>(first_rows)));
  SEXTANT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&second.desc, CUDA_R_16BF, second_rows,
                                                  second_cols,
                                                  static_cast<std::int64_t>(second_rows)));
  SEXTANT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&out.desc, c_type, args.n, args.m, args.n));

  Preference preference;
  SEXTANT_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&preference.desc));
  const std::uint64_t workspace_bytes = workspace_bytes_;
  SEXTANT_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      preference.desc, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes,
      sizeof(workspace_bytes)));

  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  SEXTANT_CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(handle_, op.desc, first.desc, second.desc,
                                                      out.desc, out.desc, preference.desc, 1,
                                                      &result, &found));
  if (found == 0)
    throw CudaError("cublasLtMatmulAlgoGetHeuristic", __FILE__, __LINE__,
                    "CUBLAS_STATUS_NOT_SUPPORTED", "no algorithm for " + shape(args));

  SEXTANT_CUBLAS_CHECK(cublasLtMatmul(handle_, op.desc, &args.alpha, args.b, first.desc, args.a,
                                      second.desc, &args.beta, args.c, out.desc, args.c, out.desc,
                                      &result.algo, workspace_, workspace_bytes_, stream));
}

}  // namespace sextant::kernels
