// GPT-2 BPE against a tiny vocabulary whose ids can be worked out by hand
// (tests/data/gpt2_bpe/):
// - vocab.json: the 256 byte tokens with GPT-2's own ids (bytes_to_unicode's
//   order: '!'..'~' are 0..93, so a printable ASCII byte c is c - 33; the
//   non-printable bytes 0..32 are 188..220, so '\n' is 198 and ' ' ("Ġ") 220),
//   then one token per merge, 256 + its rank, then "<|endoftext|>" = 279; one
//   entry per line, so id i is on line i + 2;
// - merges.txt: "#version: 0.2", then the 23 merges below in rank order.
//   rank (id): 0 (256) "Ġ t"    1 (257) "h e"     2 (258) "l l"     3 (259) "Ġt he"
//              4 (260) "ll o"   5 (261) "H e"     6 (262) "He llo"  7 (263) "Ġ w"
//              8 (264) "o r"    9 (265) "Ġw or"  10 (266) "l d"    11 (267) "Ġwor ld"
//             12 (268) "' s"   13 (269) "4 2"    14 (270) "Ġ 42"   15 (271) "! !"
//             16 (272) "Ċ Ċ"   17 (273) "a a"    18 (274) "e l"    19 (275) "c a"
//             20 (276) "ca f"  21 (277) "Ã ©"    22 (278) "caf Ã©"
// The pre-tokenizer's expected pieces are those of Python's regex module with
// GPT-2's pattern.
#include "engine/data/gpt2_bpe_tokenizer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "engine/data/data_error.h"
#include "tests/support/temp_dir.h"

namespace sextant::engine::data {
namespace {

using Pieces = std::vector<std::string_view>;

const std::string kVocabPath = SEXTANT_TEST_DATA_DIR "/gpt2_bpe/vocab.json";
const std::string kMergesPath = SEXTANT_TEST_DATA_DIR "/gpt2_bpe/merges.txt";

const Gpt2BpeTokenizer& tiny() {
  static const Gpt2BpeTokenizer tokenizer = Gpt2BpeTokenizer::from_files(kVocabPath, kMergesPath);
  return tokenizer;
}

TEST(Gpt2BpeBytes, CharactersAreGpt2s) {
  EXPECT_EQ(gpt2_byte_to_unicode('!'), "!");
  EXPECT_EQ(gpt2_byte_to_unicode('~'), "~");
  EXPECT_EQ(gpt2_byte_to_unicode(0xE9), "\xC3\xA9");  // 'é' is printable Latin-1: itself
  EXPECT_EQ(gpt2_byte_to_unicode(0), "\xC4\x80");     // U+0100 'Ā', the first stand-in
  EXPECT_EQ(gpt2_byte_to_unicode('\n'), "\xC4\x8A");  // U+010A 'Ċ'
  EXPECT_EQ(gpt2_byte_to_unicode(' '), "\xC4\xA0");   // U+0120 'Ġ'
  EXPECT_EQ(gpt2_byte_to_unicode(0x7F), "\xC4\xA1");  // U+0121: 33 stand-ins (0..32) before it
  EXPECT_EQ(gpt2_byte_to_unicode(0xAD), "\xC5\x83");  // U+0143 'Ń', the 68th and last
}

TEST(Gpt2BpePretokenize, SplitsAsGpt2sRegex) {
  EXPECT_EQ(gpt2_pretokenize(""), Pieces{});
  EXPECT_EQ(gpt2_pretokenize("Hello world's  42!!\n\n"),
            (Pieces{"Hello", " world", "'s", " ", " 42", "!!", "\n\n"}));
  // Contractions are case-sensitive; an apostrophe after a space joins it as punctuation.
  EXPECT_EQ(
      gpt2_pretokenize("I'm they'll we've DON'T 'sup ''s"),
      (Pieces{"I", "'m", " they", "'ll", " we", "'ve", " DON", "'", "T", " '", "sup", " ''", "s"}));
  // A run of white space before a word leaves its last character to the word
  // (\s+(?!\S)); a single tab before a word is a piece of its own (\s+).
  EXPECT_EQ(gpt2_pretokenize("a   b\tc \n d\r\n"),
            (Pieces{"a", "  ", " b", "\t", "c", " \n", " d", "\r\n"}));
  EXPECT_EQ(gpt2_pretokenize("  hi  "), (Pieces{" ", " hi", "  "}));
  EXPECT_EQ(gpt2_pretokenize("3.14, x=2^10 (ok)?"),
            (Pieces{"3", ".", "14", ",", " x", "=", "2", "^", "10", " (", "ok", ")?"}));
}

TEST(Gpt2BpePretokenize, SplitsUnicodeAsGpt2sRegex) {
  // Latin-1 letters, an em dash, curly quotes, CJK, the ideographic comma, a
  // superscript and a fraction (numbers), emoji with a skin-tone modifier (other).
  EXPECT_EQ(gpt2_pretokenize(
                "naïve café — “quoted” 日本語テキスト、x² ½ 😀👍🏽!"),
            (Pieces{"naïve", " café", " —", " “", "quoted", "”", " 日本語テキスト", "、", "x", "²",
                    " ½", " 😀👍🏽!"}));
  // No-break, ideographic and em spaces are white space, but only U+0020 joins a word.
  EXPECT_EQ(gpt2_pretokenize("a\u00A0b\u3000c\u2003 d"),
            (Pieces{"a", "\u00A0", "b", "\u3000", "c", "\u2003", " d"}));
}

TEST(Gpt2BpePretokenize, TakesInvalidUtf8ByteByByteAsPunctuation) {
  EXPECT_EQ(gpt2_pretokenize("a\xFF\xFE b\xC3"), (Pieces{"a", "\xFF\xFE", " b", "\xC3"}));
  // A surrogate (ED A0 80) and an overlong '/' (C0 AF) are not UTF-8 either.
  EXPECT_EQ(gpt2_pretokenize("x\xED\xA0\x80y\xC0\xAF"),
            (Pieces{"x", "\xED\xA0\x80", "y", "\xC0\xAF"}));
}

TEST(Gpt2BpeTokenizer, LoadsTheTinyVocabulary) {
  EXPECT_EQ(tiny().description(), "GPT-2 BPE tokenizer");
  EXPECT_EQ(tiny().vocab_size(), 280);
  EXPECT_EQ(tiny().end_of_document(), 279);
  EXPECT_EQ(tiny().merge_count(), 23);
}

TEST(Gpt2BpeTokenizer, EncodesHandComputedIds) {
  const Gpt2BpeTokenizer& t = tiny();
  // "Hello": H e l l o; the lowest rank first: "l l" (2), then "ll o" (4), "H e"
  // (5), "He llo" (6). " world": "Ġ w" (7), "o r" (8), "Ġw or" (9), "l d" (10),
  // "Ġwor ld" (11). " " alone is byte 32: 220. " 42": "4 2" (13) then "Ġ 42" (14).
  EXPECT_EQ(t.encode("Hello world's  42!!\n\n"),
            (std::vector<int32_t>{262, 267, 268, 220, 270, 271, 272}));
  // "Hel": "H e" (5) is taken before "e l" (18): He + 'l' (108 - 33).
  EXPECT_EQ(t.encode("Hel"), (std::vector<int32_t>{261, 75}));
  // "hello": "h e" (1), "l l" (2), "ll o" (4); "he llo" is no merge.
  EXPECT_EQ(t.encode("hello"), (std::vector<int32_t>{257, 260}));
  // "the" without its space: 't' (116 - 33) + "he"; " the": "Ġ t" (0), "h e" (1), "Ġt he" (3).
  EXPECT_EQ(t.encode("the the"), (std::vector<int32_t>{83, 257, 259}));
  // " café": "c a" (19), "ca f" (20), then é's bytes C3 A9 ("Ã ©", 21), "caf Ã©" (22).
  EXPECT_EQ(t.encode(" caf\xC3\xA9"), (std::vector<int32_t>{220, 278}));
  // A byte alone: '\n' 198; 0xFF is printable Latin-1, id 106 + (0xFF - 0xAE) = 187.
  EXPECT_EQ(t.encode("\n"), (std::vector<int32_t>{198}));
  EXPECT_EQ(t.encode("\xFF"), (std::vector<int32_t>{187}));
  EXPECT_TRUE(t.encode("").empty());
}

TEST(Gpt2BpeTokenizer, MergesEveryOccurrenceOfTheBestPairLeftToRight) {
  // encoder.py merges "a a" wherever it occurs, left to right: aa aa a.
  EXPECT_EQ(tiny().encode("aaaaa"), (std::vector<int32_t>{273, 273, 64}));
}

TEST(Gpt2BpeTokenizer, EndOfTextInTheTextIsPlainText) {
  // encoder.py gives special tokens in the text no special meaning: "<|", "endoftext", "|>".
  const std::vector<int32_t> tokens = tiny().encode("<|endoftext|>");
  EXPECT_EQ(std::count(tokens.begin(), tokens.end(), tiny().end_of_document()), 0);
  EXPECT_EQ(tokens.size(), 13u);  // no merge applies to these bytes
}

TEST(Gpt2BpeTokenizer, RoundTrips) {
  const Gpt2BpeTokenizer& t = tiny();
  std::string every_byte;
  for (int b = 0; b < 256; ++b) every_byte.push_back(static_cast<char>(b));
  EXPECT_EQ(t.decode(t.encode(every_byte)), every_byte);
  for (const std::string text :
       {"Hello world's  42!!\n\n",
        "naïve café — “quoted” 日本語テキスト 😀👍🏽!", "aaaaa \t\r\n"}) {
    EXPECT_EQ(t.decode(t.encode(text)), text);
  }
  std::mt19937 rng(12345);  // fixed: the cases are the same on every run
  std::uniform_int_distribution<int> byte(0, 255), length(0, 64), ascii(0, 3);
  for (int i = 0; i < 200; ++i) {
    std::string text;
    for (int n = length(rng); n > 0; --n)  // bias towards ASCII, where most merges are
      text.push_back(static_cast<char>(ascii(rng) == 0 ? byte(rng) : 32 + byte(rng) % 95));
    ASSERT_EQ(t.decode(t.encode(text)), text) << "case " << i;
  }
}

TEST(Gpt2BpeTokenizer, DecodeSkipsEndOfDocumentAndRejectsUnknownIds) {
  const Gpt2BpeTokenizer& t = tiny();
  EXPECT_EQ(t.decode(std::vector<int32_t>{262, 279, 267}), "Hello world");
  try {
    t.decode(std::vector<int32_t>{280});
    FAIL() << "decoded an id past the vocabulary";
  } catch (const std::out_of_range& e) {
    EXPECT_STREQ(e.what(), "GPT-2 BPE tokenizer: token id 280 is outside [0, 280)");
  }
  EXPECT_THROW(t.decode(std::vector<int32_t>{-1}), std::out_of_range);
}

// The message from_strings throws for a vocab.json and merges.txt.
std::string load_error(std::string_view vocab, std::string_view merges) {
  try {
    Gpt2BpeTokenizer::from_strings(vocab, merges);
  } catch (const DataError& e) {
    return e.what();
  }
  return "(no error)";
}

std::string tiny_vocab() { return sextant::testing::read_file(kVocabPath); }

TEST(Gpt2BpeTokenizer, MalformedVocabularyNamesFileAndLine) {
  EXPECT_EQ(load_error("{\"a\": 1,}", ""), "vocab.json:1:9: not valid JSON");
  EXPECT_EQ(load_error("{\n  \"a\": 0,\n  \"b\" 1\n}", ""), "vocab.json:3:7: not valid JSON");
  EXPECT_EQ(load_error("", ""), "vocab.json:1:1: not valid JSON");
  EXPECT_EQ(load_error("\n[1, 2]", ""),
            "vocab.json:2: expected an object from token strings to ids, found an array");
  EXPECT_EQ(load_error("{}", ""), "vocab.json: no tokens");
  EXPECT_EQ(load_error("{\n  \"a\": \"1\"\n}", ""),
            "vocab.json:2: the id of \"a\" is a string, expected an integer >= 0");
  EXPECT_EQ(load_error("{\n  \"a\": -1\n}", ""),
            "vocab.json:2: the id of \"a\" is negative (-1), expected an integer >= 0");
  EXPECT_EQ(load_error("{\n  \"a\": 1.5\n}", ""),
            "vocab.json:2: the id of \"a\" is a fraction (1.5), expected an integer >= 0");
  EXPECT_EQ(load_error("{\n  \"a\": [0]\n}", ""),
            "vocab.json:2: the id of \"a\" is an array, expected an integer >= 0");
  EXPECT_EQ(load_error("{\n  \"a\": 0,\n  \"a\": 1\n}", ""),
            "vocab.json:3: \"a\" appears twice (lines 2 and 3)");
  EXPECT_EQ(load_error("{\n  \"a\": 0,\n  \"b\": 0\n}", ""),
            "vocab.json:3: id 0 is given to both \"a\" (line 2) and \"b\"");
  EXPECT_EQ(load_error("{\n  \"a\": 0,\n  \"b\": 5\n}", ""),
            "vocab.json:3: the id of \"b\" (5) is not below the number of tokens (2): ids must be "
            "0 to 1, each once");
  EXPECT_EQ(load_error("{\n  \"a\": 0,\n  \"b\": 4294967296\n}", ""),
            "vocab.json:3: the id of \"b\" (4294967296) is above 2^31 - 1");
  // A raw space is not a byte character: GPT-2 spells it "Ġ".
  EXPECT_EQ(load_error("{\n  \"a b\": 0\n}", ""),
            "vocab.json:2: \"a b\" has U+0020, which is not one of GPT-2's 256 byte characters "
            "(bytes_to_unicode)");
  EXPECT_EQ(load_error("{\"!\": 0}", ""),
            "vocab.json: no token for byte 0x00 (\"\xC4\x80\"), one of 255 missing bytes: "
            "byte-level BPE needs all 256");

  std::string without_eot = tiny_vocab();
  const std::string eot_line = ",\n  \"<|endoftext|>\": 279";
  ASSERT_NE(without_eot.find(eot_line), std::string::npos);
  without_eot.erase(without_eot.find(eot_line), eot_line.size());
  EXPECT_EQ(load_error(without_eot, ""),
            "vocab.json: no \"<|endoftext|>\" token (the end-of-document token)");
}

TEST(Gpt2BpeTokenizer, MalformedMergesNameFileAndLine) {
  const std::string vocab = tiny_vocab();
  EXPECT_EQ(load_error(vocab, "#version: 0.2\n\xC4\xA0 t\nh  e\n"),
            "merges.txt:3: expected two tokens separated by one space, found \"h  e\"");
  EXPECT_EQ(load_error(vocab, "#version: 0.2\nh e l\n"),
            "merges.txt:2: expected two tokens separated by one space, found \"h e l\"");
  EXPECT_EQ(load_error(vocab, "#version: 0.2\nzz z\n"),
            "merges.txt:2: \"zz\" is not in vocab.json");
  EXPECT_EQ(load_error(vocab, "#version: 0.2\nx y\n"),
            "merges.txt:2: merging gives \"xy\", which is not in vocab.json");
  EXPECT_EQ(load_error(vocab, "#version: 0.2\n\xC4\xA0 t\nh e\n\xC4\xA0 t\n"),
            "merges.txt:4: \"\xC4\xA0 t\" is also on line 2");
}

TEST(Gpt2BpeTokenizer, MergesWithoutVersionLineOrWithCrLf) {
  const std::string vocab = tiny_vocab();
  // Without "#version" the first line is a merge; blank lines are skipped.
  const Gpt2BpeTokenizer plain = Gpt2BpeTokenizer::from_strings(vocab, "h e\r\n\r\nl l\r\n");
  EXPECT_EQ(plain.merge_count(), 2);
  EXPECT_EQ(plain.encode("hell"), (std::vector<int32_t>{257, 258}));
}

TEST(Gpt2BpeTokenizer, UnreadableFileIsNamed) {
  try {
    Gpt2BpeTokenizer::from_files("/nonexistent/vocab.json", kMergesPath);
    FAIL() << "loaded a missing file";
  } catch (const DataError& e) {
    EXPECT_STREQ(e.what(), "/nonexistent/vocab.json: cannot open: No such file or directory");
  }
}

}  // namespace
}  // namespace sextant::engine::data
