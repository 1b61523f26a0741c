// moe_sort_chunks against a CPU reference of its definition
// (kernels/moe_chunk_sort.h): exact, as it copies rows. Cases: a typical
// expert-parallel exchange, empty chunks (a whole empty source, an empty
// expert), one row in all, all rows in one chunk, and the round trip back.
#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda_check.h"
#include "kernels/moe_chunk_sort.h"
#include "tests/kernels/gpu_test_support.h"

namespace sextant::kernels {
namespace {

using testing::DeviceBuffer;
using testing::to_double;

struct Case {
  const char* name;
  int sources, experts, cols;
  std::vector<std::int32_t> counts;  // (sources, experts); empty: random in [0, 40)
};

std::string case_name(const ::testing::TestParamInfo<Case>& info) { return info.param.name; }
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

// The chunks' first rows in `order` (by chunk (s, e), row-major).
std::vector<std::int64_t> chunk_begins(const std::vector<std::int32_t>& counts, int sources, int experts,
                                       MoeChunkOrder order) {
  std::vector<std::int64_t> begin(counts.size());
  std::int64_t row = 0;
  const int outer = order == MoeChunkOrder::kSourceMajor ? sources : experts;
  const int inner = order == MoeChunkOrder::kSourceMajor ? experts : sources;
  for (int a = 0; a < outer; ++a)
    for (int b = 0; b < inner; ++b) {
      const int s = order == MoeChunkOrder::kSourceMajor ? a : b, e = order == MoeChunkOrder::kSourceMajor ? b : a;
      begin[static_cast<std::size_t>(s * experts + e)] = row;
      row += counts[static_cast<std::size_t>(s * experts + e)];
    }
  return begin;
}

std::vector<Bf16> reference(const std::vector<Bf16>& in, const std::vector<std::int32_t>& counts, int sources,
                            int experts, int cols, MoeChunkOrder in_order) {
  const MoeChunkOrder out_order =
      in_order == MoeChunkOrder::kSourceMajor ? MoeChunkOrder::kExpertMajor : MoeChunkOrder::kSourceMajor;
  const std::vector<std::int64_t> from = chunk_begins(counts, sources, experts, in_order);
  const std::vector<std::int64_t> to = chunk_begins(counts, sources, experts, out_order);
  std::vector<Bf16> out(in.size());
  for (std::size_t k = 0; k < counts.size(); ++k)
    for (std::int64_t r = 0; r < counts[k]; ++r)
      for (int c = 0; c < cols; ++c)
        out[static_cast<std::size_t>((to[k] + r) * cols + c)] = in[static_cast<std::size_t>((from[k] + r) * cols + c)];
  return out;
}

class MoeChunkSortTest : public testing::GpuTestWithParam<Case> {};

TEST_P(MoeChunkSortTest, MatchesReferenceBothWaysAndRoundTrips) {
  const Case& c = GetParam();
  std::vector<std::int32_t> counts = c.counts;
  if (counts.empty()) {
    std::uniform_int_distribution<int> draw(0, 39);
    counts.resize(static_cast<std::size_t>(c.sources * c.experts));
    for (auto& n : counts) n = draw(rng());
  }
  ASSERT_EQ(counts.size(), static_cast<std::size_t>(c.sources * c.experts));
  const std::int64_t rows = std::accumulate(counts.begin(), counts.end(), std::int64_t{0});
  const std::vector<Bf16> in = testing::random_bf16(rng(), static_cast<std::size_t>(rows * c.cols), 0.0, 1.0);
  DeviceBuffer<Bf16> d_in(in), d_sorted(in.size()), d_back(in.size());
  DeviceBuffer<std::int32_t> d_counts(counts);
  for (const MoeChunkOrder order : {MoeChunkOrder::kSourceMajor, MoeChunkOrder::kExpertMajor}) {
    moe_sort_chunks(d_sorted.get(), d_in.get(), d_counts.get(), c.sources, c.experts, rows, c.cols, order, nullptr);
    const std::vector<Bf16> want = reference(in, counts, c.sources, c.experts, c.cols, order);
    EXPECT_EQ(to_double(d_sorted.download()), to_double(want)) << (order == MoeChunkOrder::kSourceMajor ? "from source-major" : "from expert-major");
    const MoeChunkOrder other =
        order == MoeChunkOrder::kSourceMajor ? MoeChunkOrder::kExpertMajor : MoeChunkOrder::kSourceMajor;
    moe_sort_chunks(d_back.get(), d_sorted.get(), d_counts.get(), c.sources, c.experts, rows, c.cols, other, nullptr);
    EXPECT_EQ(to_double(d_back.download()), to_double(in)) << "round trip";
  }
}

const std::vector<Case> kCases = {
    {"ep4_of_16_experts", 4, 4, 256, {}},
    {"ep2_of_64_experts_wide", 2, 32, 1024, {}},
    {"empty_source_and_expert", 3, 3, 64, {5, 0, 7, 0, 0, 0, 2, 0, 9}},
    {"one_row", 4, 2, 128, {0, 0, 0, 0, 0, 1, 0, 0}},
    {"all_in_one_chunk", 2, 2, 64, {0, 0, 777, 0}},
    {"many_chunks", 8, 512, 64, {}}};

INSTANTIATE_TEST_SUITE_P(Cases, MoeChunkSortTest, ::testing::ValuesIn(kCases), case_name);

TEST(MoeChunkSortArguments, RefusesTooManyChunksAndUnalignedWidths) {
  // Checked before any launch: no GPU needed.
  EXPECT_THROW(moe_sort_chunks(nullptr, nullptr, nullptr, 2, kMoeChunkSortMaxChunks, 0, 64,
                               MoeChunkOrder::kSourceMajor, nullptr),
               KernelArgumentError);
  EXPECT_THROW(moe_sort_chunks(nullptr, nullptr, nullptr, 2, 2, 0, 60, MoeChunkOrder::kSourceMajor, nullptr),
               KernelArgumentError);
  EXPECT_NO_THROW(moe_sort_chunks(nullptr, nullptr, nullptr, 2, 2, 0, 64, MoeChunkOrder::kSourceMajor, nullptr));
}

}  // namespace
}  // namespace sextant::kernels
