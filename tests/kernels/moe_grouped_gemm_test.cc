// The experts' grouped GEMMs (both backends) against double-precision CPU
// products of the same bf16 inputs, expert by expert: forward, input gradient and
// weight gradient, with empty experts, one token, and every token on one expert.
//
// Tolerances, per element (as tests/kernels/gemm_cublaslt_test.cc argues them):
// - bf16 outputs: 1e-2 relative (one rounding, <= 2^-9) plus K 2^-23 sum_k |a b|
//   for fp32 accumulation in any order, which is what remains where the sum cancels.
// - fp32 weight gradient accumulated onto C0 (beta 1), cuBLASLt loop: no relative
//   term, (K + 2) 2^-23 (sum |a b| + |C0|).
// - the same through the cuBLAS grouped backend, which rounds each product to bf16
//   before adding it (its grouped GEMM has no fp32 output): 2^-8 sum |a b| more.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <ostream>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "kernels/cuda_check.h"
#include "kernels/moe_grouped_gemm.h"
#include "tests/kernels/gpu_test_support.h"

namespace sextant::kernels {
namespace {

using testing::all_close;
using testing::DeviceBuffer;
using testing::to_double;

struct Case {
  const char* name;
  std::vector<std::int32_t> rows;  // per expert
  int in, out;
};

struct Param {
  MoeGemmBackend backend;
  Case shape;
};

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  return std::string(info.param.backend == MoeGemmBackend::kCublasGrouped ? "Grouped_" : "LtLoop_") +
         info.param.shape.name;
}
void PrintTo(const Param& p, std::ostream* os) { *os << to_string(p.backend) << " " << p.shape.name; }

// sum_k a(i, k) b(k, j) and sum_k |a b| for one expert's product, the operands
// given as accessors (row-major storage, any transposition).
struct Product {
  std::vector<double> c, abs_sum;
};

template <typename A, typename B>
Product multiply(int m, int n, int k, A a, B b) {
  Product p{std::vector<double>(static_cast<std::size_t>(m) * n, 0.0),
            std::vector<double>(static_cast<std::size_t>(m) * n, 0.0)};
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double sum = 0, abs_sum = 0;
      for (int q = 0; q < k; ++q) {
        const double v = a(i, q) * b(q, j);
        sum += v;
        abs_sum += std::abs(v);
      }
      p.c[static_cast<std::size_t>(i) * n + j] = sum;
      p.abs_sum[static_cast<std::size_t>(i) * n + j] = abs_sum;
    }
  return p;
}

class MoeGroupedGemmTest : public testing::GpuTestWithParam<Param> {
 protected:
  void SetUp() override {
    GpuTestWithParam<Param>::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    const Case& c = GetParam().shape;
    const std::size_t bytes = MoeGroupedGemm::workspace_bytes(static_cast<int>(c.rows.size()));
    workspace_ = std::make_unique<DeviceBuffer<char>>(bytes);
    gemm_ = std::make_unique<MoeGroupedGemm>(GetParam().backend, static_cast<int>(c.rows.size()), workspace_->get(),
                                             bytes);
    total_rows_ = std::accumulate(c.rows.begin(), c.rows.end(), std::int64_t{0});
    starts_.assign(c.rows.size(), 0);  // expert e's first row
    for (std::size_t e = 1; e < c.rows.size(); ++e) starts_[e] = starts_[e - 1] + c.rows[e - 1];
  }
  void TearDown() override {
    gemm_.reset();
    workspace_.reset();
    GpuTestWithParam<Param>::TearDown();
  }
  std::size_t weights() const {
    const Case& c = GetParam().shape;
    return c.rows.size() * static_cast<std::size_t>(c.out) * c.in;
  }
  std::unique_ptr<DeviceBuffer<char>> workspace_;
  std::unique_ptr<MoeGroupedGemm> gemm_;
  std::int64_t total_rows_ = 0;
  std::vector<std::int64_t> starts_;
};

// Every expert's reference product, in expert order, and each element's sum |a b|
// times K 2^-23 (the fp32 accumulation bound), for operands in the row-major
// layouts kernels/moe_grouped_gemm.h gives them.
struct Expected {
  std::vector<double> c, accumulation_bound, abs_sum;
};

class MoeGroupedGemmReference {
 public:
  MoeGroupedGemmReference(const Case& c, const std::vector<std::int64_t>& starts) : c_(c), starts_(starts) {}

  // Y_e = X_e W_e^T
  Expected forward(const std::vector<Bf16>& x, const std::vector<Bf16>& w) const {
    return per_expert([&](int e) {
      const std::size_t x0 = row0(e) * c_.in, w0 = weight0(e);
      return std::pair{multiply(c_.rows[e], c_.out, c_.in, [&](int i, int q) { return at(x, x0 + i * in() + q); },
                                [&](int q, int j) { return at(w, w0 + j * in() + q); }),
                       c_.in};
    });
  }
  // dX_e = dY_e W_e
  Expected input_gradient(const std::vector<Bf16>& dy, const std::vector<Bf16>& w) const {
    return per_expert([&](int e) {
      const std::size_t y0 = row0(e) * c_.out, w0 = weight0(e);
      return std::pair{multiply(c_.rows[e], c_.in, c_.out, [&](int i, int q) { return at(dy, y0 + i * out() + q); },
                                [&](int q, int j) { return at(w, w0 + q * in() + j); }),
                       c_.out};
    });
  }
  // dW_e = dY_e^T X_e
  Expected weight_gradient(const std::vector<Bf16>& dy, const std::vector<Bf16>& x) const {
    return per_expert([&](int e) {
      const std::size_t y0 = row0(e) * c_.out, x0 = row0(e) * c_.in;
      return std::pair{multiply(c_.out, c_.in, c_.rows[e], [&](int i, int q) { return at(dy, y0 + q * out() + i); },
                                [&](int q, int j) { return at(x, x0 + q * in() + j); }),
                       c_.rows[e]};
    });
  }

 private:
  static double at(const std::vector<Bf16>& v, std::size_t i) { return to_float(v[i]); }
  std::size_t row0(int e) const { return static_cast<std::size_t>(starts_[e]); }
  std::size_t weight0(int e) const { return static_cast<std::size_t>(e) * c_.out * c_.in; }
  std::size_t in() const { return static_cast<std::size_t>(c_.in); }
  std::size_t out() const { return static_cast<std::size_t>(c_.out); }

  template <typename ExpertProduct>
  Expected per_expert(ExpertProduct product) const {
    Expected x;
    for (int e = 0; e < static_cast<int>(c_.rows.size()); ++e) {
      const auto [p, k] = product(e);
      x.c.insert(x.c.end(), p.c.begin(), p.c.end());
      x.abs_sum.insert(x.abs_sum.end(), p.abs_sum.begin(), p.abs_sum.end());
      for (double a : p.abs_sum) x.accumulation_bound.push_back(k * std::ldexp(a, -23));
    }
    return x;
  }

  const Case& c_;
  const std::vector<std::int64_t>& starts_;
};

TEST_P(MoeGroupedGemmTest, ForwardMatchesReference) {
  const Case& c = GetParam().shape;
  const auto x = testing::random_bf16(rng(), static_cast<std::size_t>(total_rows_) * c.in, 0.0, 1.0);
  const auto w = testing::random_bf16(rng(), weights(), 0.0, 1.0);
  DeviceBuffer<Bf16> d_x(x), d_w(w), d_y(static_cast<std::size_t>(total_rows_) * c.out);

  gemm_->forward(d_y.get(), d_x.get(), d_w.get(), c.rows, c.in, c.out, nullptr);

  const Expected want = MoeGroupedGemmReference(c, starts_).forward(x, w);
  EXPECT_TRUE(all_close(to_double(d_y.download()), want.c, 1e-2, want.accumulation_bound));
}

TEST_P(MoeGroupedGemmTest, InputGradientMatchesReference) {
  const Case& c = GetParam().shape;
  const auto dy = testing::random_bf16(rng(), static_cast<std::size_t>(total_rows_) * c.out, 0.0, 1.0);
  const auto w = testing::random_bf16(rng(), weights(), 0.0, 1.0);
  DeviceBuffer<Bf16> d_dy(dy), d_w(w), d_dx(static_cast<std::size_t>(total_rows_) * c.in);

  gemm_->backward_input(d_dx.get(), d_dy.get(), d_w.get(), c.rows, c.in, c.out, nullptr);

  const Expected want = MoeGroupedGemmReference(c, starts_).input_gradient(dy, w);
  EXPECT_TRUE(all_close(to_double(d_dx.download()), want.c, 1e-2, want.accumulation_bound));
}

// dW_e += dY_e^T X_e onto a random fp32 C0; an empty expert's block keeps C0 exactly.
TEST_P(MoeGroupedGemmTest, Fp32WeightGradientAccumulates) {
  const Case& c = GetParam().shape;
  const bool staged = GetParam().backend == MoeGemmBackend::kCublasGrouped;
  const auto dy = testing::random_bf16(rng(), static_cast<std::size_t>(total_rows_) * c.out, 0.0, 1.0);
  const auto x = testing::random_bf16(rng(), static_cast<std::size_t>(total_rows_) * c.in, 0.0, 1.0);
  const auto c0 = testing::random_float(rng(), weights(), 0.0, 10.0);
  DeviceBuffer<Bf16> d_dy(dy), d_x(x), d_staging(staged ? weights() : 0);
  DeviceBuffer<float> d_dw(c0);

  gemm_->backward_weight(d_dw.get(), GemmOutput::kFp32, 1.0f, d_dy.get(), d_x.get(), c.rows, c.in, c.out,
                         d_staging.get(), nullptr);

  const Expected product = MoeGroupedGemmReference(c, starts_).weight_gradient(dy, x);
  std::vector<double> want(weights()), atol(weights());
  for (std::size_t i = 0; i < weights(); ++i) {
    const int k = c.rows[i / (static_cast<std::size_t>(c.out) * c.in)];
    want[i] = c0[i] + product.c[i];
    atol[i] = (k + 2) * std::ldexp(product.abs_sum[i] + std::abs(c0[i]), -23) +
              (staged ? std::ldexp(product.abs_sum[i], -8) : 0.0);
  }
  const std::vector<float> got = d_dw.download();
  EXPECT_TRUE(all_close(to_double(got), want, 0.0, atol));
  for (std::size_t i = 0; i < weights(); ++i) {
    if (c.rows[i / (static_cast<std::size_t>(c.out) * c.in)] == 0) {
      ASSERT_EQ(got[i], c0[i]) << "an empty expert changed";
    }
  }
}

// fp32 weight gradient written (beta 0, the first micro-batch's) over NaN: an
// empty expert's block becomes exactly zero, the others the product.
TEST_P(MoeGroupedGemmTest, Fp32WeightGradientWrites) {
  const Case& c = GetParam().shape;
  const bool staged = GetParam().backend == MoeGemmBackend::kCublasGrouped;
  const auto dy = testing::random_bf16(rng(), static_cast<std::size_t>(total_rows_) * c.out, 0.0, 1.0);
  const auto x = testing::random_bf16(rng(), static_cast<std::size_t>(total_rows_) * c.in, 0.0, 1.0);
  // The staging holds NaN too: an empty expert's staging must not be read.
  DeviceBuffer<Bf16> d_dy(dy), d_x(x), d_staging(std::vector<Bf16>(staged ? weights() : 0, Bf16{0x7fc0}));
  DeviceBuffer<float> d_dw(std::vector<float>(weights(), std::nanf("")));

  gemm_->backward_weight(d_dw.get(), GemmOutput::kFp32, 0.0f, d_dy.get(), d_x.get(), c.rows, c.in, c.out,
                         d_staging.get(), nullptr);

  const Expected product = MoeGroupedGemmReference(c, starts_).weight_gradient(dy, x);
  std::vector<double> atol(weights());
  for (std::size_t i = 0; i < weights(); ++i) {
    const int k = c.rows[i / (static_cast<std::size_t>(c.out) * c.in)];
    atol[i] = (k + 2) * std::ldexp(product.abs_sum[i], -23) + (staged ? std::ldexp(product.abs_sum[i], -8) : 0.0);
  }
  const std::vector<float> got = d_dw.download();
  EXPECT_TRUE(all_close(to_double(got), product.c, 0.0, atol));
  for (std::size_t i = 0; i < weights(); ++i) {
    if (c.rows[i / (static_cast<std::size_t>(c.out) * c.in)] == 0) {
      ASSERT_EQ(got[i], 0.0f) << "an empty expert's gradient at element " << i << " is not zero";
    }
  }
}

// bf16 weight gradient written (beta 0) over NaN: an empty expert's block becomes zero.
TEST_P(MoeGroupedGemmTest, Bf16WeightGradientWrites) {
  const Case& c = GetParam().shape;
  const auto dy = testing::random_bf16(rng(), static_cast<std::size_t>(total_rows_) * c.out, 0.0, 1.0);
  const auto x = testing::random_bf16(rng(), static_cast<std::size_t>(total_rows_) * c.in, 0.0, 1.0);
  DeviceBuffer<Bf16> d_dy(dy), d_x(x), d_dw(std::vector<Bf16>(weights(), Bf16{0x7fc0}));

  gemm_->backward_weight(d_dw.get(), GemmOutput::kBf16, 0.0f, d_dy.get(), d_x.get(), c.rows, c.in, c.out, nullptr,
                         nullptr);

  const Expected want = MoeGroupedGemmReference(c, starts_).weight_gradient(dy, x);
  EXPECT_TRUE(all_close(to_double(d_dw.download()), want.c, 1e-2, want.accumulation_bound));
}

const std::vector<Case>& cases() {
  static const std::vector<Case> all = {
      // empty experts first, in the middle and last; a single row; a block of 128
      {"EmptyAndSmallExperts", {0, 1, 37, 0, 128, 0}, 64, 96},
      // every token on one expert of four
      {"AllTokensToOneExpert", {0, 0, 300, 0}, 128, 64},
      // one token, one expert
      {"OneToken", {1}, 256, 128},
      // 16 fine-grained experts of uneven load, hidden 256, expert FFN 2 x 96 (SwiGLU fc1)
      {"SixteenUneven", {5, 0, 17, 64, 3, 0, 9, 40, 1, 0, 22, 8, 0, 31, 2, 6}, 256, 192},
      // more experts with rows (75) than one batch of pointers (64): 100 experts of 0..3 rows
      {"HundredExperts", [] {
         std::vector<std::int32_t> r(100);
         for (int e = 0; e < 100; ++e) r[e] = e % 4;
         return r;
       }(), 64, 32},
      // no rows at all: nothing to multiply, weight gradients zeroed or kept
      {"NoRows", {0, 0, 0}, 32, 16},
      // more experts (1100) than one mask of empty experts (1024, kernels/moe_grouped_gemm.cu):
      // every fifth empty, the rest 1..3 rows, so both masks have empty and busy experts
      {"ElevenHundredExperts", [] {
         std::vector<std::int32_t> r(1100);
         for (int e = 0; e < 1100; ++e) r[e] = e % 5 == 0 ? 0 : 1 + e % 3;
         return r;
       }(), 16, 8},
  };
  return all;
}

std::vector<Param> params() {
  std::vector<Param> out;
  for (MoeGemmBackend b : {MoeGemmBackend::kCublasGrouped, MoeGemmBackend::kCublasLtLoop})
    for (const Case& c : cases()) out.push_back({b, c});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Backends, MoeGroupedGemmTest, ::testing::ValuesIn(params()), param_name);

class MoeGroupedGemmArgumentsTest : public testing::GpuTest {};

TEST_F(MoeGroupedGemmArgumentsTest, NameWhatIsWrong) {
  const std::size_t bytes = MoeGroupedGemm::workspace_bytes(2);
  DeviceBuffer<char> workspace(bytes);
  DeviceBuffer<Bf16> buffer(1024);
  MoeGroupedGemm gemm(MoeGemmBackend::kCublasGrouped, 2, workspace.get(), bytes);
  const std::vector<std::int32_t> three = {1, 2, 3};
  try {
    gemm.forward(buffer.get(), buffer.get(), buffer.get(), three, 8, 8, nullptr);
    FAIL() << "three experts on an object for two were accepted";
  } catch (const KernelArgumentError& e) {
    EXPECT_STREQ(e.what(), "MoeGroupedGemm::forward: experts (3) must be in [1, max_experts (2)]");
  }
  const std::vector<std::int32_t> two = {1, 2};
  EXPECT_THROW(gemm.forward(buffer.get(), buffer.get(), buffer.get(), two, 12, 8, nullptr), KernelArgumentError)
      << "in 12 is not a multiple of 8";
  EXPECT_THROW(gemm.backward_weight(buffer.get(), GemmOutput::kFp32, 1.0f, buffer.get(), buffer.get(), two, 8, 8,
                                    nullptr, nullptr),
               KernelArgumentError)
      << "an fp32 weight gradient through the grouped backend without staging";
}

}  // namespace
}  // namespace sextant::kernels
