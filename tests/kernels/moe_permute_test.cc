// Permutation and un-permutation, forward and backward, against double-precision
// CPU references of the definitions in kernels/moe_permute.h, on routing maps
// built here (dropless, with dropped pairs, padded to a capacity or to a
// multiple of 8 rows per expert).
//
// Tolerances:
// - permute forward: exact (a copy).
// - sums over a token's choices (permute backward, unpermute forward), bf16 out:
//   |error| <= 2^-8 |want| + topk 2^-23 sum_j |term_j|: one bf16 rounding (<= 2^-9
//   relative, doubled) after an fp32 sum of topk terms (each addition <= 2^-24 of
//   the running magnitude, doubled), which is what remains where terms cancel.
// - dexpert_out = bf16(w * dout): 2^-8 relative (one fp32 product, one rounding).
// - dtopk_weights, an fp32 dot product over cols: cols 2^-23 sum |dout y| (as the GEMM
//   tests bound fp32 accumulation) plus 1e-6 relative.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <ostream>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda_check.h"
#include "kernels/moe_permute.h"
#include "tests/kernels/gpu_test_support.h"

namespace sextant::kernels {
namespace {

using testing::all_close;
using testing::DeviceBuffer;
using testing::to_double;

struct Case {
  const char* name;
  int tokens, topk, experts, cols;
  int capacity;  // 0: dropless
  bool pad;
  int rows_multiple = 1;  // without pad: each block rounded up to a multiple of this many rows
};

std::string case_name(const ::testing::TestParamInfo<Case>& info) { return info.param.name; }
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }  // for the test list

// A routing map in the layout moe_routing_map writes: expert blocks in order,
// tokens in order within a block; with a capacity, pairs past it dropped (-1).
struct Routing {
  std::vector<std::int32_t> token_rows, kept;
  std::int64_t rows = 0;
};

Routing route(const std::vector<std::int32_t>& ids, const Case& c) {
  Routing r{std::vector<std::int32_t>(ids.size(), -1), std::vector<std::int32_t>(c.experts, 0), 0};
  for (int e = 0; e < c.experts; ++e) {
    const std::int64_t start = r.rows;
    for (std::size_t s = 0; s < ids.size(); ++s)
      if (ids[s] == e && (c.capacity == 0 || r.kept[e] < c.capacity))
        r.token_rows[s] = static_cast<std::int32_t>(start + r.kept[e]++);
    r.rows += c.pad ? c.capacity : (r.kept[e] + c.rows_multiple - 1) / c.rows_multiple * c.rows_multiple;
  }
  return r;
}

class MoePermuteTest : public testing::GpuTestWithParam<Case> {
 protected:
  void SetUp() override {
    GpuTestWithParam<Case>::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    const Case c = GetParam();
    // Distinct experts per token; expert 0 taken first by half the tokens, so a
    // capacity overflows it; expert experts-1 never taken (an empty expert).
    ids_.resize(static_cast<std::size_t>(c.tokens) * c.topk);
    std::vector<int> order(c.experts - 1);
    for (int t = 0; t < c.tokens; ++t) {
      std::iota(order.begin(), order.end(), 0);
      std::shuffle(order.begin(), order.end(), rng());
      if (t % 2 == 0) std::swap(*std::find(order.begin(), order.end(), 0), order[0]);
      for (int j = 0; j < c.topk; ++j) ids_[static_cast<std::size_t>(t) * c.topk + j] = order[j];
    }
    routing_ = route(ids_, c);
    weights_ = testing::random_float(rng(), ids_.size(), 0.5, 0.2);
  }
  Routing routing_;
  std::vector<std::int32_t> ids_;
  std::vector<float> weights_;
};

MoePadding padding(const Case& c, const DeviceBuffer<std::int32_t>& kept) {
  if (c.pad) return MoePadding{kept.get(), c.experts, c.capacity};
  if (c.rows_multiple > 1) return MoePadding{kept.get(), c.experts, 0, c.rows_multiple};
  return MoePadding{};
}

// Rows no pair maps to (padding) must come out zero; the rest as mapped.
std::vector<bool> mapped_rows(const Routing& r) {
  std::vector<bool> mapped(static_cast<std::size_t>(r.rows), false);
  for (std::int32_t row : r.token_rows)
    if (row >= 0) mapped[static_cast<std::size_t>(row)] = true;
  return mapped;
}

// out[t] = sum_j w[t, j] rows[token_rows[t, j]] (w = 1 when `weights` is empty), and
// each element's bound for an fp32 sum of topk terms: topk 2^-23 sum_j |term_j|.
struct ChoiceSums {
  std::vector<double> sum, atol;
};

ChoiceSums choice_sums(const Routing& routing, const Case& c, const std::vector<Bf16>& rows,
                       const std::vector<float>& weights) {
  ChoiceSums out{std::vector<double>(static_cast<std::size_t>(c.tokens) * c.cols, 0.0),
                 std::vector<double>(static_cast<std::size_t>(c.tokens) * c.cols, 0.0)};
  for (std::size_t s = 0; s < routing.token_rows.size(); ++s) {
    const std::int32_t row = routing.token_rows[s];
    if (row < 0) continue;
    const std::size_t t = s / c.topk;
    const double w = weights.empty() ? 1.0 : weights[s];
    for (int col = 0; col < c.cols; ++col) {
      const double term = w * to_float(rows[static_cast<std::size_t>(row) * c.cols + col]);
      out.sum[t * c.cols + col] += term;
      out.atol[t * c.cols + col] += c.topk * std::ldexp(std::abs(term), -23);
    }
  }
  return out;
}

TEST_P(MoePermuteTest, PermuteForwardCopiesEachChoice) {
  const Case c = GetParam();
  const auto x = testing::random_bf16(rng(), static_cast<std::size_t>(c.tokens) * c.cols, 0.0, 1.0);
  // Start from NaN bits, so unwritten rows show.
  DeviceBuffer<Bf16> d_x(x), d_permuted(std::vector<Bf16>(static_cast<std::size_t>(routing_.rows) * c.cols, Bf16{0x7fc0}));
  DeviceBuffer<std::int32_t> d_rows(routing_.token_rows), d_kept(routing_.kept);

  moe_permute_forward(d_permuted.get(), d_x.get(), d_rows.get(), c.tokens, c.topk, c.cols, padding(c, d_kept), nullptr);

  std::vector<std::uint16_t> want(static_cast<std::size_t>(routing_.rows) * c.cols, 0);  // padding: zero
  for (std::size_t s = 0; s < routing_.token_rows.size(); ++s) {
    const std::int32_t row = routing_.token_rows[s];
    if (row < 0) continue;
    const std::size_t t = s / c.topk;
    for (int col = 0; col < c.cols; ++col)
      want[static_cast<std::size_t>(row) * c.cols + col] = x[t * c.cols + col].bits;
  }
  const std::vector<Bf16> got = d_permuted.download();
  std::vector<std::uint16_t> got_bits(got.size());
  for (std::size_t i = 0; i < got.size(); ++i) got_bits[i] = got[i].bits;
  EXPECT_EQ(got_bits, want);
}

TEST_P(MoePermuteTest, PermuteBackwardSumsTheCopies) {
  const Case c = GetParam();
  const auto dpermuted = testing::random_bf16(rng(), static_cast<std::size_t>(routing_.rows) * c.cols, 0.0, 1.0);
  DeviceBuffer<Bf16> d_dpermuted(dpermuted), d_dx(static_cast<std::size_t>(c.tokens) * c.cols);
  DeviceBuffer<std::int32_t> d_rows(routing_.token_rows);

  moe_permute_backward(d_dx.get(), d_dpermuted.get(), d_rows.get(), c.tokens, c.topk, c.cols, nullptr);

  const ChoiceSums want = choice_sums(routing_, c, dpermuted, {});
  EXPECT_TRUE(all_close(to_double(d_dx.download()), want.sum, std::ldexp(1.0, -8), want.atol));
}

TEST_P(MoePermuteTest, UnpermuteForwardSumsWeightedRows) {
  const Case c = GetParam();
  const auto expert_out = testing::random_bf16(rng(), static_cast<std::size_t>(routing_.rows) * c.cols, 0.0, 1.0);
  DeviceBuffer<Bf16> d_expert_out(expert_out), d_out(static_cast<std::size_t>(c.tokens) * c.cols);
  DeviceBuffer<float> d_weights(weights_);
  DeviceBuffer<std::int32_t> d_rows(routing_.token_rows);

  moe_unpermute_forward(d_out.get(), d_expert_out.get(), d_weights.get(), d_rows.get(), c.tokens, c.topk, c.cols,
                        nullptr);

  const ChoiceSums want = choice_sums(routing_, c, expert_out, weights_);
  EXPECT_TRUE(all_close(to_double(d_out.download()), want.sum, std::ldexp(1.0, -8), want.atol));
}

// The MoE block's residual add rides on the un-permutation: out = residual + sum,
// rounded once, the residual's row alone for a token whose choices all dropped.
TEST_P(MoePermuteTest, UnpermuteForwardAddsTheResidual) {
  const Case c = GetParam();
  const auto expert_out = testing::random_bf16(rng(), static_cast<std::size_t>(routing_.rows) * c.cols, 0.0, 1.0);
  const auto residual = testing::random_bf16(rng(), static_cast<std::size_t>(c.tokens) * c.cols, 0.0, 1.0);
  DeviceBuffer<Bf16> d_expert_out(expert_out), d_out(residual);  // in place: out aliases the residual
  DeviceBuffer<float> d_weights(weights_);
  DeviceBuffer<std::int32_t> d_rows(routing_.token_rows);

  moe_unpermute_forward(d_out.get(), d_expert_out.get(), d_weights.get(), d_rows.get(), c.tokens, c.topk, c.cols,
                        nullptr, d_out.get());

  ChoiceSums want = choice_sums(routing_, c, expert_out, weights_);
  for (std::size_t i = 0; i < want.sum.size(); ++i) {
    const double r = to_float(residual[i]);
    want.sum[i] += r;
    want.atol[i] += std::ldexp(std::abs(r), -8);
  }
  EXPECT_TRUE(all_close(to_double(d_out.download()), want.sum, std::ldexp(1.0, -8), want.atol));
}

TEST_P(MoePermuteTest, UnpermuteBackwardGivesRowAndWeightGradients) {
  const Case c = GetParam();
  const auto expert_out = testing::random_bf16(rng(), static_cast<std::size_t>(routing_.rows) * c.cols, 0.0, 1.0);
  const auto dout = testing::random_bf16(rng(), static_cast<std::size_t>(c.tokens) * c.cols, 0.0, 1.0);
  DeviceBuffer<Bf16> d_expert_out(expert_out), d_dout(dout),
      d_dexpert_out(std::vector<Bf16>(static_cast<std::size_t>(routing_.rows) * c.cols, Bf16{0x7fc0}));
  DeviceBuffer<float> d_weights(weights_), d_dweights(std::vector<float>(weights_.size(), NAN));
  DeviceBuffer<std::int32_t> d_rows(routing_.token_rows), d_kept(routing_.kept);

  moe_unpermute_backward(d_dexpert_out.get(), d_dweights.get(), d_dout.get(), d_expert_out.get(), d_weights.get(),
                         d_rows.get(), c.tokens, c.topk, c.cols, padding(c, d_kept), nullptr);

  std::vector<double> want_rows(static_cast<std::size_t>(routing_.rows) * c.cols, 0.0);
  std::vector<double> want_dw(weights_.size(), 0.0), atol_dw(weights_.size(), 0.0);
  for (std::size_t s = 0; s < routing_.token_rows.size(); ++s) {
    const std::int32_t row = routing_.token_rows[s];
    if (row < 0) continue;  // dropped: no row, dw = 0
    const std::size_t t = s / c.topk;
    for (int col = 0; col < c.cols; ++col) {
      const double g = to_float(dout[t * c.cols + col]);
      const double y = to_float(expert_out[static_cast<std::size_t>(row) * c.cols + col]);
      want_rows[static_cast<std::size_t>(row) * c.cols + col] = weights_[s] * g;
      want_dw[s] += g * y;
      atol_dw[s] += c.cols * std::ldexp(std::abs(g * y), -23);
    }
  }
  const std::vector<double> got_rows = to_double(d_dexpert_out.download());
  const std::vector<bool> mapped = mapped_rows(routing_);
  if (c.pad) {  // padding rows: exactly zero (they started as NaN)
    for (std::size_t r = 0; r < mapped.size(); ++r) {
      if (mapped[r]) continue;
      for (int col = 0; col < c.cols; ++col) {
        ASSERT_EQ(got_rows[r * c.cols + col], 0.0) << "padding row " << r;
      }
    }
  }
  std::vector<double> got_mapped, want_mapped;
  for (std::size_t r = 0; r < mapped.size(); ++r)
    if (mapped[r])
      for (int col = 0; col < c.cols; ++col) {
        got_mapped.push_back(got_rows[r * c.cols + col]);
        want_mapped.push_back(want_rows[r * c.cols + col]);
      }
  EXPECT_TRUE(all_close(got_mapped, want_mapped, std::ldexp(1.0, -8), 0.0)) << "dexpert_out";
  EXPECT_TRUE(all_close(to_double(d_dweights.download()), want_dw, 1e-6, atol_dw)) << "dtopk_weights";
}

// Mixtral-like (top-2 of 8, hidden 1024); fine-grained (top-8 of 64, hidden 512);
// one token; capacity overflow with drops (capacity 40 of 200 x 2 / 8 = 50 per
// expert on average: expert 0, the first choice of half the tokens, drops ~60);
// the same padded to the capacity; cols 8 (one vector) and 2056 (not a multiple of
// the block's 1024 columns).
INSTANTIATE_TEST_SUITE_P(
    Maps, MoePermuteTest,
    ::testing::Values(Case{"MixtralTop2Dropless", 257, 2, 8, 1024, 0, false},
                      Case{"FineTop8Of64", 128, 8, 64, 512, 0, false},
                      Case{"OneToken", 1, 2, 8, 64, 0, false},
                      Case{"CapacityDrops", 200, 2, 8, 2056, 40, false},
                      Case{"CapacityPadded", 200, 2, 8, 136, 40, true},
                      Case{"OneVectorRows", 50, 3, 6, 8, 0, false},
                      Case{"RowsMultipleOf8", 257, 2, 8, 1024, 0, false, 8},
                      Case{"RowsMultipleOf8Top8Of64", 129, 8, 64, 512, 0, false, 8},
                      Case{"RowsMultipleOf8WithDrops", 200, 2, 8, 136, 41, false, 8}),
    case_name);

TEST(MoePermuteArguments, NameWhatIsWrong) {
  alignas(16) Bf16 row[8];
  std::int32_t map = 0;
  try {
    moe_permute_forward(row, row, &map, 1, 1, 12, MoePadding{}, nullptr);
    FAIL() << "cols 12 was accepted";
  } catch (const KernelArgumentError& e) {
    EXPECT_STREQ(e.what(), "moe_permute_forward: cols (12) must be a positive multiple of 8 (16-byte vectors)");
  }
  EXPECT_THROW(moe_unpermute_forward(row, row, nullptr, &map, 1, 1, 8, nullptr), KernelArgumentError)
      << "no weights";
}

}  // namespace
}  // namespace sextant::kernels
