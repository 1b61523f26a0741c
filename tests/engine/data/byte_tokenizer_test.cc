#include "engine/data/byte_tokenizer.h"

#include <gtest/gtest.h>

namespace sextant::engine::data {
namespace {

TEST(ByteTokenizer, OneTokenPerUtf8Byte) {
  const ByteTokenizer tokenizer;
  EXPECT_EQ(tokenizer.vocab_size(), 257);
  EXPECT_EQ(tokenizer.end_of_document(), 256);
  // "é" is U+00E9, two bytes in UTF-8: 0xC3 0xA9.
  EXPECT_EQ(tokenizer.encode("a\xC3\xA9\n"), (std::vector<int32_t>{97, 0xC3, 0xA9, 10}));
  EXPECT_TRUE(tokenizer.encode("").empty());
}

TEST(ByteTokenizer, RoundTripsEveryByte) {
  const ByteTokenizer tokenizer;
  std::string every_byte;
  for (int b = 0; b < 256; ++b) every_byte.push_back(static_cast<char>(b));
  const std::vector<int32_t> tokens = tokenizer.encode(every_byte);
  ASSERT_EQ(tokens.size(), 256u);
  for (int b = 0; b < 256; ++b) EXPECT_EQ(tokens[static_cast<size_t>(b)], b);
  EXPECT_EQ(tokenizer.decode(tokens), every_byte);
  const std::string text = "Ünïcödé, 日本語, emoji \xF0\x9F\x98\x80";
  EXPECT_EQ(tokenizer.decode(tokenizer.encode(text)), text);
}

TEST(ByteTokenizer, EndOfDocumentDecodesToNothing) {
  const ByteTokenizer tokenizer;
  EXPECT_EQ(tokenizer.decode(std::vector<int32_t>{104, 105, 256, 33}), "hi!");
  EXPECT_THROW(tokenizer.decode(std::vector<int32_t>{257}), std::out_of_range);
  EXPECT_THROW(tokenizer.decode(std::vector<int32_t>{-1}), std::out_of_range);
}

}  // namespace
}  // namespace sextant::engine::data
