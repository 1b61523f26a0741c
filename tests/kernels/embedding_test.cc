// Token + position embedding forward/backward against a CPU reference.
// Tolerances: the forward adds two bf16 values in fp32 (exact unless their
// exponents differ by more than 16) and rounds once, so it is compared to
// one bf16 ulp (rtol 2^-8); without a position table it is a copy and must
// match bit for bit. The backward's fp32 sums: 1e-5 relative to the sum of the
// magnitudes of their terms (see layernorm_test.cc), and bit-identical between
// two runs (it is deterministic by construction). With chunked positions
// (context parallelism, kernels/sequence_positions.h) local token t reads and
// writes the table's row of its position in the whole sequence, which the
// reference computes from the chunks' starts on its own.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "kernels/embedding.h"
#include "tests/kernels/gpu_test_support.h"

namespace sextant::kernels {
namespace {

using testing::all_close;
using testing::DeviceBuffer;
using testing::to_double;

struct Case {
  int batch;
  int seq;
  int vocab;
  int cols;
  // Context parallelism: two chunks of seq / 2 tokens at these positions (-1: none).
  int chunk_start0 = -1, chunk_start1 = -1;
};

SequencePositions positions_of(const Case& c) {
  if (c.chunk_start0 < 0) return {};
  return SequencePositions{c.seq / 2, {c.chunk_start0, c.chunk_start1}};
}

// Local token t's row of the position table, computed apart from the kernels' helper.
std::size_t table_row(const Case& c, int t) {
  if (c.chunk_start0 < 0) return static_cast<std::size_t>(t);
  const int half = c.seq / 2;
  return static_cast<std::size_t>(t < half ? c.chunk_start0 + t : c.chunk_start1 + t - half);
}

// Rows of the position table: the whole sequence's.
std::size_t table_rows(const Case& c) {
  if (c.chunk_start0 < 0) return static_cast<std::size_t>(c.seq);
  return static_cast<std::size_t>(std::max(c.chunk_start0, c.chunk_start1) + c.seq / 2);
}

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  const Case& c = info.param;
  std::string name = "batch" + std::to_string(c.batch) + "_s" + std::to_string(c.seq) + "_v" +
                     std::to_string(c.vocab) + "_c" + std::to_string(c.cols);
  if (c.chunk_start0 >= 0)
    name.append("_chunks").append(std::to_string(c.chunk_start0)).append("_").append(std::to_string(c.chunk_start1));
  return name;
}

// Half the positions hold one frequent token (a run longer than the 128-thread
// window the backward scans in), the rest are uniform over the vocabulary.
std::vector<std::int32_t> random_tokens(std::mt19937_64& rng, int n, int vocab) {
  std::uniform_int_distribution<int> any(0, vocab - 1);
  std::bernoulli_distribution frequent(0.5);
  const int common = any(rng);
  std::vector<std::int32_t> tokens(n);
  for (auto& t : tokens) t = frequent(rng) ? common : any(rng);
  return tokens;
}

class EmbeddingTest : public testing::GpuTestWithParam<Case> {};

TEST_P(EmbeddingTest, ForwardMatchesReference) {
  [[maybe_unused]] const auto [batch, seq, vocab, cols, start0, start1] = GetParam();
  const SequencePositions positions = positions_of(GetParam());
  const int n = batch * seq;
  const auto tokens = random_tokens(rng(), n, vocab);
  const auto wte = testing::random_bf16(rng(), static_cast<std::size_t>(vocab) * cols, 0.0, 0.5);
  const auto wpe = testing::random_bf16(rng(), table_rows(GetParam()) * cols, 0.0, 0.5);
  DeviceBuffer<std::int32_t> d_tokens(tokens);
  DeviceBuffer<Bf16> d_wte(wte), d_wpe(wpe), d_out(static_cast<std::size_t>(n) * cols);

  embedding_forward(d_out.get(), d_tokens.get(), d_wte.get(), d_wpe.get(), batch, seq, cols,
                    nullptr, positions);
  const auto got = d_out.download();

  std::vector<double> want(got.size());
  for (int i = 0; i < n; ++i)
    for (int c = 0; c < cols; ++c)
      want[static_cast<std::size_t>(i) * cols + c] =
          to_float(wte[static_cast<std::size_t>(tokens[i]) * cols + c]) +
          static_cast<double>(to_float(wpe[table_row(GetParam(), i % seq) * cols + c]));
  EXPECT_TRUE(all_close(to_double(got), want, 1.0 / 256, 0.0)) << "with positions";

  // No position table (Llama): a gather, exact.
  embedding_forward(d_out.get(), d_tokens.get(), d_wte.get(), nullptr, batch, seq, cols, nullptr, positions);
  const auto gathered = d_out.download();
  for (int i = 0; i < n; ++i)
    for (int c = 0; c < cols; ++c)
      ASSERT_EQ(gathered[static_cast<std::size_t>(i) * cols + c].bits,
                wte[static_cast<std::size_t>(tokens[i]) * cols + c].bits)
          << "position " << i << ", column " << c;
}

TEST_P(EmbeddingTest, BackwardMatchesReferenceAndIsDeterministic) {
  [[maybe_unused]] const auto [batch, seq, vocab, cols, start0, start1] = GetParam();
  const SequencePositions positions = positions_of(GetParam());
  const int n = batch * seq;
  const auto tokens = random_tokens(rng(), n, vocab);
  const auto dout = testing::random_bf16(rng(), static_cast<std::size_t>(n) * cols, 0.0, 1.0);
  const auto dwte0 = testing::random_float(rng(), static_cast<std::size_t>(vocab) * cols, 0.0, 1.0);
  const auto dwpe0 = testing::random_float(rng(), table_rows(GetParam()) * cols, 0.0, 1.0);
  DeviceBuffer<std::int32_t> d_tokens(tokens);
  DeviceBuffer<Bf16> d_dout(dout);
  DeviceBuffer<float> d_dwte(dwte0), d_dwpe(dwpe0);
  const std::size_t ws_bytes = embedding_backward_workspace_bytes(batch, seq, vocab);
  DeviceBuffer<char> d_ws(ws_bytes);

  embedding_backward(d_dwte.get(), d_dwpe.get(), d_dout.get(), d_tokens.get(), batch, seq, vocab,
                     cols, d_ws.get(), ws_bytes, nullptr, positions);
  const auto dwte = d_dwte.download();
  const auto dwpe = d_dwpe.download();

  const auto dy = to_double(dout);
  std::vector<double> want_wte(dwte0.begin(), dwte0.end()), atol_wte(dwte0.size());
  std::vector<double> want_wpe(dwpe0.begin(), dwpe0.end()), atol_wpe(dwpe0.size());
  for (std::size_t i = 0; i < dwte0.size(); ++i) atol_wte[i] = std::abs(dwte0[i]);
  for (std::size_t i = 0; i < dwpe0.size(); ++i) atol_wpe[i] = std::abs(dwpe0[i]);
  for (int i = 0; i < n; ++i)
    for (int c = 0; c < cols; ++c) {
      const double g = dy[static_cast<std::size_t>(i) * cols + c];
      const std::size_t t = static_cast<std::size_t>(tokens[i]) * cols + c;
      const std::size_t p = table_row(GetParam(), i % seq) * cols + c;
      want_wte[t] += g, atol_wte[t] += std::abs(g);
      want_wpe[p] += g, atol_wpe[p] += std::abs(g);
    }
  for (auto& a : atol_wte) a *= 1e-5;
  for (auto& a : atol_wpe) a *= 1e-5;
  EXPECT_TRUE(all_close(to_double(dwte), want_wte, 0.0, atol_wte)) << "dwte";
  EXPECT_TRUE(all_close(to_double(dwpe), want_wpe, 0.0, atol_wpe)) << "dwpe";

  // Same inputs, same bits.
  d_dwte.upload(dwte0);
  d_dwpe.upload(dwpe0);
  embedding_backward(d_dwte.get(), d_dwpe.get(), d_dout.get(), d_tokens.get(), batch, seq, vocab,
                     cols, d_ws.get(), ws_bytes, nullptr, positions);
  EXPECT_EQ(d_dwte.download(), dwte) << "dwte differs between two identical runs";
  EXPECT_EQ(d_dwpe.download(), dwpe) << "dwpe differs between two identical runs";
}

// A vocabulary of 1 (every token equal), small ones, 1024 + 8 columns (two
// column tiles of the backward), and GPT-2's padded 50304 (16-bit sort keys).
INSTANTIATE_TEST_SUITE_P(Shapes, EmbeddingTest,
                         ::testing::Values(Case{1, 1, 1, 8}, Case{2, 5, 11, 16},
                                           Case{4, 128, 1000, 768}, Case{2, 300, 5000, 1032},
                                           Case{8, 256, 50304, 64},
                                           // cp = 4 of 1024 tokens, rank 2: chunks 2 and 5 of
                                           // 128 at positions 256 and 640; the table's other
                                           // rows must keep their values.
                                           Case{2, 256, 1000, 64, 256, 640},
                                           // cp = 2 of 12 tokens, rank 0: chunks 0 and 3 of 3.
                                           Case{3, 6, 11, 16, 0, 9}),
                         case_name);

}  // namespace
}  // namespace sextant::kernels
