// cuBLASLt GEMM wrapper against a double-precision CPU product of the same
// bf16 inputs, for every transpose combination and the epilogues.
//
// Tolerance, per element: |error| <= rtol * |want| + K * 2^-23 * sum_k |a_ik b_kj|.
// The second term bounds fp32 accumulation in any order (K roundings of at
// most 2^-24 relative each, doubled for margin); it is what is left where the
// sum cancels to near zero. rtol is 1e-2 for a bf16 output (one rounding,
// <= 2^-9) and 2^-23 for fp32 (the final addition of beta * C).
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "kernels/gemm_cublaslt.h"
#include "tests/kernels/gpu_test_support.h"

namespace sextant::kernels {
namespace {

using testing::all_close;
using testing::DeviceBuffer;
using testing::to_double;

struct Case {
  int m, n, k;
  bool ta, tb;
};

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  const Case& c = info.param;
  return "rows" + std::to_string(c.m) + "_cols" + std::to_string(c.n) + "_k" + std::to_string(c.k) +
         (c.ta ? "_T" : "_N") + (c.tb ? "T" : "N");
}

// C (m, n) = op(A) op(B); also the per-element sum of |products| for the bound.
struct Product {
  std::vector<double> c, abs_sum;
};

Product reference(const std::vector<double>& a, const std::vector<double>& b, const Case& s) {
  Product p{std::vector<double>(static_cast<std::size_t>(s.m) * s.n),
            std::vector<double>(static_cast<std::size_t>(s.m) * s.n)};
  for (int i = 0; i < s.m; ++i)
    for (int j = 0; j < s.n; ++j) {
      double sum = 0, abs_sum = 0;
      for (int q = 0; q < s.k; ++q) {
        const double x = s.ta ? a[static_cast<std::size_t>(q) * s.m + i] : a[static_cast<std::size_t>(i) * s.k + q];
        const double y = s.tb ? b[static_cast<std::size_t>(j) * s.k + q] : b[static_cast<std::size_t>(q) * s.n + j];
        sum += x * y;
        abs_sum += std::abs(x * y);
      }
      p.c[static_cast<std::size_t>(i) * s.n + j] = sum;
      p.abs_sum[static_cast<std::size_t>(i) * s.n + j] = abs_sum;
    }
  return p;
}

// Holds a cuBLASLt handle and its workspace for each test.
class GemmFixture : public testing::GpuTest {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    workspace_ = std::make_unique<DeviceBuffer<char>>(kCublasLtWorkspaceBytes);
    gemm_ = std::make_unique<CublasLtGemm>(workspace_->get(), kCublasLtWorkspaceBytes);
  }
  void TearDown() override {
    gemm_.reset();
    workspace_.reset();
    GpuTest::TearDown();
  }

  GemmArgs args(const Case& s, const DeviceBuffer<Bf16>& a, const DeviceBuffer<Bf16>& b, void* c) {
    GemmArgs g;
    g.m = s.m, g.n = s.n, g.k = s.k;
    g.a = a.get(), g.transpose_a = s.ta ? Transpose::kYes : Transpose::kNo;
    g.b = b.get(), g.transpose_b = s.tb ? Transpose::kYes : Transpose::kNo;
    g.c = c;
    return g;
  }

  std::unique_ptr<DeviceBuffer<char>> workspace_;
  std::unique_ptr<CublasLtGemm> gemm_;
};

class GemmTest : public GemmFixture, public ::testing::WithParamInterface<Case> {};

TEST_P(GemmTest, Bf16OutputMatchesReference) {
  const Case s = GetParam();
  const auto a = testing::random_bf16(rng(), static_cast<std::size_t>(s.m) * s.k, 0.0, 1.0);
  const auto b = testing::random_bf16(rng(), static_cast<std::size_t>(s.k) * s.n, 0.0, 1.0);
  DeviceBuffer<Bf16> d_a(a), d_b(b), d_c(static_cast<std::size_t>(s.m) * s.n);

  gemm_->run(args(s, d_a, d_b, d_c.get()), nullptr);

  Product want = reference(to_double(a), to_double(b), s);
  for (auto& x : want.abs_sum) x *= s.k * std::ldexp(1.0, -23);
  EXPECT_TRUE(all_close(to_double(d_c.download()), want.c, 1e-2, want.abs_sum));
}

TEST_P(GemmTest, Fp32OutputAccumulatesWithBetaOne) {
  const Case s = GetParam();
  const auto a = testing::random_bf16(rng(), static_cast<std::size_t>(s.m) * s.k, 0.0, 1.0);
  const auto b = testing::random_bf16(rng(), static_cast<std::size_t>(s.k) * s.n, 0.0, 1.0);
  const auto c0 = testing::random_float(rng(), static_cast<std::size_t>(s.m) * s.n, 0.0, 10.0);
  DeviceBuffer<Bf16> d_a(a), d_b(b);
  DeviceBuffer<float> d_c(c0);
  GemmArgs g = args(s, d_a, d_b, d_c.get());
  g.c_type = GemmOutput::kFp32;
  g.beta = 1.0f;

  gemm_->run(g, nullptr);

  Product want = reference(to_double(a), to_double(b), s);
  for (std::size_t i = 0; i < want.c.size(); ++i) {
    want.c[i] += c0[i];
    want.abs_sum[i] = (s.k + 2) * std::ldexp(1.0, -23) * (want.abs_sum[i] + std::abs(c0[i]));
  }
  EXPECT_TRUE(all_close(to_double(d_c.download()), want.c, 0.0, want.abs_sum));
}

// The three products of a linear layer (NT forward, NN input gradient, TN
// weight gradient) and TT; sizes that are not multiples of a tile (77, 200,
// 264), and k = 8.
INSTANTIATE_TEST_SUITE_P(
    Shapes, GemmTest,
    ::testing::Values(Case{128, 192, 64, false, true}, Case{77, 264, 320, false, false},
                      Case{256, 200, 512, true, false}, Case{64, 96, 8, true, true},
                      Case{1024, 768, 256, false, true}),
    case_name);

class GemmEpilogueTest : public GemmFixture {};

const double kSqrt2OverPi = 0.7978845608028654;
double gelu(double u) { return 0.5 * u * (1.0 + std::tanh(kSqrt2OverPi * (u + 0.044715 * u * u * u))); }

TEST_F(GemmEpilogueTest, BiasAndBiasGeluWithSavedInput) {
  const Case s{96, 264, 128, false, true};  // a forward linear layer
  const auto a = testing::random_bf16(rng(), static_cast<std::size_t>(s.m) * s.k, 0.0, 0.1);
  const auto b = testing::random_bf16(rng(), static_cast<std::size_t>(s.k) * s.n, 0.0, 0.1);
  const auto bias = testing::random_bf16(rng(), s.n, 0.0, 0.5);
  const std::size_t mn = static_cast<std::size_t>(s.m) * s.n;
  DeviceBuffer<Bf16> d_a(a), d_b(b), d_bias(bias), d_c(mn), d_pre(mn);

  Product want = reference(to_double(a), to_double(b), s);
  std::vector<double> pre(mn), atol(mn), activated(mn);
  for (std::size_t i = 0; i < mn; ++i) {
    pre[i] = want.c[i] + to_float(bias[i % s.n]);
    atol[i] = s.k * std::ldexp(1.0, -23) * want.abs_sum[i];
    activated[i] = gelu(pre[i]);
  }

  GemmArgs g = args(s, d_a, d_b, d_c.get());
  g.epilogue = GemmEpilogue::kBias;
  g.bias = d_bias.get();
  gemm_->run(g, nullptr);
  EXPECT_TRUE(all_close(to_double(d_c.download()), pre, 1e-2, atol)) << "bias";

  g.epilogue = GemmEpilogue::kBiasGelu;
  g.gelu_input = d_pre.get();
  gemm_->run(g, nullptr);
  EXPECT_TRUE(all_close(to_double(d_pre.download()), pre, 1e-2, atol)) << "saved GELU input";
  // GELU's slope is at most 1.13, so the input's error bound carries over; the
  // extra 1e-3 absolute admits cuBLASLt's own GELU approximation (the tanh and
  // erf forms differ by < 5e-4).
  for (auto& x : atol) x = 1.13 * x + 1e-3;
  EXPECT_TRUE(all_close(to_double(d_c.download()), activated, 1e-2, atol)) << "bias + GELU";
}

// A product whose rows (m) or depth (k) change per call, as an MoE expert's
// do: every size matches the reference, and sizes in one power-of-two bucket
// share one problem (one heuristic call) while another bucket makes a second.
TEST_F(GemmFixture, VaryingSizesShareOneAlgorithmPerBucket) {
  for (const VaryingDim dim : {VaryingDim::kM, VaryingDim::kK}) {
    gemm_ = std::make_unique<CublasLtGemm>(workspace_->get(), kCublasLtWorkspaceBytes);
    for (const int size : {130, 200, 256, 97, 300}) {  // buckets 256, 256, 256, 128, 512
      // The forward (NT) with m varying; the weight gradient (TN) with k varying.
      const Case s = dim == VaryingDim::kM ? Case{size, 192, 64, false, true} : Case{96, 128, size, true, false};
      const auto a = testing::random_bf16(rng(), static_cast<std::size_t>(s.m) * s.k, 0.0, 1.0);
      const auto b = testing::random_bf16(rng(), static_cast<std::size_t>(s.k) * s.n, 0.0, 1.0);
      DeviceBuffer<Bf16> d_a(a), d_b(b), d_c(static_cast<std::size_t>(s.m) * s.n);
      GemmArgs g = args(s, d_a, d_b, d_c.get());
      g.varying = dim;
      gemm_->run(g, nullptr);
      Product want = reference(to_double(a), to_double(b), s);
      for (auto& x : want.abs_sum) x *= s.k * std::ldexp(1.0, -23);
      EXPECT_TRUE(all_close(to_double(d_c.download()), want.c, 1e-2, want.abs_sum)) << "size " << size;
    }
    EXPECT_EQ(gemm_->chosen_algorithms().size(), 3u) << "one problem per bucket (128, 256, 512)";
  }
}

TEST(GemmCheck, NamesTheProblem) {
  alignas(16) static Bf16 h[16];
  GemmArgs g;
  g.m = 4, g.n = 4, g.k = 0;
  g.a = h, g.b = h, g.c = h;
  EXPECT_EQ(gemm_check(g), "m and n must be >= 0 and k > 0 (m=4 n=4 k=0)");
  g.k = 4;
  EXPECT_EQ(gemm_check(g), "");
  g.epilogue = GemmEpilogue::kBias;
  EXPECT_EQ(gemm_check(g), "a bias epilogue needs a bias");
  g.bias = h;
  g.c_type = GemmOutput::kFp32;
  EXPECT_EQ(gemm_check(g), "epilogues need a bf16 output (the fp32 output is for weight gradients)");
  g.c_type = GemmOutput::kBf16;
  g.epilogue = GemmEpilogue::kBiasGelu;
  g.gelu_input = h;
  g.n = 12;
  EXPECT_EQ(gemm_check(g),
            "saving gelu_input needs n (12) to be a multiple of 8 (cuBLASLt: the auxiliary "
            "leading dimension)");
}

}  // namespace
}  // namespace sextant::kernels
