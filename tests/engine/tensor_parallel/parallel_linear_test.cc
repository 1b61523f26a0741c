// Tensor-parallel parity: a column-parallel linear followed by a row-parallel
// one (an MLP without its activation: H = X·W1ᵀ, Y = H·W2ᵀ), run at tp = 2 and
// tp = 4, with and without sequence parallelism (and with it, with
// tp_comm_overlap's chunked collectives), on the in-process communicator,
// against the same code at tp = 1 — the model's own layers
// (engine/tensor_parallel/parallel_linear.h) and the collectives the Plan's
// tasks around a block run (collectives.h, sequence_parallel.h), in the
// model's order, each rank's GEMMs on a compute stream of its own. The
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
#include <tuple>

#include "engine/comm/communicator.h"
#include "engine/tensor_parallel/collectives.h"
#include "engine/tensor_parallel/sequence_parallel.h"
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

// What each rank ends with: Y and dX (whole, or the rank's token shard under
// sp), and its weight-gradient shards.
struct Results {
  std::vector<std::vector<float>> y, dx;  // per rank
  std::vector<std::vector<float>> dw1;    // per rank: (ffn/tp, hidden)
  std::vector<std::vector<float>> dw2;    // per rank: (hidden, ffn/tp)
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

// (tp, sequence parallelism, tp_comm_overlap)
class ParallelLinearParity : public kernels::testing::GpuTestWithParam<std::tuple<int, bool, bool>> {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    if (IsSkipped() || HasFailure()) return;
    x_ = random_values(rng(), kTokens * kHidden, 1.0);
    w1_ = random_values(rng(), kFfn * kHidden, 1.0 / std::sqrt(kHidden));
    w2_ = random_values(rng(), kHidden * kFfn, 1.0 / std::sqrt(kFfn));
    g_ = random_values(rng(), kTokens * kHidden, 1.0);
  }

  // `overlap`: under sp, tp_comm_overlap's chunked all-gathers and reduce-scatter.
  Results run(int tp, bool sp, bool overlap = false) {
    Results out;
    out.y.resize(tp), out.dx.resize(tp), out.dw1.resize(tp), out.dw2.resize(tp);
    const int f = kFfn / tp, shard = kTokens / tp;
    run_in_process(tp, [&](int r, Communicator& comm) {
      std::vector<void*> owned;
      auto bf16 = [&](const std::vector<float>& values) {
        owned.push_back(to_device(values, DataType::kBf16));
        return static_cast<kernels::Bf16*>(owned.back());
      };
      auto bf16_zeros = [&](std::size_t n) { return bf16(std::vector<float>(n)); };
      auto fp32_zeros = [&](std::size_t n) {
        owned.push_back(to_device(std::vector<float>(n), DataType::kFp32));
        return static_cast<float*>(owned.back());
      };
      void* workspace = nullptr;
      SEXTANT_CUDA_CHECK(cudaMalloc(&workspace, kernels::kCublasLtWorkspaceBytes));
      owned.push_back(workspace);
      cudaStream_t compute = nullptr;
      SEXTANT_CUDA_CHECK(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking));
      {
        kernels::CublasLtGemm gemm(workspace, kernels::kCublasLtWorkspaceBytes);
        Collectives group(comm, compute);
        SequenceParallel sequence_parallel(static_cast<std::size_t>(shard) * kHidden);
        LinearRuntime runtime;
        runtime.gemm = &gemm;
        runtime.stream = compute;
        runtime.accumulate_gradients = true;  // dW (+)= on zeros
        runtime.group = &group;
        kernels::Bf16* w1 = bf16(rows(w1_, kHidden, r * f, f));       // (f, hidden)
        kernels::Bf16* w2 = bf16(columns(w2_, kFfn, r * f, f));       // (hidden, f)
        kernels::Bf16* h = bf16_zeros(static_cast<std::size_t>(kTokens) * f);      // (tokens, f)
        kernels::Bf16* dh = bf16_zeros(static_cast<std::size_t>(kTokens) * f);
        float* dw1 = fp32_zeros(static_cast<std::size_t>(f) * kHidden);
        float* dw2 = fp32_zeros(static_cast<std::size_t>(kHidden) * f);
        const LinearParameters fc1{w1, nullptr, dw1, nullptr, kHidden, f};
        const LinearParameters fc2{w2, nullptr, dw2, nullptr, f, kHidden};
        ColumnParallelLinear column(runtime, kTokens);
        RowParallelLinear row(runtime, kTokens);
        const std::size_t y_rows = sp ? shard : kTokens;
        kernels::Bf16* y = bf16_zeros(y_rows * kHidden);
        kernels::Bf16* dx = bf16_zeros(y_rows * kHidden);
        if (!sp) {
          kernels::Bf16* x = bf16(x_);
          kernels::Bf16* g = bf16(g_);
          column.forward(column.forward_args(h, x, fc1));
          row.forward(y, h, fc2, nullptr);
          group.all_reduce(y, std::size_t{kTokens} * kHidden);  // the all-reduce task after the block
          row.backward(dh, g, h, fc2);
          column.backward(dx, dh, x, fc1);
          group.all_reduce(dx, std::size_t{kTokens} * kHidden);
        } else {
          // Each rank holds tokens [r·shard, (r+1)·shard) of X, Y, G and dX.
          kernels::Bf16* x_shard = bf16(rows(x_, kHidden, r * shard, shard));
          kernels::Bf16* g_shard = bf16(rows(g_, kHidden, r * shard, shard));
          SequenceParallel::Buffers& b = sequence_parallel.buffers;
          b.gathered_input = bf16_zeros(std::size_t{kTokens} * kHidden);
          b.gathered_gradient = bf16_zeros(std::size_t{kTokens} * kHidden);
          b.gradient_shard = dx;
          b.staging = bf16_zeros(std::size_t{kTokens} * kHidden);
          kernels::Bf16* full = bf16_zeros(std::size_t{kTokens} * kHidden);  // Y's partial sums, then dX
          sequence_parallel.bind(group, overlap);
          runtime.sequence_parallel = &sequence_parallel;
          // The Plan's order: the all-gather task, the block, the reduce-scatter
          // task; backward the same (sequence_parallel.h).
          sequence_parallel.gather_input(x_shard);
          column.forward(column.forward_args(h, b.gathered_input, fc1));
          row.forward_partial_sums(full, h, fc2);
          sequence_parallel.scatter_output(full, y);
          sequence_parallel.gather_output_gradient(g_shard);
          sequence_parallel.start_input_gather(x_shard);
          row.backward(dh, b.gathered_gradient, h, fc2);
          column.backward(full, dh, b.gathered_input, fc1);
          sequence_parallel.finish_input_gradient_scatter(full);
        }
        SEXTANT_CUDA_CHECK(cudaStreamSynchronize(compute));
        SEXTANT_CUDA_CHECK(cudaStreamSynchronize(comm.stream()));
        out.y[r] = from_device(y, y_rows * kHidden, DataType::kBf16);
        out.dx[r] = from_device(dx, y_rows * kHidden, DataType::kBf16);
        out.dw1[r] = from_device(dw1, static_cast<std::size_t>(f) * kHidden, DataType::kFp32);
        out.dw2[r] = from_device(dw2, static_cast<std::size_t>(kHidden) * f, DataType::kFp32);
      }
      SEXTANT_CUDA_CHECK(cudaStreamDestroy(compute));
      for (void* p : owned) cudaFree(p);
    });
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
  const auto [tp, sp, overlap] = GetParam();
  const int f = kFfn / tp, shard = kTokens / tp;
  const Results one = run(1, false);
  const Results many = run(tp, sp, overlap);
  std::vector<float> y;  // the whole Y, for the loss: rank 0's, or the shards in rank order
  for (int r = 0; r < tp; ++r) {
    // Without sp every rank has all of Y and dX; with sp its token rows.
    const std::vector<float> want_y = sp ? rows(one.y[0], kHidden, r * shard, shard) : one.y[0];
    const std::vector<float> want_dx = sp ? rows(one.dx[0], kHidden, r * shard, shard) : one.dx[0];
    EXPECT_TRUE(close(many.y[r], want_y)) << "Y on rank " << r;
    EXPECT_TRUE(close(many.dx[r], want_dx)) << "dX on rank " << r;
    EXPECT_TRUE(close(many.dw1[r], rows(one.dw1[0], kHidden, r * f, f))) << "dW1 shard of rank " << r;
    EXPECT_TRUE(close(many.dw2[r], columns(one.dw2[0], kFfn, r * f, f))) << "dW2 shard of rank " << r;
    if (sp || r == 0) y.insert(y.end(), many.y[r].begin(), many.y[r].end());
  }
  // L = Σ Y⊙G over N = 256·512 terms, Y and G of rms 1. Y's extra roundings
  // differ by about 2^-9/√3·√3 ≈ 0.002 per element, of random sign, so L by
  // about √N·0.002 ≈ 0.72: allow 4.0 (5.5 of those) plus 1e-3 of |L|.
  EXPECT_NEAR(loss(y), loss(one.y[0]), 4.0 + 1e-3 * std::abs(loss(one.y[0])));
}

INSTANTIATE_TEST_SUITE_P(TensorParallel, ParallelLinearParity,
                         ::testing::Values(std::tuple{2, false, false}, std::tuple{2, true, false},
                                           std::tuple{2, true, true}, std::tuple{4, false, false},
                                           std::tuple{4, true, false}, std::tuple{4, true, true}),
                         [](const auto& info) {
                           return "tp" + std::to_string(std::get<0>(info.param)) +
                                  (std::get<1>(info.param) ? "_sp" : "") +
                                  (std::get<2>(info.param) ? "_overlap" : "");
                         });

}  // namespace
}  // namespace sextant::engine::tensor_parallel
