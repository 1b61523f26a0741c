// qkv_split and qkv_merge_gradients against a double-precision CPU reference
// of the rotate-half RoPE (Su et al. 2021, eq. 34). Tolerances: rtol 1e-2,
// atol 2e-3 for bf16 outputs (fp32 angle t * theta^(-2i/d) is off by at most
// ~t * 2^-24 rad, 5e-4 at t = 8191, times |x| <= ~4; then one bf16 rounding);
// V must be copied bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kernels/qkv_layout.h"
#include "tests/kernels/gpu_test_support.h"

namespace sextant::kernels {
namespace {

using testing::all_close;
using testing::DeviceBuffer;
using testing::to_double;

struct Case {
  int batch, seq, heads, kv_heads, head_dim;
  bool rotary;
};

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  const Case& c = info.param;
  return "b" + std::to_string(c.batch) + "_s" + std::to_string(c.seq) + "_h" + std::to_string(c.heads) +
         "_kv" + std::to_string(c.kv_heads) + "_d" + std::to_string(c.head_dim) +
         (c.rotary ? "_rope" : "_plain");
}

QkvShape shape_of(const Case& c) {
  QkvShape s;
  s.batch = c.batch;
  s.seq = c.seq;
  s.heads = c.heads;
  s.kv_heads = c.kv_heads;
  s.head_dim = c.head_dim;
  s.rotary = c.rotary;
  s.rope_theta = 500000.0f;  // Llama 3's base
  return s;
}

// Rotates one head in place by +angle (sign 1) or -angle (sign -1), in double.
void rotate(std::vector<double>& x, std::size_t first, int d, int position, double theta, double sign) {
  for (int i = 0; i < d / 2; ++i) {
    const double angle = sign * position * std::pow(theta, -2.0 * i / d);
    const double a = x[first + i], b = x[first + i + d / 2];
    x[first + i] = a * std::cos(angle) - b * std::sin(angle);
    x[first + i + d / 2] = b * std::cos(angle) + a * std::sin(angle);
  }
}

class QkvLayoutTest : public testing::GpuTestWithParam<Case> {};

TEST_P(QkvLayoutTest, SplitRotatesQueriesAndKeysAndCopiesValues) {
  const Case& c = GetParam();
  const QkvShape s = shape_of(c);
  const std::size_t tokens = static_cast<std::size_t>(c.batch) * c.seq;
  const int width = (c.heads + 2 * c.kv_heads) * c.head_dim;
  const auto qkv = testing::random_bf16(rng(), tokens * width, 0.0, 1.0);
  DeviceBuffer<Bf16> d_qkv(qkv), d_q(tokens * c.heads * c.head_dim),
      d_k(tokens * c.kv_heads * c.head_dim), d_v(tokens * c.kv_heads * c.head_dim);

  qkv_split(d_q.get(), d_k.get(), d_v.get(), d_qkv.get(), s, nullptr);

  std::vector<double> in = to_double(qkv);
  std::vector<double> want_q, want_k;
  std::vector<Bf16> want_v;
  for (std::size_t t = 0; t < tokens; ++t) {
    const int position = static_cast<int>(t % c.seq);
    std::vector<double> row(in.begin() + static_cast<long>(t * width), in.begin() + static_cast<long>((t + 1) * width));
    if (c.rotary)
      for (int h = 0; h < c.heads + c.kv_heads; ++h)
        rotate(row, static_cast<std::size_t>(h) * c.head_dim, c.head_dim, position, s.rope_theta, 1.0);
    const std::size_t q_width = static_cast<std::size_t>(c.heads) * c.head_dim;
    const std::size_t kv_width = static_cast<std::size_t>(c.kv_heads) * c.head_dim;
    want_q.insert(want_q.end(), row.begin(), row.begin() + static_cast<long>(q_width));
    want_k.insert(want_k.end(), row.begin() + static_cast<long>(q_width), row.begin() + static_cast<long>(q_width + kv_width));
    want_v.insert(want_v.end(), qkv.begin() + static_cast<long>(t * width + q_width + kv_width),
                  qkv.begin() + static_cast<long>((t + 1) * width));
  }
  EXPECT_TRUE(all_close(to_double(d_q.download()), want_q, 1e-2, 2e-3));
  EXPECT_TRUE(all_close(to_double(d_k.download()), want_k, 1e-2, 2e-3));
  const std::vector<Bf16> got_v = d_v.download();
  for (std::size_t i = 0; i < got_v.size(); ++i) ASSERT_EQ(got_v[i].bits, want_v[i].bits) << i;
}

TEST_P(QkvLayoutTest, MergeIsTheTransposeOfSplit) {
  // The backward of a rotation is the rotation by the opposite angle: with
  // gradients dq, dk, dv, merge must give R(-angle) dq, R(-angle) dk, dv in place.
  const Case& c = GetParam();
  const QkvShape s = shape_of(c);
  const std::size_t tokens = static_cast<std::size_t>(c.batch) * c.seq;
  const int width = (c.heads + 2 * c.kv_heads) * c.head_dim;
  const std::size_t nq = tokens * c.heads * c.head_dim, nkv = tokens * c.kv_heads * c.head_dim;
  const auto dq = testing::random_bf16(rng(), nq, 0.0, 1.0);
  const auto dk = testing::random_bf16(rng(), nkv, 0.0, 1.0);
  const auto dv = testing::random_bf16(rng(), nkv, 0.0, 1.0);
  DeviceBuffer<Bf16> d_dq(dq), d_dk(dk), d_dv(dv), d_dqkv(tokens * width);

  qkv_merge_gradients(d_dqkv.get(), d_dq.get(), d_dk.get(), d_dv.get(), s, nullptr);

  const std::vector<double> q = to_double(dq), k = to_double(dk), v = to_double(dv);
  std::vector<double> want(tokens * width);
  const std::size_t hd = static_cast<std::size_t>(c.head_dim);
  for (std::size_t t = 0; t < tokens; ++t) {
    std::vector<double> row;
    row.insert(row.end(), q.begin() + static_cast<long>(t * c.heads * hd), q.begin() + static_cast<long>((t + 1) * c.heads * hd));
    row.insert(row.end(), k.begin() + static_cast<long>(t * c.kv_heads * hd), k.begin() + static_cast<long>((t + 1) * c.kv_heads * hd));
    row.insert(row.end(), v.begin() + static_cast<long>(t * c.kv_heads * hd), v.begin() + static_cast<long>((t + 1) * c.kv_heads * hd));
    if (c.rotary)
      for (int h = 0; h < c.heads + c.kv_heads; ++h)
        rotate(row, static_cast<std::size_t>(h) * hd, c.head_dim, static_cast<int>(t % c.seq), s.rope_theta, -1.0);
    std::copy(row.begin(), row.end(), want.begin() + static_cast<long>(t * width));
  }
  EXPECT_TRUE(all_close(to_double(d_dqkv.download()), want, 1e-2, 2e-3));
}

INSTANTIATE_TEST_SUITE_P(Shapes, QkvLayoutTest,
                         ::testing::Values(Case{1, 1, 1, 1, 64, true}, Case{2, 40, 2, 1, 64, true},
                                           Case{1, 8192, 4, 2, 128, true}, Case{3, 17, 4, 4, 128, false},
                                           Case{2, 300, 8, 2, 128, true}),
                         case_name);

TEST(QkvLayoutArguments, RejectsHeadDimensionsTheVectorsCannotCover) {
  QkvShape s;
  s.batch = 1;
  s.seq = 4;
  s.heads = 2;
  s.kv_heads = 1;
  s.head_dim = 72;
  EXPECT_NE(qkv_shape_problem(s).find("head_dim (72) must be a positive multiple of 16"), std::string::npos);
  s.head_dim = 64;
  EXPECT_EQ(qkv_shape_problem(s), "");
  EXPECT_THROW(qkv_split(nullptr, nullptr, nullptr, nullptr, QkvShape{}, nullptr), KernelArgumentError);
}

}  // namespace
}  // namespace sextant::kernels
