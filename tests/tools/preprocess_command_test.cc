// `sextant preprocess` as a user runs it: the built binary, its output and exit codes.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>

#include "engine/data/indexed_dataset_reader.h"
#include "tests/support/temp_dir.h"

namespace sextant::tools {
namespace {

using sextant::testing::read_file;
using sextant::testing::TempDir;
using sextant::testing::write_file;

struct CommandResult {
  int exit_code;
  std::string out, err;
};

CommandResult run_sextant(const TempDir& dir, const std::string& arguments) {
  const std::string command = "cd '" + dir.path().string() + "' && '" SEXTANT_BINARY "' " +
                              arguments + " >stdout.txt 2>stderr.txt";
  const int status = std::system(command.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, read_file(dir.file("stdout.txt")),
          read_file(dir.file("stderr.txt"))};
}

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

}  // namespace
}  // namespace sextant::tools
