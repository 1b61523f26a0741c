// copy_heads against a host loop of its definition: bit-exact without a scale;
// with one, bf16(float(x) * scale) on the host — one fp32 multiply and one
// round-to-nearest-even — is exactly what the device computes.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kernels/head_copy.h"
#include "tests/kernels/gpu_test_support.h"

namespace sextant::kernels {
namespace {

using testing::DeviceBuffer;

struct Case {
  const char* name;
  HeadCopy copy;
};

std::vector<Bf16> expected(const std::vector<Bf16>& src, std::vector<Bf16> dst, const HeadCopy& c) {
  for (long long t = 0; t < c.tokens; ++t)
    for (int h = 0; h < c.heads; ++h)
      for (int i = 0; i < c.dst_width; ++i) {
        Bf16 value{0};
        if (i < c.copy_width) {
          value = src[static_cast<std::size_t>(t * c.src_row + h * c.src_head + i)];
          if (c.scale != 1.0f) value = from_float(to_float(value) * c.scale);
        }
        dst[static_cast<std::size_t>(t * c.dst_row + h * c.dst_head + i)] = value;
      }
  return dst;
}

class HeadCopyTest : public testing::GpuTestWithParam<Case> {};

TEST_P(HeadCopyTest, MatchesTheDefinitionAndLeavesTheRestOfDstAlone) {
  const HeadCopy& c = GetParam().copy;
  const std::size_t src_n = static_cast<std::size_t>(c.tokens * c.src_row);
  const std::size_t dst_n = static_cast<std::size_t>(c.tokens * c.dst_row);
  const auto src = testing::random_bf16(rng(), src_n, 0.0, 1.0);
  const auto before = testing::random_bf16(rng(), dst_n, 5.0, 1.0);  // what must survive between heads
  DeviceBuffer<Bf16> d_src(src), d_dst(before);
  copy_heads(d_dst.get(), d_src.get(), c, nullptr);
  const std::vector<Bf16> got = d_dst.download();
  const std::vector<Bf16> want = expected(src, before, c);
  for (std::size_t i = 0; i < dst_n; ++i) ASSERT_EQ(got[i].bits, want[i].bits) << "element " << i;
}

// GPT-3 2.7B's attention: 32 heads of 80, padded to 128; q scaled by sqrt(128/80).
constexpr float kScale = 1.2649110640673518f;
INSTANTIATE_TEST_SUITE_P(
    Layouts, HeadCopyTest,
    ::testing::Values(
        // fused (Q 2 heads | K 1 | V 1) of 64 -> K, plain
        Case{"fused_to_k", {40, 1, 256, 64, 64, 64, 64, 64, 1.0f}},
        // fused Q of 16 heads of 128 -> contiguous Q
        Case{"fused_to_q_mha", {300, 16, 6144, 128, 2048, 128, 128, 128, 1.0f}},
        // fused Q of 32 heads of 80 -> padded to 128, scaled
        Case{"fused_to_padded_q", {33, 32, 7680, 80, 4096, 128, 80, 128, kScale}},
        // padded dQ -> the fused row's Q part, scaled back
        Case{"padded_dq_to_fused", {33, 32, 4096, 128, 7680, 80, 80, 80, kScale}},
        // attention output: padded -> (tokens, heads * 80), and its gradient back
        Case{"unpad_output", {17, 32, 4096, 128, 2560, 80, 80, 80, 1.0f}},
        Case{"pad_output_grad", {17, 32, 2560, 80, 4096, 128, 80, 128, 1.0f}}),
    [](const ::testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });

TEST(HeadCopyArguments, NamesWhatIsWrong) {
  HeadCopy c{4, 2, 160, 80, 256, 128, 80, 128, 1.0f};
  EXPECT_EQ(head_copy_problem(c), "");
  c.copy_width = 130;
  EXPECT_NE(head_copy_problem(c).find("copy_width (130) must be in [1, dst_width (128)]"), std::string::npos);
  c.copy_width = 80;
  c.dst_head = 100;
  EXPECT_NE(head_copy_problem(c).find("multiples of 8 (got 100)"), std::string::npos);
  c.dst_head = 64;
  EXPECT_NE(head_copy_problem(c).find("dst heads overlap"), std::string::npos);
  EXPECT_THROW(copy_heads(nullptr, nullptr, c, nullptr), KernelArgumentError);
}

}  // namespace
}  // namespace sextant::kernels
