// `sextant preprocess` as a user runs it: the built binary, its output and exit codes.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "engine/data/indexed_dataset_reader.h"
#include "tests/support/run_sextant.h"
#include "tests/support/temp_dir.h"

namespace sextant::tools {
namespace {

using sextant::testing::read_file;
using sextant::testing::TempDir;
using sextant::testing::write_file;

using sextant::testing::CommandResult;
using sextant::testing::run_sextant;

TEST(PreprocessCommand, WritesTheDatasetAndPrintsCounts) {
  TempDir dir;
  write_file(dir.file("corpus.jsonl"), "{\"text\": \"hello\"}\n{\"text\": \"world\"}\n");
  const CommandResult run = run_sextant(
      dir, "preprocess --input corpus.jsonl --json-key text --output-prefix data/corpus --append-eod");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.err, "");
  // 2 documents of 5 bytes + eod = 12 uint16 tokens = 24 bytes; .idx 34 + 2·12 + 3·8 = 82.
  EXPECT_NE(run.out.find("wrote data/corpus_text_document.bin and .idx"), std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("documents: 2\ntokens: 12\nbytes read: 36\nbytes written: 106 (.bin 24, "
                         ".idx 82)\ntime: "),
            std::string::npos)
      << run.out;
  const engine::data::IndexedDatasetReader reader(dir.file("data/corpus_text_document"));
  EXPECT_EQ(reader.num_documents(), 2);
  EXPECT_EQ(reader.num_tokens(), 12);
}

TEST(PreprocessCommand, BadInputExitsTwoWithFileAndLine) {
  TempDir dir;
  write_file(dir.file("corpus.jsonl"), "{\"text\": \"hello\"}\n{\"text\": \"unterminated}\n");
  const CommandResult run = run_sextant(dir, "preprocess --input corpus.jsonl --output-prefix corpus");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_EQ(run.out, "");
  EXPECT_EQ(run.err, "sextant: error: corpus.jsonl:2:24: not valid JSON\n");
  EXPECT_FALSE(std::filesystem::exists(dir.file("corpus_text_document.bin")));
  EXPECT_FALSE(std::filesystem::exists(dir.file("corpus_text_document.bin.partial")));

  const CommandResult missing = run_sextant(dir, "preprocess --input absent.jsonl --output-prefix corpus");
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_EQ(missing.err, "sextant: error: absent.jsonl: cannot open: No such file or directory\n");
}

// GPT-2 BPE with the tiny vocabulary of gpt2_bpe_tokenizer_test.cc, copied
// next to the corpus so messages name it as the user typed it.
void copy_tiny_bpe_files(const TempDir& dir) {
  write_file(dir.file("vocab.json"), read_file(SEXTANT_TEST_DATA_DIR "/gpt2_bpe/vocab.json"));
  write_file(dir.file("merges.txt"), read_file(SEXTANT_TEST_DATA_DIR "/gpt2_bpe/merges.txt"));
}

TEST(PreprocessCommand, Gpt2BpeWithVocabAndMergeFiles) {
  TempDir dir;
  copy_tiny_bpe_files(dir);
  write_file(dir.file("corpus.jsonl"), "{\"text\": \"Hello world\"}\n{\"text\": \"hello\"}\n");
  // Megatron's spelling, --merge-file, and the --merge-files alias.
  for (const char* merges_option : {"--merge-file", "--merge-files"}) {
    const CommandResult run =
        run_sextant(dir, std::string("preprocess --input corpus.jsonl --output-prefix corpus "
                                     "--append-eod --vocab-file vocab.json ") +
                             merges_option + " merges.txt");
    ASSERT_EQ(run.exit_code, 0) << run.err;
    // "Hello world" = Hello (262), Ġworld (267); "hello" = he (257), llo (260); each + eod.
    EXPECT_NE(run.out.find("wrote corpus_text_document.bin and .idx (GPT-2 BPE tokenizer, vocab "
                           "280)\ndocuments: 2\ntokens: 6\n"),
              std::string::npos)
        << run.out;
    const engine::data::IndexedDatasetReader reader(dir.file("corpus_text_document"));
    EXPECT_EQ(reader.tokens(0), (std::vector<int32_t>{262, 267, 279}));
    EXPECT_EQ(reader.tokens(1), (std::vector<int32_t>{257, 260, 279}));
  }
}

TEST(PreprocessCommand, BpeFilesComeTogetherAndBadOnesExitTwo) {
  TempDir dir;
  copy_tiny_bpe_files(dir);
  write_file(dir.file("corpus.jsonl"), "{\"text\": \"hello\"}\n");
  const std::string base = "preprocess --input corpus.jsonl --output-prefix corpus ";

  const CommandResult vocab_only = run_sextant(dir, base + "--vocab-file vocab.json");
  EXPECT_EQ(vocab_only.exit_code, 2);
  EXPECT_EQ(vocab_only.out, "");
  EXPECT_EQ(vocab_only.err,
            "sextant: error: vocab.json: --vocab-file needs --merge-file too: GPT-2 BPE reads both "
            "vocab.json and merges.txt\n");

  const CommandResult merges_only = run_sextant(dir, base + "--merge-file merges.txt");
  EXPECT_EQ(merges_only.exit_code, 2);
  EXPECT_EQ(merges_only.err,
            "sextant: error: merges.txt: --merge-file needs --vocab-file too: GPT-2 BPE reads both "
            "vocab.json and merges.txt\n");

  const CommandResult type_only = run_sextant(dir, base + "--tokenizer-type GPT2BPETokenizer");
  EXPECT_EQ(type_only.exit_code, 2);
  EXPECT_EQ(type_only.err,
            "sextant: error: --tokenizer-type: GPT2BPETokenizer needs --vocab-file (vocab.json) "
            "and --merge-file (merges.txt)\n");

  const CommandResult unknown_type = run_sextant(dir, base + "--tokenizer-type sentencepiece");
  EXPECT_EQ(unknown_type.exit_code, 2);
  EXPECT_NE(unknown_type.err.find("--tokenizer-type"), std::string::npos) << unknown_type.err;

  write_file(dir.file("bad.txt"), "#version: 0.2\nh  e\n");
  const CommandResult bad_merges =
      run_sextant(dir, base + "--vocab-file vocab.json --merge-file bad.txt");
  EXPECT_EQ(bad_merges.exit_code, 2);
  EXPECT_EQ(bad_merges.err,
            "sextant: error: bad.txt:2: expected two tokens separated by one space, found "
            "\"h  e\"\n");
  EXPECT_FALSE(std::filesystem::exists(dir.file("corpus_text_document.bin")));

  const CommandResult missing =
      run_sextant(dir, base + "--vocab-file absent.json --merge-file merges.txt");
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_EQ(missing.err, "sextant: error: absent.json: cannot open: No such file or directory\n");
}

}  // namespace
}  // namespace sextant::tools

namespace sextant::tools {
namespace {

// Issue 29, item 11: nothing kept silently, nothing empty written, the real cause named.
TEST(PreprocessCommand, DuplicateKeysEmptyInputAndInvalidUtf8ExitTwo) {
  TempDir dir;
  write_file(dir.file("dup.jsonl"), "{\"text\": \"a\", \"text\": \"b\"}\n");
  CommandResult run = run_sextant(dir, "preprocess --input dup.jsonl --output-prefix corpus");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_EQ(run.err, "sextant: error: dup.jsonl:1:15: the key \"text\" is given twice in one "
                     "object; each key may appear once\n");

  write_file(dir.file("empty.jsonl"), "");
  run = run_sextant(dir, "preprocess --input empty.jsonl --output-prefix out/corpus");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_EQ(run.err, "sextant: error: empty.jsonl: no documents: the file holds no JSON line (it "
                     "is empty or blank); nothing was written\n");
  EXPECT_FALSE(std::filesystem::exists(dir.file("out")));

  write_file(dir.file("latin1.jsonl"), "{\"text\": \"ok\"}\n{\"text\": \"caf\xe9\"}\n");
  run = run_sextant(dir, "preprocess --input latin1.jsonl --output-prefix corpus");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_EQ(run.err, "sextant: error: latin1.jsonl:2:14: invalid UTF-8 (byte 0xe9): JSON text "
                     "must be UTF-8 (RFC 8259 section 8.1; is the file in another encoding?)\n");
  EXPECT_FALSE(std::filesystem::exists(dir.file("corpus_text_document.bin")));
}

}  // namespace
}  // namespace sextant::tools
