// Tensor-parallel parity: a column-parallel linear followed by a row-parallel
// one (an MLP without its activation: H = X·W1ᵀ, Y = H·W2ᵀ), run at tp = 2 and
// tp = 4 on the in-process communicator, against the same code at tp = 1. The
// loss L = Σ Y⊙G (G random, so dL/dY = G) and every rank's gradient shards
// must match the single rank's.
//
// Tolerance: the tp path rounds each rank's partial product to bf16 before
// the all-reduce adds them (one more rounding, at most 2^-9 of a partial's
// magnitude, per rank), and cuBLASLt may pick another algorithm for the
// narrower shard, which changes the fp32 summation order. Partials here are of
// the order of the result's rms, so |error| <= 2^-6 · rms(want) + 2^-7 · |want|
// leaves a margin of about 2 over tp = 4's worst case; a wrong shard or a
// missing all-reduce is off by O(rms), 64 times more.
#include "engine/tensor_parallel/parallel_linear.h"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "engine/comm/communicator.h"
#include "kernels/cuda_check.h"
#include "tests/engine/comm/comm_test_support.h"
#include "tests/kernels/gpu_test_support.h"

namespace sextant::engine::tensor_parallel {
namespace {

using comm::Communicator;
using comm::DataType;
using comm::testing::from_device;
using comm::testing::round_to;
using comm::testing::run_in_process;
using comm::testing::to_device;

constexpr int kTokens = 256, kHidden = 512, kFfn = 1024;

struct Results {
  std::vector<float> y;              // (tokens, hidden), rank 0's
  std::vector<float> dx;             // (tokens, hidden), rank 0's
  std::vector<std::vector<float>> dw1;  // per rank: (ffn/tp, hidden)
  std::vector<std::vector<float>> dw2;  // per rank: (hidden, ffn/tp)
  std::vector<std::vector<float>> y_of_rank;
};

std::vector<float> random_values(std::mt19937_64& rng, std::size_t n, double stddev) {
  std::vector<float> v = kernels::testing::random_float(rng, n, 0.0, stddev);
  for (float& x : v) x = round_to(x, DataType::kBf16);
  return v;
}

// Rows [first, first + count) of a (rows, cols) row-major matrix.
std::vector<float> rows(const std::vector<float>& m, int cols, int first, int count) {
  return {m.begin() + static_cast<long>(first) * cols, m.begin() + static_cast<long>(first + count) * cols};
}
// Columns [first, first + count) of a (rows, cols) row-major matrix.
std::vector<float> columns(const std::vector<float>& m, int cols, int first, int count) {
  std::vector<float> out;
  for (std::size_t r = 0; r < m.size() / cols; ++r)
    out.insert(out.end(), m.begin() + static_cast<long>(r * cols + first),
               m.begin() + static_cast<long>(r * cols + first + count));
  return out;
}

class ParallelLinearParity : public kernels::testing::GpuTestWithParam<int> {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    if (IsSkipped() || HasFailure()) return;
    x_ = random_values(rng(), kTokens * kHidden, 1.0);
    w1_ = random_values(rng(), kFfn * kHidden, 1.0 / std::sqrt(kHidden));
    w2_ = random_values(rng(), kHidden * kFfn, 1.0 / std::sqrt(kFfn));
    g_ = random_values(rng(), kTokens * kHidden, 1.0);
  }

  Results run(int tp) {
    Results out;
    out.dw1.resize(tp), out.dw2.resize(tp), out.y_of_rank.resize(tp);
    const int f = kFfn / tp;
    run_in_process(tp, [&](int r, Communicator& comm) {
      void* workspace = nullptr;
      SEXTANT_CUDA_CHECK(cudaMalloc(&workspace, kernels::kCublasLtWorkspaceBytes));
      {
        kernels::CublasLtGemm gemm(workspace, kernels::kCublasLtWorkspaceBytes);
        auto* x = static_cast<kernels::Bf16*>(to_device(x_, DataType::kBf16));
        auto* w1 = static_cast<kernels::Bf16*>(to_device(rows(w1_, kHidden, r * f, f), DataType::kBf16));
        auto* w2 = static_cast<kernels::Bf16*>(to_device(columns(w2_, kFfn, r * f, f), DataType::kBf16));
        auto* g = static_cast<kernels::Bf16*>(to_device(g_, DataType::kBf16));
        auto* h = static_cast<kernels::Bf16*>(to_device(std::vector<float>(kTokens * f), DataType::kBf16));
        auto* y = static_cast<kernels::Bf16*>(to_device(std::vector<float>(kTokens * kHidden), DataType::kBf16));
        auto* dh = static_cast<kernels::Bf16*>(to_device(std::vector<float>(kTokens * f), DataType::kBf16));
        auto* dx = static_cast<kernels::Bf16*>(to_device(std::vector<float>(kTokens * kHidden), DataType::kBf16));
        auto* dw1 = static_cast<float*>(to_device(std::vector<float>(f * kHidden, 0.0f), DataType::kFp32));
        auto* dw2 = static_cast<float*>(to_device(std::vector<float>(kHidden * f, 0.0f), DataType::kFp32));
        const LinearShard fc1{kTokens, kHidden, f}, fc2{kTokens, f, kHidden};
        column_parallel_forward(gemm, comm, fc1, x, w1, h);
        row_parallel_forward(gemm, comm, fc2, h, w2, y);
        row_parallel_backward(gemm, comm, fc2, g, h, w2, dh, dw2);
        column_parallel_backward(gemm, comm, fc1, dh, x, w1, dx, dw1);
        SEXTANT_CUDA_CHECK(cudaStreamSynchronize(comm.stream()));
        out.y_of_rank[r] = from_device(y, kTokens * kHidden, DataType::kBf16);
        if (r == 0) out.dx = from_device(dx, kTokens * kHidden, DataType::kBf16);
        out.dw1[r] = from_device(dw1, f * kHidden, DataType::kFp32);
        out.dw2[r] = from_device(dw2, kHidden * f, DataType::kFp32);
        for (void* p : {static_cast<void*>(x), static_cast<void*>(w1), static_cast<void*>(w2),
                        static_cast<void*>(g), static_cast<void*>(h), static_cast<void*>(y),
                        static_cast<void*>(dh), static_cast<void*>(dx), static_cast<void*>(dw1),
                        static_cast<void*>(dw2)})
          cudaFree(p);
      }
      cudaFree(workspace);
    });
    out.y = out.y_of_rank[0];
    return out;
  }

  double loss(const std::vector<float>& y) const {
    double sum = 0;
    for (std::size_t i = 0; i < y.size(); ++i) sum += static_cast<double>(y[i]) * g_[i];
    return sum;
  }

  static ::testing::AssertionResult close(const std::vector<float>& got, const std::vector<float>& want) {
    double square = 0;
    for (float v : want) square += static_cast<double>(v) * v;
    const double rms = std::sqrt(square / static_cast<double>(want.size()));
    return kernels::testing::all_close(std::vector<double>(got.begin(), got.end()),
                                       std::vector<double>(want.begin(), want.end()),
                                       std::ldexp(1.0, -7), std::ldexp(1.0, -6) * rms);
  }

  std::vector<float> x_, w1_, w2_, g_;
};

TEST_P(ParallelLinearParity, LossAndGradientShardsMatchOneRank) {
  const int tp = GetParam();
  const int f = kFfn / tp;
  const Results one = run(1);
  const Results many = run(tp);
  for (int r = 0; r < tp; ++r) {
    EXPECT_TRUE(close(many.y_of_rank[r], one.y)) << "Y on rank " << r;
    EXPECT_TRUE(close(many.dw1[r], rows(one.dw1[0], kHidden, r * f, f))) << "dW1 shard of rank " << r;
    EXPECT_TRUE(close(many.dw2[r], columns(one.dw2[0], kFfn, r * f, f))) << "dW2 shard of rank " << r;
  }
  EXPECT_TRUE(close(many.dx, one.dx)) << "dX";
  // L = Σ Y⊙G over N = 256·512 terms, Y and G of rms 1. Y's extra roundings
  // differ by about 2^-9/√3·√3 ≈ 0.002 per element, of random sign, so L by
  // about √N·0.002 ≈ 0.72: allow 4.0 (5.5 of those) plus 1e-3 of |L|.
  EXPECT_NEAR(loss(many.y), loss(one.y), 4.0 + 1e-3 * std::abs(loss(one.y)));
}

INSTANTIATE_TEST_SUITE_P(TensorParallel, ParallelLinearParity, ::testing::Values(2, 4),
                         [](const auto& info) { return "tp" + std::to_string(info.param); });

}  // namespace
}  // namespace sextant::engine::tensor_parallel
