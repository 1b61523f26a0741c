// Vocabulary-parallel cross entropy and embedding (kernels/
// vocab_parallel_cross_entropy.h, kernels/embedding.h), tp ranks played one
// after another on one GPU with the collectives done on the host (the maxima
// concatenated, the partials summed in fp64 then rounded to fp32), against
// the one-rank kernels' double-precision references.
// Tolerances: the cross entropy as cross_entropy_test.cc (loss 1e-5 relative
// + 1e-5 absolute: sums of positive terms in fp32; dlogits one bf16 rounding,
// rtol 1e-2, atol 1e-6·grad_scale); the embedding's forward of a shard is a
// copy or zero (exact), so the ranks' outputs summed in fp64 equal the
// table's rows; the sharded backward sums the same rows in the same order as
// the whole table's backward, so each shard's gradient equals its rows of
// the one-rank gradient bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "kernels/embedding.h"
#include "kernels/vocab_parallel_cross_entropy.h"
#include "tests/kernels/gpu_test_support.h"

namespace sextant::kernels {
namespace {

using testing::all_close;
using testing::DeviceBuffer;
using testing::to_double;

struct Case {
  int rows;
  int vocab;  // the whole (padded) vocabulary
  int tp;
};

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  return "rows" + std::to_string(info.param.rows) + "_vocab" + std::to_string(info.param.vocab) + "_tp" +
         std::to_string(info.param.tp);
}

class VocabParallelCrossEntropyTest : public testing::GpuTestWithParam<Case> {};

TEST_P(VocabParallelCrossEntropyTest, RanksTogetherMatchTheWholeRowsReference) {
  const auto [rows, vocab, tp] = GetParam();
  const int local = vocab / tp;
  const auto logits = testing::random_bf16(rng(), static_cast<std::size_t>(rows) * vocab, 0.0, 3.0);
  std::uniform_int_distribution<int> any(0, vocab - 1);
  std::vector<std::int32_t> targets(rows);
  for (auto& t : targets) t = any(rng());
  targets[0] = -1;  // an ignored row
  if (rows > 2) targets[1] = 0, targets[2] = vocab - 1;
  const float grad_scale = 1.0f / static_cast<float>(rows);

  // Each rank's logits: its block of columns.
  std::vector<std::vector<Bf16>> shards(tp);
  for (int r = 0; r < tp; ++r)
    for (int i = 0; i < rows; ++i)
      shards[r].insert(shards[r].end(), logits.begin() + static_cast<std::ptrdiff_t>(i) * vocab + r * local,
                       logits.begin() + static_cast<std::ptrdiff_t>(i) * vocab + (r + 1) * local);
  DeviceBuffer<std::int32_t> d_targets(targets);
  std::vector<float> gathered;  // (tp, rows)
  for (int r = 0; r < tp; ++r) {
    DeviceBuffer<Bf16> d_logits(shards[r]);
    DeviceBuffer<float> d_max(rows);
    vocab_parallel_row_max(d_max.get(), d_logits.get(), rows, local, nullptr);
    const std::vector<float> m = d_max.download();
    gathered.insert(gathered.end(), m.begin(), m.end());
  }
  std::vector<double> summed(2 * static_cast<std::size_t>(rows), 0.0);
  DeviceBuffer<float> d_gathered(gathered);
  for (int r = 0; r < tp; ++r) {
    DeviceBuffer<Bf16> d_logits(shards[r]);
    DeviceBuffer<float> d_partials(2 * rows), d_max(rows);
    vocab_parallel_partials(d_partials.get(), d_max.get(), d_gathered.get(), tp, d_logits.get(), d_targets.get(),
                            rows, local, r * local, nullptr);
    const std::vector<float> p = d_partials.download();
    for (std::size_t i = 0; i < p.size(); ++i) summed[i] += p[i];
  }
  std::vector<float> partials(summed.begin(), summed.end());
  std::vector<double> losses_got, dlogits_got(static_cast<std::size_t>(rows) * vocab);
  for (int r = 0; r < tp; ++r) {
    DeviceBuffer<Bf16> d_logits(shards[r]);
    DeviceBuffer<float> d_partials(partials), d_max(rows), d_losses(rows);
    DeviceBuffer<float> d_gathered_again(gathered);
    DeviceBuffer<float> d_scratch(2 * rows);
    vocab_parallel_partials(d_scratch.get(), d_max.get(), d_gathered_again.get(), tp, d_logits.get(),
                            d_targets.get(), rows, local, r * local, nullptr);  // for its max
    vocab_parallel_loss_and_gradient(d_losses.get(), d_logits.get(), d_logits.get(), d_partials.get(), d_max.get(),
                                     d_targets.get(), rows, local, r * local, grad_scale, nullptr);
    const std::vector<double> losses = to_double(d_losses.download());
    if (r == 0) losses_got = losses;
    EXPECT_EQ(losses, losses_got) << "every rank computes the same losses (rank " << r << ")";
    const std::vector<double> g = to_double(d_logits.download());
    for (int i = 0; i < rows; ++i)
      std::copy(g.begin() + static_cast<std::ptrdiff_t>(i) * local, g.begin() + static_cast<std::ptrdiff_t>(i + 1) * local,
                dlogits_got.begin() + static_cast<std::ptrdiff_t>(i) * vocab + r * local);
  }

  // The whole rows' reference in double.
  const std::vector<double> x = to_double(logits);
  std::vector<double> losses_want(rows, 0.0), dlogits_want(x.size(), 0.0);
  for (int i = 0; i < rows; ++i) {
    if (targets[i] < 0) continue;
    const double* row = &x[static_cast<std::size_t>(i) * vocab];
    const double m = *std::max_element(row, row + vocab);
    double sum = 0;
    for (int c = 0; c < vocab; ++c) sum += std::exp(row[c] - m);
    losses_want[i] = std::log(sum) + m - row[targets[i]];
    for (int c = 0; c < vocab; ++c)
      dlogits_want[static_cast<std::size_t>(i) * vocab + c] =
          (std::exp(row[c] - m) / sum - (c == targets[i] ? 1.0 : 0.0)) * grad_scale;
  }
  EXPECT_TRUE(all_close(losses_got, losses_want, 1e-5, 1e-5)) << "losses";
  EXPECT_TRUE(all_close(dlogits_got, dlogits_want, 1e-2, 1e-6 * grad_scale)) << "dlogits";
}

// 256 over 2 ranks (the small test models' padded vocabulary), 51200 over 8
// (GPT's at tp = 8: 6400 columns each), 129024 over 4 (Llama 3's padded).
INSTANTIATE_TEST_SUITE_P(Shapes, VocabParallelCrossEntropyTest,
                         ::testing::Values(Case{5, 256, 2}, Case{33, 51200, 8}, Case{4, 129024, 4}), case_name);

class VocabParallelEmbeddingTest : public testing::GpuTestWithParam<Case> {};

// rows = tokens (batch 2 x seq rows/2), vocab over tp ranks, 64 columns.
TEST_P(VocabParallelEmbeddingTest, ShardsSumToTheTableAndGradientsAreTheirRows) {
  const auto [tokens_n, vocab, tp] = GetParam();
  constexpr int kCols = 64;
  const int batch = 2, seq = tokens_n / 2, local = vocab / tp;
  std::uniform_int_distribution<int> any(0, vocab - 1);
  std::vector<std::int32_t> tokens(tokens_n);
  for (auto& t : tokens) t = any(rng());
  tokens[0] = tokens[1] = tokens[2];  // a repeated token
  const auto wte = testing::random_bf16(rng(), static_cast<std::size_t>(vocab) * kCols, 0.0, 0.5);
  const auto wpe = testing::random_bf16(rng(), static_cast<std::size_t>(seq) * kCols, 0.0, 0.5);
  const auto dout = testing::random_bf16(rng(), static_cast<std::size_t>(tokens_n) * kCols, 0.0, 1.0);
  DeviceBuffer<std::int32_t> d_tokens(tokens);
  DeviceBuffer<Bf16> d_wpe(wpe), d_dout(dout);

  // One rank: the whole table.
  DeviceBuffer<Bf16> d_wte(wte), d_out(static_cast<std::size_t>(tokens_n) * kCols);
  embedding_forward(d_out.get(), d_tokens.get(), d_wte.get(), d_wpe.get(), batch, seq, kCols, nullptr);
  const std::vector<double> want_out = to_double(d_out.download());
  DeviceBuffer<float> d_dwte(std::vector<float>(wte.size(), 0.0f)), d_dwpe(std::vector<float>(wpe.size(), 0.0f));
  const std::size_t whole_bytes = embedding_backward_workspace_bytes(batch, seq, vocab);
  DeviceBuffer<char> d_ws(whole_bytes);
  embedding_backward(d_dwte.get(), d_dwpe.get(), d_dout.get(), d_tokens.get(), batch, seq, vocab, kCols, d_ws.get(),
                     whole_bytes, nullptr);
  const std::vector<float> want_dwte = d_dwte.download(), want_dwpe = d_dwpe.download();

  std::vector<double> summed(want_out.size(), 0.0);
  for (int r = 0; r < tp; ++r) {
    const std::vector<Bf16> shard(wte.begin() + static_cast<std::ptrdiff_t>(r) * local * kCols,
                                  wte.begin() + static_cast<std::ptrdiff_t>(r + 1) * local * kCols);
    DeviceBuffer<Bf16> d_shard(shard), d_part(static_cast<std::size_t>(tokens_n) * kCols);
    // Rank 0 adds the positions, as the engine does.
    embedding_forward_shard(d_part.get(), d_tokens.get(), d_shard.get(), r == 0 ? d_wpe.get() : nullptr, batch, seq,
                            kCols, r * local, local, nullptr);
    const std::vector<double> part = to_double(d_part.download());
    for (std::size_t i = 0; i < part.size(); ++i) summed[i] += part[i];

    DeviceBuffer<float> d_dshard(std::vector<float>(shard.size(), 0.0f));
    DeviceBuffer<float> d_dwpe_rank(std::vector<float>(wpe.size(), 0.0f));
    const std::size_t bytes = embedding_backward_shard_workspace_bytes(batch, seq, local);
    DeviceBuffer<char> d_shard_ws(bytes);
    embedding_backward_shard(d_dshard.get(), d_dwpe_rank.get(), d_dout.get(), d_tokens.get(), batch, seq, r * local,
                             local, kCols, d_shard_ws.get(), bytes, nullptr);
    const std::vector<float> got = d_dshard.download();
    const std::vector<float> want(want_dwte.begin() + static_cast<std::ptrdiff_t>(r) * local * kCols,
                                  want_dwte.begin() + static_cast<std::ptrdiff_t>(r + 1) * local * kCols);
    EXPECT_EQ(got, want) << "rank " << r << "'s rows of the table's gradient";
    EXPECT_EQ(d_dwpe_rank.download(), want_dwpe) << "rank " << r << "'s position gradient";
  }
  // One rank's row plus zeros: the sum of the ranks' outputs rounds like the
  // one-rank sum (the positions added in the same fp32 operation on rank 0
  // when it owns the token, else wte + 0 then + wpe in fp64: within one bf16 ulp).
  EXPECT_TRUE(all_close(summed, want_out, 1.0 / 128, 0.0));
}

INSTANTIATE_TEST_SUITE_P(Shapes, VocabParallelEmbeddingTest,
                         ::testing::Values(Case{40, 256, 2}, Case{96, 512, 4}, Case{200, 4096, 8}), case_name);

}  // namespace
}  // namespace sextant::kernels
