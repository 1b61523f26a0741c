// The writer produces Megatron's bytes exactly, round-trips through the reader,
// and never leaves a half-written dataset.
#include "engine/data/indexed_dataset_writer.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "engine/data/data_error.h"
#include "engine/data/indexed_dataset_reader.h"
#include "tests/support/temp_dir.h"

namespace sextant::engine::data {
namespace {

using sextant::testing::read_file;
using sextant::testing::TempDir;

TEST(OptimalTokenDtype, MegatronThreshold) {
  EXPECT_EQ(optimal_token_dtype(257), TokenDtype::kUint16);
  EXPECT_EQ(optimal_token_dtype(50257), TokenDtype::kUint16);  // GPT-2
  EXPECT_EQ(optimal_token_dtype(65499), TokenDtype::kUint16);
  EXPECT_EQ(optimal_token_dtype(65500), TokenDtype::kInt32);
  EXPECT_EQ(optimal_token_dtype(128256), TokenDtype::kInt32);  // Llama 3
}

TEST(DocumentDatasetPrefix, AsPreprocessDataNamesIt) {
  EXPECT_EQ(document_dataset_prefix("data/corpus", "text"), "data/corpus_text_document");
}

TEST(IndexedDatasetWriter, WritesMegatronBytes) {
  // Documents {7, 8}, {} and {300}, uint16: what IndexedDatasetBuilder.add_document
  // writes for each with lengths [len] (none for the empty one), then finalize().
  TempDir dir;
  const std::string prefix = dir.file("corpus");
  IndexedDatasetWriter writer(prefix, TokenDtype::kUint16);
  writer.add_document(std::vector<int32_t>{7, 8});
  writer.add_document(std::vector<int32_t>{});
  writer.add_document(std::vector<int32_t>{300});
  writer.finish();
  const std::string expected_idx(
      "MMIDIDX\0\0"                          // magic
      "\1\0\0\0\0\0\0\0"                     // version 1
      "\x08"                                 // uint16
      "\2\0\0\0\0\0\0\0"                     // 2 sequences
      "\4\0\0\0\0\0\0\0"                     // 4 document indices
      "\2\0\0\0" "\1\0\0\0"                  // lengths 2, 1
      "\0\0\0\0\0\0\0\0" "\4\0\0\0\0\0\0\0"  // pointers 0, 4
      "\0\0\0\0\0\0\0\0" "\1\0\0\0\0\0\0\0"  // document indices 0, 1,
      "\1\0\0\0\0\0\0\0" "\2\0\0\0\0\0\0\0",  //   1 (the empty document), 2
      34 + 2 * 12 + 4 * 8);
  EXPECT_EQ(read_file(prefix + ".idx"), expected_idx);
  EXPECT_EQ(read_file(prefix + ".bin"), std::string("\x07\0\x08\0\x2C\x01", 6));
  EXPECT_EQ(writer.num_documents(), 3);
  EXPECT_EQ(writer.num_tokens(), 3);
  EXPECT_EQ(writer.bin_bytes(), 6);
  EXPECT_EQ(writer.idx_bytes(), 90);
}

void round_trip(TokenDtype dtype, int32_t max_id) {
  TempDir dir;
  const std::string prefix = dir.file("corpus");
  std::mt19937 random(1234);
  std::uniform_int_distribution<int32_t> length(0, 50), id(0, max_id);
  std::vector<std::vector<int32_t>> documents(200);
  IndexedDatasetWriter writer(prefix, dtype);
  for (std::vector<int32_t>& document : documents) {
    document.resize(static_cast<size_t>(length(random)));
    for (int32_t& token : document) token = id(random);
    writer.add_document(document);
  }
  writer.finish();

  const IndexedDatasetReader reader(prefix);
  EXPECT_EQ(reader.dtype(), dtype);
  ASSERT_EQ(reader.num_documents(), 200);
  int64_t tokens = 0;
  for (int64_t d = 0; d < 200; ++d) {
    const std::vector<int32_t>& document = documents[static_cast<size_t>(d)];
    const IndexedDatasetReader::SequenceRange range = reader.document_sequences(d);
    ASSERT_EQ(range.last - range.first, document.empty() ? 0 : 1) << "document " << d;
    if (!document.empty()) {
      EXPECT_EQ(reader.tokens(range.first), document) << "document " << d;
    }
    tokens += static_cast<int64_t>(document.size());
  }
  EXPECT_EQ(reader.num_tokens(), tokens);
}

TEST(IndexedDatasetWriter, RoundTripUint16) { round_trip(TokenDtype::kUint16, 65535); }
TEST(IndexedDatasetWriter, RoundTripInt32) { round_trip(TokenDtype::kInt32, 1 << 30); }
TEST(IndexedDatasetWriter, RoundTripUint8) { round_trip(TokenDtype::kUint8, 255); }

TEST(IndexedDatasetWriter, TokenThatDoesNotFitLeavesNothing) {
  TempDir dir;
  const std::string prefix = dir.file("corpus");
  {
    IndexedDatasetWriter writer(prefix, TokenDtype::kUint16);
    writer.add_document(std::vector<int32_t>{1});
    try {
      writer.add_document(std::vector<int32_t>{5, 65536});
      FAIL() << "wrote 65536 as uint16";
    } catch (const DataError& e) {
      EXPECT_STREQ(e.what(), (prefix + ".bin: document 1 token 1 is 65536, which uint16 cannot "
                                        "hold").c_str());
    }
  }  // destroyed without finish()
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

TEST(IndexedDatasetWriter, ExistingDatasetIsReplacedOnlyByFinish) {
  TempDir dir;
  const std::string prefix = dir.file("corpus");
  {
    IndexedDatasetWriter first(prefix, TokenDtype::kUint16);
    first.add_document(std::vector<int32_t>{1, 2, 3});
    first.finish();
  }
  {
    IndexedDatasetWriter unfinished(prefix, TokenDtype::kUint16);
    unfinished.add_document(std::vector<int32_t>{9});
    EXPECT_EQ(IndexedDatasetReader(prefix).tokens(0), (std::vector<int32_t>{1, 2, 3}));
  }
  EXPECT_EQ(IndexedDatasetReader(prefix).tokens(0), (std::vector<int32_t>{1, 2, 3}));
  IndexedDatasetWriter second(prefix, TokenDtype::kUint16);
  second.add_document(std::vector<int32_t>{9});
  second.finish();
  EXPECT_EQ(IndexedDatasetReader(prefix).tokens(0), (std::vector<int32_t>{9}));
}

TEST(IndexedDatasetWriter, FolderMissing) {
  TempDir dir;
  const std::string prefix = dir.file("no/such/folder/corpus");
  try {
    IndexedDatasetWriter writer(prefix, TokenDtype::kUint16);
    FAIL() << "created a file in a missing folder";
  } catch (const DataError& e) {
    EXPECT_EQ(e.file(), prefix + ".bin.partial");
    EXPECT_EQ(e.reason(), "cannot create: No such file or directory");
  }
}

}  // namespace
}  // namespace sextant::engine::data
