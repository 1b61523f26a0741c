#include "engine/data/token_batches.h"

#include <gtest/gtest.h>

#include <map>
#include <numeric>
#include <set>

#include "engine/data/data_error.h"
#include "engine/data/indexed_dataset_writer.h"
#include "tests/support/temp_dir.h"

namespace sextant::engine::data {
namespace {

using sextant::testing::TempDir;

TEST(SyntheticTokens, TargetsAreTheInputsShiftedByOneAndStayInTheVocabulary) {
  SyntheticTokens source(50, 8, 7);
  std::vector<std::int32_t> inputs(24), targets(24);
  source.next(inputs, targets);
  for (int b = 0; b < 3; ++b)
    for (int t = 0; t + 1 < 8; ++t) EXPECT_EQ(targets[b * 8 + t], inputs[b * 8 + t + 1]);
  std::set<std::int32_t> seen(inputs.begin(), inputs.end());
  EXPECT_GE(*seen.begin(), 0);
  EXPECT_LT(*seen.rbegin(), 50);
  EXPECT_GT(seen.size(), 10u);  // 24 draws from 50 values: not a constant
  // Same seed, same tokens.
  SyntheticTokens again(50, 8, 7);
  std::vector<std::int32_t> inputs2(24), targets2(24);
  again.next(inputs2, targets2);
  EXPECT_EQ(inputs, inputs2);
}

// Documents of 0..n-1 offsets, so a window's content says where it came from.
std::string write_counting_dataset(const TempDir& dir, int documents, int length) {
  const std::string prefix = dir.file("counting");
  IndexedDatasetWriter writer(prefix, TokenDtype::kUint16);
  std::int32_t next = 0;
  for (int d = 0; d < documents; ++d) {
    std::vector<std::int32_t> tokens(static_cast<std::size_t>(length));
    for (auto& t : tokens) t = next++;
    writer.add_document(tokens);
  }
  writer.finish();
  return prefix;
}

TEST(DatasetTokens, CutsTheStreamIntoOverlappingWindowsAndVisitsEachOncePerEpoch) {
  TempDir dir;
  // 5 documents of 7 tokens: a stream 0..34; windows of seq + 1 = 5 tokens every
  // 4 tokens: (35 - 1) / 4 = 8 windows, starting at 0, 4, ..., 28.
  const std::string prefix = write_counting_dataset(dir, 5, 7);
  DatasetTokens source(prefix, 100, 4, 3);
  EXPECT_EQ(source.windows(), 8);
  std::map<std::int32_t, int> starts;
  std::vector<std::int32_t> inputs(4), targets(4);
  for (int i = 0; i < 8; ++i) {
    source.next(inputs, targets);
    // Consecutive stream tokens across document boundaries.
    for (int t = 0; t < 4; ++t) {
      EXPECT_EQ(inputs[t], inputs[0] + t);
      EXPECT_EQ(targets[t], inputs[0] + t + 1);
    }
    EXPECT_EQ(inputs[0] % 4, 0);
    ++starts[inputs[0]];
  }
  EXPECT_EQ(starts.size(), 8u);  // every window once
  EXPECT_EQ(source.epoch(), 0);
  source.next(inputs, targets);
  EXPECT_EQ(source.epoch(), 1);
}

TEST(DatasetTokens, RejectsTokensOutsideTheVocabularyAndTooShortDatasets) {
  TempDir dir;
  const std::string prefix = write_counting_dataset(dir, 2, 10);  // tokens 0..19
  DatasetTokens small_vocab(prefix, 8, 4, 1);
  std::vector<std::int32_t> inputs(4), targets(4);
  try {
    for (int i = 0; i < 4; ++i) small_vocab.next(inputs, targets);
    FAIL() << "a token >= 8 was accepted";
  } catch (const DataError& e) {
    EXPECT_NE(e.reason().find("outside the model's vocabulary [0, 8)"), std::string::npos) << e.reason();
  }
  EXPECT_THROW(DatasetTokens(prefix, 100, 20, 1), DataError);  // 20 tokens < seq + 1 = 21
}

}  // namespace
}  // namespace sextant::engine::data
