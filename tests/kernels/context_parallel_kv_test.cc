// The context-parallel K/V kernels against host loops of their definitions,
// with the split taken from engine/model/context_parallel_chunks.h (the
// engine's definition of which rank holds which position), so a kernel that
// disagrees with the engine's split fails here. The kernels only move
// numbers, add two bf16 values in fp32 (the host adds the same two floats in
// the same order) and round fp32 to bf16 (from_float rounds as
// __float2bfloat16_rn does): every comparison is exact.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/model/context_parallel_chunks.h"
#include "kernels/context_parallel_kv.h"
#include "tests/kernels/gpu_test_support.h"

namespace sextant::kernels {
namespace {

using engine::ContextParallelChunks;
using testing::DeviceBuffer;

std::size_t at(long long i) { return static_cast<std::size_t>(i); }

std::string shape_name(const ::testing::TestParamInfo<ContextParallelKvShape>& info) {
  const auto& s = info.param;
  std::string name = "b";  // appended piecewise: "b" + to_string trips GCC 12's -Wrestrict
  name += std::to_string(s.batch);
  name += "_cp" + std::to_string(s.cp);
  name += "_c" + std::to_string(s.chunk_tokens);
  name += "_w" + std::to_string(s.width);
  return name;
}

class ContextParallelKvTest : public testing::GpuTestWithParam<ContextParallelKvShape> {};

// k_full[b, p] = gathered[r, 0, b, t] and v_full[b, p] = gathered[r, 1, b, t]
// for the rank r and local token t holding position p; every position once.
TEST_P(ContextParallelKvTest, GatherPutsEveryRanksTokensAtTheirPositions) {
  const ContextParallelKvShape s = GetParam();
  const long long W = s.width, L = s.local_tokens(), S = s.sequence_tokens();
  const auto gathered = testing::random_bf16(rng(), at(s.cp * s.block_elements()), 0.0, 1.0);
  std::vector<Bf16> want_k(s.sequence_elements()), want_v(s.sequence_elements());
  std::vector<int> written(at(S), 0);
  for (int r = 0; r < s.cp; ++r) {
    const ContextParallelChunks chunks(static_cast<int>(S), s.cp, r);
    for (int b = 0; b < s.batch; ++b)
      for (int t = 0; t < L; ++t) {
        const long long p = chunks.global_position(t);
        if (b == 0) ++written[at(p)];
        for (long long e = 0; e < W; ++e) {
          const long long src = r * static_cast<long long>(s.block_elements()) + (b * L + t) * W + e;
          want_k[at((b * S + p) * W + e)] = gathered[at(src)];
          want_v[at((b * S + p) * W + e)] = gathered[at(src + s.batch * L * W)];
        }
      }
  }
  for (long long p = 0; p < S; ++p) ASSERT_EQ(written[at(p)], 1) << "position " << p << " in the reference";
  DeviceBuffer<Bf16> d_gathered(gathered), d_k(s.sequence_elements()), d_v(s.sequence_elements());
  gather_sequence_kv(d_k.get(), d_v.get(), d_gathered.get(), s, nullptr);
  const std::vector<Bf16> got_k = d_k.download(), got_v = d_v.download();
  for (std::size_t i = 0; i < want_k.size(); ++i) {
    ASSERT_EQ(got_k[i].bits, want_k[i].bits) << "K element " << i;
    ASSERT_EQ(got_v[i].bits, want_v[i].bits) << "V element " << i;
  }
}

// For every rank's visible keys: block r' of rank_major holds, at each of rank
// r''s local tokens (position p), dX_0[b, p] + dX_1[b, p] with a chunk's term
// 0 where p is not among its visible keys.
TEST_P(ContextParallelKvTest, GradientSumIsRankMajorAndZeroPastEachChunksKeys) {
  const ContextParallelKvShape s = GetParam();
  const long long W = s.width, L = s.local_tokens(), S = s.sequence_tokens();
  for (int rank = 0; rank < s.cp; ++rank) {
    const ContextParallelChunks mine(static_cast<int>(S), s.cp, rank);
    std::vector<std::vector<Bf16>> dk(2), dv(2);
    for (int j = 0; j < 2; ++j) {
      const std::size_t n = at(s.batch * mine.visible_keys(j) * W);
      dk[at(j)] = testing::random_bf16(rng(), n, 0.0, 1.0);
      dv[at(j)] = testing::random_bf16(rng(), n, 0.0, 1.0);
    }
    std::vector<float> want(at(s.cp * static_cast<long long>(s.block_elements())));
    for (int r = 0; r < s.cp; ++r) {
      const ContextParallelChunks theirs(static_cast<int>(S), s.cp, r);
      for (int kv = 0; kv < 2; ++kv)
        for (int b = 0; b < s.batch; ++b)
          for (int t = 0; t < L; ++t) {
            const long long p = theirs.global_position(t);
            for (long long e = 0; e < W; ++e) {
              float sum = 0.0f;  // the device's order: 0, + chunk 0's, + chunk 1's
              for (int j = 0; j < 2; ++j) {
                const long long visible = mine.visible_keys(j);
                if (p >= visible) continue;
                const std::vector<Bf16>& g = kv == 0 ? dk[at(j)] : dv[at(j)];
                sum += to_float(g[at((b * visible + p) * W + e)]);
              }
              want[at(r * static_cast<long long>(s.block_elements()) + kv * s.batch * L * W + (b * L + t) * W + e)] =
                  sum;
            }
          }
    }
    DeviceBuffer<Bf16> dk0(dk[0]), dk1(dk[1]), dv0(dv[0]), dv1(dv[1]);
    DeviceBuffer<float> d_rank_major(testing::random_float(rng(), want.size(), 7.0, 1.0));
    ChunkKvGradients chunks;
    chunks.dk[0] = dk0.get(), chunks.dk[1] = dk1.get();
    chunks.dv[0] = dv0.get(), chunks.dv[1] = dv1.get();
    chunks.visible_tokens[0] = mine.visible_keys(0), chunks.visible_tokens[1] = mine.visible_keys(1);
    sum_chunk_kv_gradients(d_rank_major.get(), chunks, s, nullptr);
    const std::vector<float> got = d_rank_major.download();
    for (std::size_t i = 0; i < want.size(); ++i) ASSERT_EQ(got[i], want[i]) << "rank " << rank << ", element " << i;
  }
}

// dk, dv as column slices of a fused (tokens, [Q | K | V | padding]) row, and
// contiguous: bf16(local) in the K and V columns, everything else untouched.
TEST_P(ContextParallelKvTest, StoreRoundsIntoTheKAndVColumnsOnly) {
  const ContextParallelKvShape s = GetParam();
  const long long W = s.width, rows = s.batch * static_cast<long long>(s.local_tokens());
  const auto local = testing::random_float(rng(), s.block_elements(), 0.0, 1.0);
  struct Layout {
    long long row_stride, k_column, v_column;  // in a buffer of rows·row_stride
    int stride_argument;
  };
  const long long q_width = 2 * W;  // e.g. GQA with two query heads per key/value head
  const Layout fused{q_width + 2 * W + 8, q_width, q_width + W, static_cast<int>(q_width + 2 * W + 8)};
  const Layout contiguous{2 * W, 0, W, 0};  // dk, dv back to back: each row_stride W (0)
  for (const Layout& layout : {fused, contiguous}) {
    const auto before = testing::random_bf16(rng(), at(rows * layout.row_stride), 5.0, 1.0);
    std::vector<Bf16> want = before;
    for (long long row = 0; row < rows; ++row)
      for (long long e = 0; e < W; ++e) {
        if (layout.stride_argument != 0) {
          want[at(row * layout.row_stride + layout.k_column + e)] = from_float(local[at(row * W + e)]);
          want[at(row * layout.row_stride + layout.v_column + e)] = from_float(local[at((rows + row) * W + e)]);
        } else {  // two contiguous (rows, W) arrays
          want[at(row * W + e)] = from_float(local[at(row * W + e)]);
          want[at(rows * W + row * W + e)] = from_float(local[at((rows + row) * W + e)]);
        }
      }
    DeviceBuffer<Bf16> d_out(before);
    DeviceBuffer<float> d_local(local);
    Bf16* dk = layout.stride_argument != 0 ? d_out.get() + layout.k_column : d_out.get();
    Bf16* dv = layout.stride_argument != 0 ? d_out.get() + layout.v_column : d_out.get() + rows * W;
    store_local_kv_gradients(dk, dv, layout.stride_argument, d_local.get(), s, nullptr);
    const std::vector<Bf16> got = d_out.download();
    for (std::size_t i = 0; i < want.size(); ++i)
      ASSERT_EQ(got[i].bits, want[i].bits) << "row stride " << layout.stride_argument << ", element " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, ContextParallelKvTest,
    ::testing::Values(
        // cp = 1: the identity (two halves in order)
        ContextParallelKvShape{1, 1, 16, 64},
        // Llama-like GQA shard: 2 kv heads of 128
        ContextParallelKvShape{1, 2, 64, 256},
        ContextParallelKvShape{2, 4, 32, 128},
        // odd cp, three sequences, one kv head of 64
        ContextParallelKvShape{3, 3, 8, 64},
        ContextParallelKvShape{1, 8, 8, 8}),
    shape_name);

TEST(ContextParallelKvArguments, NameWhatIsWrong) {
  ContextParallelKvShape s{1, 2, 16, 128};
  EXPECT_EQ(context_parallel_kv_problem(s), "");
  s.width = 100;
  EXPECT_EQ(context_parallel_kv_problem(s), "width (100) must be a positive multiple of 8");
  s.width = 128;
  s.cp = 0;
  EXPECT_EQ(context_parallel_kv_problem(s), "cp (0) must be positive");
  EXPECT_THROW(gather_sequence_kv(nullptr, nullptr, nullptr, s, nullptr), KernelArgumentError);
  s.cp = 2;
  EXPECT_THROW(gather_sequence_kv(nullptr, nullptr, nullptr, s, nullptr), KernelArgumentError);
  EXPECT_THROW(store_local_kv_gradients(nullptr, nullptr, 136, nullptr, s, nullptr), KernelArgumentError);
  ChunkKvGradients chunks;
  chunks.visible_tokens[0] = 32, chunks.visible_tokens[1] = 65;  // S = 64
  try {
    sum_chunk_kv_gradients(nullptr, chunks, s, nullptr);
    ADD_FAILURE() << "no throw";
  } catch (const KernelArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("visible_tokens[1] (65) must be in [1, 64]"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace sextant::kernels
