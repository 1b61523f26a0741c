#include "kernels/moe_grouped_gemm.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <span>
#include <string>
#include <vector>

#include "kernels/cuda_check.h"
#include "kernels/device_common.cuh"

namespace sextant::kernels {
namespace {

void check_cublas(cublasStatus_t status, const char* call, const char* file, int line) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  throw CudaError(call, file, line, cublasGetStatusName(status), cublasGetStatusString(status));
}
#define SEXTANT_CUBLAS_CHECK(call) check_cublas((call), #call, __FILE__, __LINE__)

constexpr std::size_t kAlign = 256;
std::size_t round_up(std::size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

constexpr int kProductKinds = 3;  // forward, input gradient, weight gradient
constexpr int kTablesPerProduct = 3;  // cuBLAS's A, B and C pointer arrays

std::size_t pointer_table_bytes(int max_experts) {
  return round_up(sizeof(void*) * kProductKinds * kTablesPerProduct * static_cast<std::size_t>(max_experts));
}

// The pointers of up to kPointersPerLaunch products travel as a kernel argument
// (3 x 64 x 8 bytes, well inside the 4 KiB parameter limit), so filling the
// device tables needs no host buffer that must outlive an asynchronous copy.
constexpr int kPointersPerLaunch = 64;
struct PointerBatch {
  const void* a[kPointersPerLaunch];
  const void* b[kPointersPerLaunch];
  void* c[kPointersPerLaunch];
  int count;
};

__global__ void fill_pointer_tables_kernel(const void** a, const void** b, void** c, PointerBatch batch) {
  const int i = threadIdx.x;
  if (i >= batch.count) return;
  a[i] = batch.a[i];
  b[i] = batch.b[i];
  c[i] = batch.c[i];
}

// Which of up to kMaskExperts consecutive experts have no rows, passed by value
// (128 bytes of kernel argument). The weight gradient of an expert with no rows is
// 0: the kernels below write it (beta 0) or leave the block alone (beta 1) from
// this mask, one launch for all of them, where one cudaMemsetAsync per run of empty
// experts cost about 40 launches a layer and micro-batch at moe-fine-tiny mbs 1
// (39,199 memsets in one second of training, 1.0 us of GPU each plus a host launch:
// reports/measurements/2026-11-28-h200x4-hopper-d64-backward/call2/moe_profile.txt).
constexpr int kMaskExperts = 1024;
struct EmptyExperts {
  std::uint32_t words[kMaskExperts / 32];
};

__device__ __forceinline__ bool is_empty(const EmptyExperts& mask, std::int64_t expert) {
  return (mask.words[expert >> 5] >> (expert & 31)) & 1u;
}

// dweights = beta * dweights + staged over consecutive experts of expert_elems
// elements each (a multiple of 64, as in and out are multiples of 8): blockIdx.y
// is the expert (no 64-bit division by expert_elems per thread: a first version
// that divided ran the moe-fine-tiny step 3-4 % slower than the memsets it
// replaced), blockIdx.x a 2048-element part of its block. An empty expert's
// staging is not read (cuBLAS skipped it): its block is written 0 (beta 0) or
// kept (beta 1). A thread's 8 fp32 elements move as two 16-byte vectors: eight
// scalar accesses 32 bytes apart across a warp ran at about half the HBM rate
// (93 us for fc2's 126 MB of moe-fine-tiny, reports/measurements/2026-11-27-h100-moe-ncu).
__global__ void accumulate_staged_kernel(float* dweights, const __nv_bfloat16* staged, std::int64_t expert_elems,
                                         EmptyExperts empty, float beta) {
  const bool no_rows = is_empty(empty, blockIdx.y);
  if (no_rows && beta != 0.0f) return;
  const std::int64_t in_expert =
      (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * detail::kBf16PerVector;
  if (in_expert >= expert_elems) return;
  const std::int64_t i = blockIdx.y * expert_elems + in_expert;
  float s[detail::kBf16PerVector] = {};
  if (!no_rows) detail::load_bf16x8(staged + i, s);
  auto* out = reinterpret_cast<float4*>(dweights + i);
  float4 lo = make_float4(s[0], s[1], s[2], s[3]), hi = make_float4(s[4], s[5], s[6], s[7]);
  if (beta != 0.0f) {
    const float4 old_lo = out[0], old_hi = out[1];
    lo = make_float4(beta * old_lo.x + lo.x, beta * old_lo.y + lo.y, beta * old_lo.z + lo.z, beta * old_lo.w + lo.w);
    hi = make_float4(beta * old_hi.x + hi.x, beta * old_hi.y + hi.y, beta * old_hi.z + hi.z, beta * old_hi.w + hi.w);
  }
  out[0] = lo;
  out[1] = hi;
}

// Zeroes the blocks of the empty experts among `experts` consecutive ones of
// expert_bytes each (a multiple of 128): blockIdx.y is the expert, blockIdx.x
// strides over its block in 16-byte stores; a non-empty expert's blocks return.
__global__ void zero_empty_experts_kernel(char* target, std::int64_t expert_bytes, EmptyExperts empty) {
  const std::int64_t expert = blockIdx.y;
  if (!is_empty(empty, expert)) return;
  auto* block = reinterpret_cast<uint4*>(target + expert * expert_bytes);
  const std::int64_t vectors = expert_bytes / static_cast<std::int64_t>(sizeof(uint4));
  for (std::int64_t v = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; v < vectors;
       v += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    block[v] = make_uint4(0, 0, 0, 0);
}

// The mask of experts [first, first + count), count <= kMaskExperts.
EmptyExperts empty_experts(std::span<const std::int32_t> rows_per_expert, std::size_t first, std::size_t count) {
  EmptyExperts mask{};
  for (std::size_t e = 0; e < count; ++e)
    if (rows_per_expert[first + e] == 0) mask.words[e / 32] |= 1u << (e % 32);
  return mask;
}

}  // namespace

const char* to_string(MoeGemmBackend backend) {
  return backend == MoeGemmBackend::kCublasGrouped ? "cublas-grouped" : "cublaslt-loop";
}

// One call's products, in the row-major terms of GemmArgs (kernels/gemm_cublaslt.h),
// one per expert with rows.
struct MoeGroupedGemm::Problem {
  Product product;
  std::vector<GemmArgs> gemms;
};

std::size_t MoeGroupedGemm::workspace_bytes(int max_experts) {
  return pointer_table_bytes(max_experts) + kCublasLtWorkspaceBytes;
}

MoeGroupedGemm::MoeGroupedGemm(MoeGemmBackend backend, int max_experts, void* workspace,
                               std::size_t workspace_bytes)
    : backend_(backend), max_experts_(max_experts) {
  constexpr const char* kName = "MoeGroupedGemm";
  require_argument(max_experts >= 1, kName, "max_experts (" + std::to_string(max_experts) + ") must be >= 1");
  require_argument(is_aligned(workspace, kAlign), kName, "workspace must be 256-byte aligned");
  require_argument(workspace_bytes >= MoeGroupedGemm::workspace_bytes(max_experts), kName,
                   "workspace (" + std::to_string(workspace_bytes) + " bytes) is smaller than the " +
                       std::to_string(MoeGroupedGemm::workspace_bytes(max_experts)) +
                       " bytes workspace_bytes asks for");
  pointer_tables_ = static_cast<void**>(workspace);
  library_workspace_ = static_cast<char*>(workspace) + pointer_table_bytes(max_experts);
  library_workspace_bytes_ = workspace_bytes - pointer_table_bytes(max_experts);
  if (backend_ == MoeGemmBackend::kCublasGrouped) {
    cublasHandle_t handle = nullptr;
    SEXTANT_CUBLAS_CHECK(cublasCreate(&handle));
    const cublasStatus_t status = cublasSetWorkspace(handle, library_workspace_, library_workspace_bytes_);
    if (status != CUBLAS_STATUS_SUCCESS) cublasDestroy(handle);  // the destructor will not run
    SEXTANT_CUBLAS_CHECK(status);
    cublas_ = handle;
  } else {
    cublaslt_ = std::make_unique<CublasLtGemm>(library_workspace_, library_workspace_bytes_);
  }
}

MoeGroupedGemm::~MoeGroupedGemm() {
  if (cublas_ != nullptr) cublasDestroy(cublas_);
}

void MoeGroupedGemm::set_tune_new_problems(bool on) {
  if (cublaslt_) cublaslt_->set_tune_new_problems(on);
}

void MoeGroupedGemm::check(const char* name, std::span<const std::int32_t> rows, int in, int out,
                           const void* a, const void* b, const void* c) const {
  require_argument(!rows.empty() && static_cast<int>(rows.size()) <= max_experts_, name,
                   "experts (" + std::to_string(rows.size()) + ") must be in [1, max_experts (" +
                       std::to_string(max_experts_) + ")]");
  require_argument(std::all_of(rows.begin(), rows.end(), [](std::int32_t r) { return r >= 0; }), name,
                   "rows per expert must be >= 0");
  require_argument(in > 0 && out > 0 && in % 8 == 0 && out % 8 == 0, name,
                   "in (" + std::to_string(in) + ") and out (" + std::to_string(out) +
                       ") must be positive multiples of 8 (16-byte aligned expert blocks)");
  // With no rows nothing is read or written (but a weight gradient, checked by its caller).
  const bool any_rows = std::any_of(rows.begin(), rows.end(), [](std::int32_t r) { return r > 0; });
  require_argument(!any_rows || (a != nullptr && b != nullptr && c != nullptr), name, "operands must not be null");
  require_argument(is_aligned(a, 16) && is_aligned(b, 16) && is_aligned(c, 16), name,
                   "operands must be 16-byte aligned");
}

namespace {

// The products of one call, one per expert with rows: make(e, first row, rows).
template <typename Make>
std::vector<GemmArgs> per_expert(std::span<const std::int32_t> rows_per_expert, Make make) {
  std::vector<GemmArgs> gemms;
  std::int64_t start = 0;
  for (std::size_t e = 0; e < rows_per_expert.size(); ++e) {
    if (rows_per_expert[e] > 0) gemms.push_back(make(static_cast<std::int64_t>(e), start, rows_per_expert[e]));
    start += rows_per_expert[e];
  }
  return gemms;
}

}  // namespace

void MoeGroupedGemm::forward(Bf16* y, const Bf16* x, const Bf16* weights,
                             std::span<const std::int32_t> rows_per_expert, int in, int out,
                             cudaStream_t stream) {
  check("MoeGroupedGemm::forward", rows_per_expert, in, out, y, x, weights);
  Problem p{Product::kForward, {}};
  p.gemms = per_expert(rows_per_expert, [&](std::int64_t e, std::int64_t start, int rows) {
    GemmArgs g;
    g.m = rows, g.n = out, g.k = in;
    g.varying = VaryingDim::kM;  // each expert's rows change with the routing
    g.a = x + start * in;
    g.b = weights + e * out * in, g.transpose_b = Transpose::kYes;  // (out, in) = (n, k)
    g.c = y + start * out;
    return g;
  });
  run(p, stream);
}

void MoeGroupedGemm::backward_input(Bf16* dx, const Bf16* dy, const Bf16* weights,
                                    std::span<const std::int32_t> rows_per_expert, int in, int out,
                                    cudaStream_t stream) {
  check("MoeGroupedGemm::backward_input", rows_per_expert, in, out, dx, dy, weights);
  Problem p{Product::kInputGrad, {}};
  p.gemms = per_expert(rows_per_expert, [&](std::int64_t e, std::int64_t start, int rows) {
    GemmArgs g;
    g.m = rows, g.n = in, g.k = out;
    g.varying = VaryingDim::kM;
    g.a = dy + start * out;
    g.b = weights + e * out * in;  // (out, in) = (k, n)
    g.c = dx + start * in;
    return g;
  });
  run(p, stream);
}

void MoeGroupedGemm::backward_weight(void* dweights, GemmOutput dweights_type, float beta, const Bf16* dy,
                                     const Bf16* x, std::span<const std::int32_t> rows_per_expert, int in,
                                     int out, Bf16* staging, cudaStream_t stream) {
  constexpr const char* kName = "MoeGroupedGemm::backward_weight";
  check(kName, rows_per_expert, in, out, dweights, dy, x);
  require_argument(dweights != nullptr, kName, "dweights must not be null");
  require_argument(beta == 0.0f || beta == 1.0f, kName, "beta must be 0 (write) or 1 (accumulate)");
  const bool staged = backend_ == MoeGemmBackend::kCublasGrouped && dweights_type == GemmOutput::kFp32;
  require_argument(!staged || (staging != nullptr && is_aligned(staging, 16)), kName,
                   "the cuBLAS grouped backend needs a 16-byte aligned bf16 staging buffer for an fp32 "
                   "weight gradient (its grouped GEMM has no fp32 output for bf16 inputs)");
  const std::size_t element_bytes = staged || dweights_type == GemmOutput::kBf16 ? sizeof(Bf16) : sizeof(float);
  char* target = staged ? reinterpret_cast<char*>(staging) : static_cast<char*>(dweights);
  const std::size_t expert_bytes = static_cast<std::size_t>(out) * in * element_bytes;

  Problem p{Product::kWeightGrad, {}};
  p.gemms = per_expert(rows_per_expert, [&](std::int64_t e, std::int64_t start, int rows) {
    GemmArgs g;
    g.m = out, g.n = in, g.k = rows;
    g.varying = VaryingDim::kK;
    g.a = dy + start * out, g.transpose_a = Transpose::kYes;  // (rows, out) = (k, m)
    g.b = x + start * in;                                    // (rows, in) = (k, n)
    g.c = target + e * expert_bytes;
    g.c_type = staged ? GemmOutput::kBf16 : dweights_type;
    g.beta = staged ? 0.0f : beta;
    return g;
  });
  run(p, stream);
  // dY_e^T X_e of no rows is 0 (the products above skip those experts): the staged
  // add writes or keeps their blocks, or, unstaged with beta 0, one kernel zeroes them.
  const std::int64_t expert_elems = static_cast<std::int64_t>(out) * in;
  constexpr int kThreads = 256;
  for (std::size_t first = 0; first < rows_per_expert.size(); first += kMaskExperts) {
    const std::size_t count = std::min<std::size_t>(kMaskExperts, rows_per_expert.size() - first);
    const EmptyExperts empty = empty_experts(rows_per_expert, first, count);
    if (staged) {
      const std::int64_t vectors = expert_elems / detail::kBf16PerVector;  // per expert
      const dim3 grid(static_cast<unsigned>((vectors + kThreads - 1) / kThreads), static_cast<unsigned>(count));
      accumulate_staged_kernel<<<grid, kThreads, 0, stream>>>(static_cast<float*>(dweights) + first * expert_elems,
                                                              detail::cuda_bf16(staging) + first * expert_elems,
                                                              expert_elems, empty, beta);
      SEXTANT_CHECK_LAUNCH("accumulate_staged_kernel");
    } else if (beta == 0.0f && std::any_of(rows_per_expert.begin() + first, rows_per_expert.begin() + first + count,
                                           [](std::int32_t r) { return r == 0; })) {
      // Enough blocks per expert to fill the GPU when one expert is empty, at most its vectors.
      const std::int64_t vectors = static_cast<std::int64_t>(expert_bytes / sizeof(uint4));
      const unsigned blocks = static_cast<unsigned>(std::min<std::int64_t>((vectors + kThreads - 1) / kThreads, 1024));
      zero_empty_experts_kernel<<<dim3(blocks, static_cast<unsigned>(count)), kThreads, 0, stream>>>(
          target + first * expert_bytes, static_cast<std::int64_t>(expert_bytes), empty);
      SEXTANT_CHECK_LAUNCH("zero_empty_experts_kernel");
    }
  }
}

void MoeGroupedGemm::run(const Problem& problem, cudaStream_t stream) {
  if (backend_ == MoeGemmBackend::kCublasGrouped) {
    run_grouped(problem, stream);
    return;
  }
  for (const GemmArgs& g : problem.gemms) cublaslt_->run(g, stream);
}

// cuBLAS is column-major: the row-major D (m, n) = op(A) op(B) is the column-major
// D^T (n, m) = op(B)^T op(A)^T, so cuBLAS's A is our B and its B our A, as in
// CublasLtGemm. A row-major (r, c) operand is column-major (c, r) with leading
// dimension c.
void MoeGroupedGemm::run_grouped(const Problem& problem, cudaStream_t stream) {
  const int count = static_cast<int>(problem.gemms.size());
  if (count == 0) return;
  const std::size_t kind = problem.product == Product::kForward ? 0 : problem.product == Product::kInputGrad ? 1 : 2;
  void** tables = pointer_tables_ + kind * kTablesPerProduct * max_experts_;
  const void** a_table = const_cast<const void**>(tables);
  const void** b_table = const_cast<const void**>(tables + max_experts_);
  void** c_table = tables + 2 * max_experts_;
  for (int first = 0; first < count; first += kPointersPerLaunch) {
    PointerBatch batch{};
    batch.count = std::min(kPointersPerLaunch, count - first);
    for (int i = 0; i < batch.count; ++i) {
      const GemmArgs& g = problem.gemms[static_cast<std::size_t>(first + i)];
      batch.a[i] = g.b;
      batch.b[i] = g.a;
      batch.c[i] = g.c;
    }
    fill_pointer_tables_kernel<<<1, kPointersPerLaunch, 0, stream>>>(a_table + first, b_table + first,
                                                                     c_table + first, batch);
    SEXTANT_CHECK_LAUNCH("fill_pointer_tables_kernel");
  }

  const auto n = static_cast<std::size_t>(count);
  std::vector<cublasOperation_t> op_a(n), op_b(n);
  std::vector<int> m(n), cols(n), k(n), lda(n), ldb(n), ldc(n), group_size(n, 1);
  std::vector<float> alpha(n), beta(n);
  for (std::size_t i = 0; i < n; ++i) {
    const GemmArgs& g = problem.gemms[i];
    const bool ta = g.transpose_a == Transpose::kYes, tb = g.transpose_b == Transpose::kYes;
    op_a[i] = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    op_b[i] = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    m[i] = g.n, cols[i] = g.m, k[i] = g.k;
    lda[i] = tb ? g.k : g.n;  // our B: (n, k) when transposed, else (k, n)
    ldb[i] = ta ? g.m : g.k;  // our A: (k, m) when transposed, else (m, k)
    ldc[i] = g.n;
    alpha[i] = g.alpha, beta[i] = g.beta;
  }
  SEXTANT_CUBLAS_CHECK(cublasSetStream(cublas_, stream));
  SEXTANT_CUBLAS_CHECK(cublasGemmGroupedBatchedEx(
      cublas_, op_a.data(), op_b.data(), m.data(), cols.data(), k.data(), alpha.data(), a_table, CUDA_R_16BF,
      lda.data(), b_table, CUDA_R_16BF, ldb.data(), beta.data(), c_table, CUDA_R_16BF, ldc.data(), count,
      group_size.data(), CUBLAS_COMPUTE_32F));
}

}  // namespace sextant::kernels
