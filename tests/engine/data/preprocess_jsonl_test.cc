#include "engine/data/preprocess_jsonl.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "engine/data/byte_tokenizer.h"
#include "engine/data/data_error.h"
#include "engine/data/indexed_dataset_reader.h"
#include "tests/support/temp_dir.h"

namespace sextant::engine::data {
namespace {

using sextant::testing::TempDir;
using sextant::testing::write_file;

TEST(PreprocessJsonl, WritesOneDocumentPerLine) {
  TempDir dir;
  write_file(dir.file("c.jsonl"), "{\"text\": \"ab\"}\n{\"text\": \"\"}\n{\"text\": \"\xC3\xA9\"}\n");
  PreprocessOptions options;
  options.input_path = dir.file("c.jsonl");
  options.output_prefix = dir.file("data/corpus");  // data/ does not exist yet
  options.append_eod = true;
  const PreprocessStats stats = preprocess_jsonl(options);

  EXPECT_EQ(stats.dataset_prefix, dir.file("data/corpus_text_document"));
  EXPECT_EQ(stats.documents, 3);
  EXPECT_EQ(stats.tokens, 6);        // "ab" + eod, "" (no eod on an empty document), é (2 bytes) + eod
  EXPECT_EQ(stats.input_bytes, 43);  // 15 + 13 + 15
  EXPECT_EQ(stats.bin_bytes, 12);    // 6 uint16 tokens
  EXPECT_EQ(stats.idx_bytes, 34 + 2 * 12 + 4 * 8);
  EXPECT_EQ(stats.vocab_size, 257);

  const IndexedDatasetReader reader(stats.dataset_prefix);
  EXPECT_EQ(reader.dtype(), TokenDtype::kUint16);
  ASSERT_EQ(reader.num_documents(), 3);
  ASSERT_EQ(reader.num_sequences(), 2);
  EXPECT_EQ(reader.tokens(0), (std::vector<int32_t>{'a', 'b', 256}));
  EXPECT_EQ(reader.tokens(1), (std::vector<int32_t>{0xC3, 0xA9, 256}));
  EXPECT_EQ(reader.document_sequences(1).first, reader.document_sequences(1).last);
  EXPECT_EQ(ByteTokenizer().decode(reader.tokens(1)), "\xC3\xA9");
}

TEST(PreprocessJsonl, OtherKeyWithoutEod) {
  TempDir dir;
  write_file(dir.file("c.jsonl"), "{\"body\": \"xyz\", \"text\": 1}\n");
  PreprocessOptions options;
  options.input_path = dir.file("c.jsonl");
  options.json_key = "body";
  options.output_prefix = dir.file("out");
  const PreprocessStats stats = preprocess_jsonl(options);
  EXPECT_EQ(stats.dataset_prefix, dir.file("out_body_document"));
  EXPECT_EQ(IndexedDatasetReader(stats.dataset_prefix).tokens(0),
            (std::vector<int32_t>{'x', 'y', 'z'}));
}

TEST(PreprocessJsonl, MalformedLineWritesNothingAndKeepsTheOldDataset) {
  TempDir dir;
  PreprocessOptions options;
  options.input_path = dir.file("c.jsonl");
  options.output_prefix = dir.file("corpus");
  write_file(options.input_path, "{\"text\": \"old\"}\n");
  preprocess_jsonl(options);

  write_file(options.input_path, "{\"text\": \"new\"}\n{\"text\": 5}\n");
  try {
    preprocess_jsonl(options);
    FAIL() << "accepted a number as text";
  } catch (const DataError& e) {
    EXPECT_STREQ(e.what(), (options.input_path + ":2: \"text\" is number, expected a string").c_str());
  }
  EXPECT_EQ(IndexedDatasetReader(dir.file("corpus_text_document")).tokens(0),
            (std::vector<int32_t>{'o', 'l', 'd'}));
  EXPECT_FALSE(std::filesystem::exists(dir.file("corpus_text_document.bin.partial")));
  EXPECT_FALSE(std::filesystem::exists(dir.file("corpus_text_document.idx.partial")));
}

}  // namespace
}  // namespace sextant::engine::data
