#include "engine/data/jsonl_reader.h"

#include <gtest/gtest.h>

#include "engine/data/data_error.h"
#include "tests/support/temp_dir.h"

namespace sextant::engine::data {
namespace {

using sextant::testing::TempDir;
using sextant::testing::write_file;

std::vector<std::string> read_all(const std::string& path, const std::string& key = "text") {
  JsonlReader reader(path, key);
  std::vector<std::string> out;
  std::string text;
  while (reader.next(text)) out.push_back(text);
  return out;
}

// The error text for a file holding `contents`.
std::string error_for(const std::string& contents, const std::string& key = "text") {
  TempDir dir;
  const std::string path = dir.file("c.jsonl");
  write_file(path, contents);
  try {
    read_all(path, key);
  } catch (const DataError& e) {
    return std::string(e.what()).substr(path.size());
  }
  return "";
}

TEST(JsonlReader, ReadsTheKeyOfEachLine) {
  TempDir dir;
  const std::string path = dir.file("c.jsonl");
  // Blank lines are skipped; CRLF line ends are JSON whitespace; escapes are decoded.
  write_file(path,
             "{\"id\": 1, \"text\": \"first\"}\n"
             "\n"
             "  {\"text\": \"line\\nbreak \\u00e9\", \"extra\": [1, 2]}\r\n"
             "{\"text\": \"\"}");
  EXPECT_EQ(read_all(path), (std::vector<std::string>{"first", "line\nbreak \xC3\xA9", ""}));
  JsonlReader reader(path, "text");
  std::string text;
  while (reader.next(text)) {
  }
  EXPECT_EQ(reader.line(), 4);
  EXPECT_EQ(reader.bytes_read(), (26 + 1) + (0 + 1) + (50 + 1) + 12);  // the last has no newline
}

TEST(JsonlReader, ErrorsNameFileAndLine) {
  EXPECT_EQ(error_for("{\"text\": \"a\"}\n{\"text\": \"b\n"), ":2:12: not valid JSON");
  // The column is where the parser gave up: "tra" cannot begin "true".
  EXPECT_EQ(error_for("{\"text\": \"a\"} trailing\n"), ":1:17: not valid JSON");
  EXPECT_EQ(error_for("[\"text\"]\n"), ":1: expected a JSON object, got array");
  EXPECT_EQ(error_for("{\"id\": 1, \"body\": \"a\"}\n"), ":1: no key \"text\" (keys: \"body\", \"id\")");
  EXPECT_EQ(error_for("{}\n"), ":1: no key \"text\" (keys: none)");
  EXPECT_EQ(error_for("{\"text\": [\"a\", \"b\"]}\n"), ":1: \"text\" is array, expected a string");
  EXPECT_EQ(error_for("{\"text\": null}\n"), ":1: \"text\" is null, expected a string");
  EXPECT_EQ(error_for("{\"body\": 3}\n", "body"), ":1: \"body\" is number, expected a string");
  // Not UTF-8: said so, at the byte (issue 29 item 11; it used to be "not valid JSON").
  EXPECT_EQ(error_for("{\"text\": \"\xFF\"}\n"),
            ":1:11: invalid UTF-8 (byte 0xff): JSON text must be UTF-8 (RFC 8259 section 8.1; is "
            "the file in another encoding?)");
}

TEST(JsonlReader, AKeyGivenTwiceIsRefusedNamingIt) {
  // nlohmann alone keeps one of the two values silently.
  EXPECT_EQ(error_for("{\"text\": \"a\"}\n{\"text\": \"b\", \"id\": 2, \"text\": \"c\"}\n"),
            ":2:24: the key \"text\" is given twice in one object; each key may appear once");
  EXPECT_EQ(error_for("{\"text\": \"a\", \"meta\": {\"k\": 1, \"k\": 2}}\n"),
            ":1:32: the key \"k\" is given twice in one object; each key may appear once");
  // The same key in two objects is no repetition.
  EXPECT_EQ(error_for("{\"text\": \"a\", \"m\": {\"text\": 1}}\n"), "");
}

TEST(JsonlReader, ANulByteIsNotText) {
  EXPECT_EQ(error_for(std::string("{\"text\": \"a\0\"}\n", 15)),
            ":1:12: the file contains a NUL byte here: not a text file (a binary file, or UTF-16 "
            "text?)");
}

TEST(JsonlReader, MissingFile) {
  TempDir dir;
  try {
    JsonlReader reader(dir.file("absent.jsonl"), "text");
    FAIL() << "opened a missing file";
  } catch (const DataError& e) {
    EXPECT_STREQ(e.what(), (dir.file("absent.jsonl") + ": cannot open: No such file or directory").c_str());
  }
}

}  // namespace
}  // namespace sextant::engine::data
