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

// GPT-2 BPE with the tiny vocabulary of gpt2_bpe_tokenizer_test.cc (tests/data/gpt2_bpe/).
TEST(PreprocessJsonl, Gpt2BpeFromVocabAndMerges) {
  TempDir dir;
  write_file(dir.file("c.jsonl"),
             "{\"text\": \"Hello world's  42!!\\n\\n\"}\n"
             "{\"text\": \"\"}\n"
             "{\"text\": \"aaaaa\"}\n");
  PreprocessOptions options;
  options.input_path = dir.file("c.jsonl");
  options.output_prefix = dir.file("corpus");
  options.append_eod = true;
  options.vocab_file = SEXTANT_TEST_DATA_DIR "/gpt2_bpe/vocab.json";
  options.merges_file = SEXTANT_TEST_DATA_DIR "/gpt2_bpe/merges.txt";
  const PreprocessStats stats = preprocess_jsonl(options);

  EXPECT_EQ(stats.tokenizer, "GPT-2 BPE tokenizer");
  EXPECT_EQ(stats.vocab_size, 280);
  EXPECT_EQ(stats.documents, 3);
  EXPECT_EQ(stats.tokens, 12);  // 7 + eod, nothing for "", 3 + eod
  const IndexedDatasetReader reader(stats.dataset_prefix);
  EXPECT_EQ(reader.dtype(), TokenDtype::kUint16);
  ASSERT_EQ(reader.num_sequences(), 2);
  EXPECT_EQ(reader.tokens(0), (std::vector<int32_t>{262, 267, 268, 220, 270, 271, 272, 279}));
  EXPECT_EQ(reader.tokens(1), (std::vector<int32_t>{273, 273, 64, 279}));
}

// The message make_tokenizer throws for `options`.
std::string tokenizer_error(const PreprocessOptions& options) {
  try {
    make_tokenizer(options);
  } catch (const DataError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(PreprocessJsonl, TokenizerOptionsMustAgree) {
  PreprocessOptions options;
  EXPECT_EQ(make_tokenizer(options)->description(), "byte tokenizer");
  options.vocab_file = "vocab.json";
  EXPECT_EQ(tokenizer_error(options),
            "vocab.json: --vocab-file needs --merge-file too: GPT-2 BPE reads both vocab.json and "
            "merges.txt");
  options.vocab_file = "", options.merges_file = "merges.txt";
  EXPECT_EQ(tokenizer_error(options),
            "merges.txt: --merge-file needs --vocab-file too: GPT-2 BPE reads both vocab.json and "
            "merges.txt");
  options.tokenizer_type = "byte";
  EXPECT_EQ(tokenizer_error(options),
            "merges.txt: --vocab-file and --merge-file are for --tokenizer-type GPT2BPETokenizer, "
            "not byte");
  options.tokenizer_type = "GPT2BPETokenizer", options.merges_file = "";
  EXPECT_EQ(tokenizer_error(options),
            "--tokenizer-type: GPT2BPETokenizer needs --vocab-file (vocab.json) and --merge-file "
            "(merges.txt)");
  options.tokenizer_type = "SentencePieceTokenizer";
  EXPECT_EQ(tokenizer_error(options),
            "--tokenizer-type: unknown tokenizer \"SentencePieceTokenizer\" (accepted: byte, "
            "GPT2BPETokenizer)");
}

}  // namespace
}  // namespace sextant::engine::data

namespace sextant::engine::data {
namespace {

// An empty dataset would fail in training, far from its cause (issue 29, item 11).
TEST(PreprocessJsonl, InputWithoutDocumentsIsRefusedAndWritesNothing) {
  for (const char* contents : {"", "\n  \n\r\n"}) {
    TempDir dir;
    PreprocessOptions options;
    options.input_path = dir.file("c.jsonl");
    options.output_prefix = dir.file("out/corpus");
    write_file(options.input_path, contents);
    try {
      preprocess_jsonl(options);
      FAIL() << "wrote an empty dataset";
    } catch (const DataError& e) {
      EXPECT_STREQ(e.what(), (options.input_path + ": no documents: the file holds no JSON line "
                                                   "(it is empty or blank); nothing was written")
                                 .c_str());
    }
    EXPECT_FALSE(std::filesystem::exists(dir.file("out")));  // not even the folder
  }
}

}  // namespace
}  // namespace sextant::engine::data
