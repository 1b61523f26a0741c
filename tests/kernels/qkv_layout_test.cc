// qkv_split and qkv_merge_gradients: bit-exact copies between the fused QKV
// rows and the split Q, K, V arrays, MHA and GQA.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kernels/qkv_layout.h"
#include "tests/kernels/gpu_test_support.h"

namespace sextant::kernels {
namespace {

using testing::DeviceBuffer;

struct Case {
  int batch, seq, heads, kv_heads, head_dim;
};

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  const Case& c = info.param;
  return "b" + std::to_string(c.batch) + "_s" + std::to_string(c.seq) + "_h" + std::to_string(c.heads) +
         "_kv" + std::to_string(c.kv_heads) + "_d" + std::to_string(c.head_dim);
}

QkvShape shape_of(const Case& c) {
  QkvShape s;
  s.batch = c.batch;
  s.seq = c.seq;
  s.heads = c.heads;
  s.kv_heads = c.kv_heads;
  s.head_dim = c.head_dim;
  return s;
}

// Where element i of head h of token t of the split array sits in the fused row.
std::size_t fused_index(const Case& c, std::size_t token, int head_in_row, int i) {
  const std::size_t width = static_cast<std::size_t>(c.heads + 2 * c.kv_heads) * c.head_dim;
  return token * width + static_cast<std::size_t>(head_in_row) * c.head_dim + static_cast<std::size_t>(i);
}

class QkvLayoutTest : public testing::GpuTestWithParam<Case> {};

TEST_P(QkvLayoutTest, SplitThenMergeMovesEveryElementToItsPlace) {
  const Case& c = GetParam();
  const std::size_t tokens = static_cast<std::size_t>(c.batch) * c.seq;
  const std::size_t width = static_cast<std::size_t>(c.heads + 2 * c.kv_heads) * c.head_dim;
  const auto qkv = testing::random_bf16(rng(), tokens * width, 0.0, 1.0);
  const std::size_t nq = tokens * c.heads * c.head_dim, nkv = tokens * c.kv_heads * c.head_dim;
  DeviceBuffer<Bf16> d_qkv(qkv), d_q(nq), d_k(nkv), d_v(nkv), d_merged(tokens * width);

  qkv_split(d_q.get(), d_k.get(), d_v.get(), d_qkv.get(), shape_of(c), nullptr);
  const std::vector<Bf16> q = d_q.download(), k = d_k.download(), v = d_v.download();
  for (std::size_t t = 0; t < tokens; ++t)
    for (int i = 0; i < c.head_dim; ++i) {
      for (int h = 0; h < c.heads; ++h)
        ASSERT_EQ(q[(t * c.heads + h) * c.head_dim + i].bits, qkv[fused_index(c, t, h, i)].bits);
      for (int h = 0; h < c.kv_heads; ++h) {
        ASSERT_EQ(k[(t * c.kv_heads + h) * c.head_dim + i].bits, qkv[fused_index(c, t, c.heads + h, i)].bits);
        ASSERT_EQ(v[(t * c.kv_heads + h) * c.head_dim + i].bits,
                  qkv[fused_index(c, t, c.heads + c.kv_heads + h, i)].bits);
      }
    }

  qkv_merge_gradients(d_merged.get(), d_q.get(), d_k.get(), d_v.get(), shape_of(c), nullptr);
  const std::vector<Bf16> merged = d_merged.download();
  for (std::size_t i = 0; i < merged.size(); ++i) ASSERT_EQ(merged[i].bits, qkv[i].bits) << i;
}

INSTANTIATE_TEST_SUITE_P(Shapes, QkvLayoutTest,
                         ::testing::Values(Case{1, 1, 1, 1, 64}, Case{2, 40, 2, 1, 64},
                                           Case{1, 2048, 16, 16, 128}, Case{3, 17, 8, 2, 128},
                                           Case{2, 33, 32, 32, 80}),
                         case_name);

TEST(QkvLayoutArguments, RejectsHeadDimensionsTheVectorsCannotCover) {
  QkvShape s;
  s.batch = 1;
  s.seq = 4;
  s.heads = 2;
  s.kv_heads = 1;
  s.head_dim = 36;
  EXPECT_NE(qkv_shape_problem(s).find("head_dim (36) must be a positive multiple of 8"), std::string::npos);
  s.head_dim = 80;
  EXPECT_EQ(qkv_shape_problem(s), "");
  EXPECT_THROW(qkv_split(nullptr, nullptr, nullptr, nullptr, QkvShape{}, nullptr), KernelArgumentError);
}

}  // namespace
}  // namespace sextant::kernels
