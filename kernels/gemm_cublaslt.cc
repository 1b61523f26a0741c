#include "kernels/gemm_cublaslt.h"

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <limits>
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

bool gelu_forward(GemmEpilogue e) { return e == GemmEpilogue::kGelu || e == GemmEpilogue::kBiasGelu; }
bool gelu_backward(GemmEpilogue e) {
  return e == GemmEpilogue::kGeluBackward;
}
bool has_bias(GemmEpilogue e) { return e == GemmEpilogue::kBias || e == GemmEpilogue::kBiasGelu; }

cublasLtEpilogue_t to_cublas(GemmEpilogue e, bool save_gelu_input) {
  switch (e) {
    case GemmEpilogue::kNone: return CUBLASLT_EPILOGUE_DEFAULT;
    case GemmEpilogue::kBias: return CUBLASLT_EPILOGUE_BIAS;
    case GemmEpilogue::kGelu:
      return save_gelu_input ? CUBLASLT_EPILOGUE_GELU_AUX : CUBLASLT_EPILOGUE_GELU;
    case GemmEpilogue::kBiasGelu:
      return save_gelu_input ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_BIAS;
    case GemmEpilogue::kGeluBackward: return CUBLASLT_EPILOGUE_DGELU;
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

cudaDataType_t to_cuda(GemmOutput t) { return t == GemmOutput::kBf16 ? CUDA_R_16BF : CUDA_R_32F; }

// The largest power of two up to 256 that divides the address: cuBLASLt's
// heuristic must be told how aligned the operands are (its default assumes
// 256 bytes, and an algorithm chosen for that may refuse a less aligned one).
std::uint32_t alignment_bytes(const void* p) {
  const auto address = reinterpret_cast<std::uintptr_t>(p);
  std::uint32_t a = 256;
  while (a > 1 && address % a != 0) a /= 2;
  return a;
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
  if (!is_aligned(args.c_source, 16)) return "c_source must be 16-byte aligned";
  if (args.epilogue != GemmEpilogue::kNone && args.c_type != GemmOutput::kBf16)
    return "epilogues need a bf16 output (the fp32 output is for weight gradients)";
  if (has_bias(args.epilogue) != (args.bias != nullptr))
    return has_bias(args.epilogue) ? "a bias epilogue needs a bias" : "a bias needs a bias epilogue";
  if (args.gelu_input != nullptr && !gelu_forward(args.epilogue) && !gelu_backward(args.epilogue))
    return "gelu_input needs a GELU epilogue";
  if (gelu_backward(args.epilogue) && args.gelu_input == nullptr)
    return "a GELU backward epilogue needs gelu_input (saved by the forward)";
  if (args.c_source != nullptr && args.beta == 0.0f) return "c_source is read only when beta != 0";
  if (args.sm_count_target < 0)
    return "sm_count_target (" + std::to_string(args.sm_count_target) + ") must be >= 0 (0: every SM)";
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

// One problem's descriptors and algorithms, built on its first product.
struct CublasLtGemm::Problem {
  std::string key;
  MatmulDesc op;
  Layout first, second, out;
  std::vector<cublasLtMatmulHeuristicResult_t> algorithms;  // the heuristic's order
  int chosen = 0;
  bool tuned = false;
};

namespace {

// The size the algorithm is chosen for: the varying dimension's power-of-two
// bucket (VaryingDim), the others as they are.
int bucket_of(int size) {
  int bucket = 64;
  while (bucket < size) bucket *= 2;
  return bucket;
}

GemmArgs chosen_for(const GemmArgs& a) {
  GemmArgs b = a;
  if (a.varying == VaryingDim::kM) b.m = bucket_of(a.m);
  if (a.varying == VaryingDim::kK) b.k = bucket_of(a.k);
  return b;
}

std::string problem_key(const GemmArgs& a) {
  std::string key = shape(a);
  if (a.varying != VaryingDim::kNone) key += a.varying == VaryingDim::kM ? " m varies" : " k varies";
  key += a.transpose_a == Transpose::kYes ? " T" : " N";
  key += a.transpose_b == Transpose::kYes ? "T" : "N";
  key += a.c_type == GemmOutput::kBf16 ? " bf16" : " fp32";
  key += " epilogue=" + std::to_string(static_cast<int>(a.epilogue));
  key += a.gelu_input != nullptr ? " aux" : "";
  if (a.sm_count_target > 0) key += " sms=" + std::to_string(a.sm_count_target);
  key += " align=" + std::to_string(alignment_bytes(a.a)) + "," + std::to_string(alignment_bytes(a.b)) +
         "," + std::to_string(alignment_bytes(a.c_source != nullptr ? a.c_source : a.c)) + "," +
         std::to_string(alignment_bytes(a.c));
  return key;
}

constexpr int kHeuristicCandidates = 16;

}  // namespace

CublasLtGemm::Problem& CublasLtGemm::problem(const GemmArgs& actual) {
  const GemmArgs args = chosen_for(actual);
  std::string key = problem_key(args);
  if (auto found = problems_.find(key); found != problems_.end()) return *found->second;

  auto p = std::make_unique<Problem>();
  p->key = key;
  const bool ta = args.transpose_a == Transpose::kYes;
  const bool tb = args.transpose_b == Transpose::kYes;
  SEXTANT_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p->op.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  // Column-major view: D^T (n, m) = op(B)^T (n, k) . op(A)^T (k, m).
  const cublasOperation_t first_op = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t second_op = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  set_attribute(p->op.desc, CUBLASLT_MATMUL_DESC_TRANSA, first_op);
  set_attribute(p->op.desc, CUBLASLT_MATMUL_DESC_TRANSB, second_op);
  set_attribute(p->op.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, to_cublas(args.epilogue, args.gelu_input != nullptr));
  if (args.gelu_input != nullptr) {
    const std::int64_t aux_ld = args.n;
    set_attribute(p->op.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, aux_ld);
  }
  if (args.sm_count_target > 0) {
    const std::int32_t sms = args.sm_count_target;
    set_attribute(p->op.desc, CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, sms);
  }
  // Pointers are set per product; the heuristic needs them set to something.
  if (args.bias != nullptr) {
    const void* bias = args.bias;
    set_attribute(p->op.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias);
  }
  if (args.gelu_input != nullptr) {
    void* aux = args.gelu_input;
    set_attribute(p->op.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, aux);
  }

  // Row-major (r, c) memory is the column-major (c, r) matrix with leading dimension c.
  const std::uint64_t first_rows = tb ? args.k : args.n, first_cols = tb ? args.n : args.k;
  const std::uint64_t second_rows = ta ? args.m : args.k, second_cols = ta ? args.k : args.m;
  SEXTANT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->first.desc, CUDA_R_16BF, first_rows, first_cols,
                                                  static_cast<std::int64_t>(first_rows)));
  SEXTANT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->second.desc, CUDA_R_16BF, second_rows,
                                                  second_cols, static_cast<std::int64_t>(second_rows)));
  SEXTANT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->out.desc, to_cuda(args.c_type), args.n, args.m, args.n));

  Preference preference;
  SEXTANT_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&preference.desc));
  const std::uint64_t workspace_bytes = workspace_bytes_;
  SEXTANT_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      preference.desc, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes, sizeof(workspace_bytes)));
  // cuBLASLt's A is our B and its B our A (the column-major view above).
  const std::uint32_t align_a = alignment_bytes(args.b), align_b = alignment_bytes(args.a),
                      align_c = alignment_bytes(args.c_source != nullptr ? args.c_source : args.c),
                      align_d = alignment_bytes(args.c);
  SEXTANT_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      preference.desc, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_a, sizeof(align_a)));
  SEXTANT_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      preference.desc, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_b, sizeof(align_b)));
  SEXTANT_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      preference.desc, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_c, sizeof(align_c)));
  SEXTANT_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      preference.desc, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_d, sizeof(align_d)));

  p->algorithms.resize(kHeuristicCandidates);
  int found = 0;
  SEXTANT_CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(handle_, p->op.desc, p->first.desc, p->second.desc,
                                                      p->out.desc, p->out.desc, preference.desc,
                                                      kHeuristicCandidates, p->algorithms.data(), &found));
  if (found == 0)
    throw CudaError("cublasLtMatmulAlgoGetHeuristic", __FILE__, __LINE__, "CUBLAS_STATUS_NOT_SUPPORTED",
                    "no algorithm for " + key);
  p->algorithms.resize(static_cast<std::size_t>(found));
  Problem& result = *p;
  problems_.emplace(std::move(key), std::move(p));
  return result;
}

namespace {

void set_layout(cublasLtMatrixLayout_t layout, std::uint64_t rows, std::uint64_t cols) {
  const std::int64_t ld = static_cast<std::int64_t>(rows);
  SEXTANT_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_ROWS, &rows, sizeof(rows)));
  SEXTANT_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_COLS, &cols, sizeof(cols)));
  SEXTANT_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_LD, &ld, sizeof(ld)));
}

}  // namespace

void CublasLtGemm::launch(const GemmArgs& args, Problem& p, int algorithm, cudaStream_t stream) {
  if (args.varying != VaryingDim::kNone) {
    // The descriptors were made for the bucket's size: this call's own (the
    // same column-major views as problem() makes).
    const bool ta = args.transpose_a == Transpose::kYes;
    const bool tb = args.transpose_b == Transpose::kYes;
    set_layout(p.first.desc, tb ? args.k : args.n, tb ? args.n : args.k);
    set_layout(p.second.desc, ta ? args.m : args.k, ta ? args.k : args.m);
    set_layout(p.out.desc, args.n, args.m);
  }
  if (args.bias != nullptr) {
    const void* bias = args.bias;
    set_attribute(p.op.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias);
  }
  if (args.gelu_input != nullptr) {
    void* aux = args.gelu_input;
    set_attribute(p.op.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, aux);
  }
  const void* c_in = args.c_source != nullptr ? args.c_source : args.c;
  SEXTANT_CUBLAS_CHECK(cublasLtMatmul(handle_, p.op.desc, &args.alpha, args.b, p.first.desc, args.a,
                                      p.second.desc, &args.beta, c_in, p.out.desc, args.c, p.out.desc,
                                      &p.algorithms[static_cast<std::size_t>(algorithm)].algo, workspace_,
                                      workspace_bytes_, stream));
}

void CublasLtGemm::run(const GemmArgs& args, cudaStream_t stream) {
  if (const std::string problem_text = gemm_check(args); !problem_text.empty())
    throw KernelArgumentError("CublasLtGemm::run: " + problem_text);
  if (args.m == 0 || args.n == 0) return;
  Problem& p = problem(args);
  if (tune_new_problems_ && !p.tuned) tune(args, stream, kHeuristicCandidates, 3);
  launch(args, p, p.chosen, stream);
}

std::vector<float> CublasLtGemm::tune(const GemmArgs& args, cudaStream_t stream, int candidates,
                                      int repeats) {
  if (const std::string problem_text = gemm_check(args); !problem_text.empty())
    throw KernelArgumentError("CublasLtGemm::tune: " + problem_text);
  require_argument(candidates >= 1 && repeats >= 1, "CublasLtGemm::tune", "candidates and repeats must be >= 1");
  Problem& p = problem(args);
  const int n = std::min(candidates, static_cast<int>(p.algorithms.size()));
  std::vector<float> ms(static_cast<std::size_t>(n), std::numeric_limits<float>::quiet_NaN());
  cudaEvent_t begin = nullptr, end = nullptr;
  SEXTANT_CUDA_CHECK(cudaEventCreate(&begin));
  SEXTANT_CUDA_CHECK(cudaEventCreate(&end));
  float best = std::numeric_limits<float>::infinity();
  for (int i = 0; i < n; ++i) {
    try {
      launch(args, p, i, stream);  // warm-up
      SEXTANT_CUDA_CHECK(cudaEventRecord(begin, stream));
      for (int r = 0; r < repeats; ++r) launch(args, p, i, stream);
      SEXTANT_CUDA_CHECK(cudaEventRecord(end, stream));
      SEXTANT_CUDA_CHECK(cudaEventSynchronize(end));
      float total = 0;
      SEXTANT_CUDA_CHECK(cudaEventElapsedTime(&total, begin, end));
      ms[static_cast<std::size_t>(i)] = total / static_cast<float>(repeats);
      if (ms[static_cast<std::size_t>(i)] < best) {
        best = ms[static_cast<std::size_t>(i)];
        p.chosen = i;
      }
    } catch (const CudaError&) {
      SEXTANT_CUDA_CHECK(cudaStreamSynchronize(stream));  // a candidate that refused: skip it
    }
  }
  cudaEventDestroy(begin);
  cudaEventDestroy(end);
  p.tuned = true;
  return ms;
}

std::vector<std::pair<std::string, int>> CublasLtGemm::chosen_algorithms() const {
  std::vector<std::pair<std::string, int>> out;
  for (const auto& [key, p] : problems_) out.emplace_back(key, p->chosen);
  return out;
}

}  // namespace sextant::kernels
