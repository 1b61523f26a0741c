#include "engine/data/gpt2_bpe_tokenizer.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <stdexcept>

#include "engine/data/data_error.h"

namespace sextant::engine::data {

namespace {

// ---------------------------------------------------------------------------
// bytes_to_unicode (GPT-2's encoder.py): the printable bytes '!'..'~',
// U+00A1..U+00AC and U+00AE..U+00FF stand for themselves; the other 68 bytes,
// in increasing order, for U+0100, U+0101, ... (space, byte 32, is the 33rd:
// U+0120 "Ġ"). Every character is below U+0144.
constexpr int kByteCharacterLimit = 0x144;

bool printable_byte(int b) {
  return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

struct ByteCharacters {
  std::array<int32_t, 256> code_point{};            // byte -> its character
  std::array<int16_t, kByteCharacterLimit> byte{};  // character -> byte, or -1
  ByteCharacters() {
    byte.fill(-1);
    int next = 256;
    for (int b = 0; b < 256; ++b) {
      code_point[b] = printable_byte(b) ? b : next++;
      byte[code_point[b]] = static_cast<int16_t>(b);
    }
  }
};

const ByteCharacters& byte_characters() {
  static const ByteCharacters table;
  return table;
}

void append_utf8(int32_t cp, std::string& out) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

// One code point of UTF-8 at `text[i]`: its value, or -1 for a byte that does
// not start a well-formed sequence (then length 1). Overlong forms, surrogates
// and values past U+10FFFF are not well-formed (Unicode 15, table 3-7).
struct CodePoint {
  int32_t value;
  int length;
};

CodePoint decode_utf8(std::string_view text, std::size_t i) {
  const auto b0 = static_cast<unsigned char>(text[i]);
  if (b0 < 0x80) return {b0, 1};
  int length;
  int32_t value, smallest;
  if ((b0 & 0xE0) == 0xC0) {
    length = 2, value = b0 & 0x1F, smallest = 0x80;
  } else if ((b0 & 0xF0) == 0xE0) {
    length = 3, value = b0 & 0x0F, smallest = 0x800;
  } else if ((b0 & 0xF8) == 0xF0) {
    length = 4, value = b0 & 0x07, smallest = 0x10000;
  } else {
    return {-1, 1};
  }
  if (i + length > text.size()) return {-1, 1};
  for (int k = 1; k < length; ++k) {
    const auto b = static_cast<unsigned char>(text[i + k]);
    if ((b & 0xC0) != 0x80) return {-1, 1};
    value = (value << 6) | (b & 0x3F);
  }
  if (value < smallest || value > 0x10FFFF || (value >= 0xD800 && value <= 0xDFFF)) return {-1, 1};
  return {value, length};
}

// ---------------------------------------------------------------------------
// The pre-tokenizer's character classes.
enum class CharClass : uint8_t { kLetter, kNumber, kSpace, kOther };

struct ClassRange {
  int32_t first, last;
  CharClass char_class;
};

// Code points from U+0080 that are not letters, by block; anything not listed
// is taken for a letter. Exact (against Python's regex module, Unicode 14) for
// every assigned code point inside these ranges; see gpt2_pretokenize for what
// it gets wrong elsewhere.
// clang-format off
constexpr CharClass O = CharClass::kOther, N = CharClass::kNumber, S = CharClass::kSpace;
constexpr ClassRange kNonLetters[] = {
    // Latin-1 Supplement: C1 controls, NEL, NBSP, punctuation and symbols, ²³¹¼½¾, × ÷.
    {0x80, 0x84, O}, {0x85, 0x85, S}, {0x86, 0x9F, O}, {0xA0, 0xA0, S}, {0xA1, 0xA9, O},
    {0xAB, 0xB1, O}, {0xB2, 0xB3, N}, {0xB4, 0xB4, O}, {0xB6, 0xB8, O}, {0xB9, 0xB9, N},
    {0xBB, 0xBB, O}, {0xBC, 0xBE, N}, {0xBF, 0xBF, O}, {0xD7, 0xD7, O}, {0xF7, 0xF7, O},
    {0x300, 0x36F, O},  // combining diacritical marks
    // Arabic punctuation and digits.
    {0x60C, 0x60C, O}, {0x61B, 0x61B, O}, {0x61F, 0x61F, O}, {0x660, 0x669, N},
    {0x66A, 0x66D, O}, {0x6F0, 0x6F9, N},
    {0x964, 0x965, O}, {0x966, 0x96F, N},  // Devanagari danda and digits
    {0xE50, 0xE59, N},                      // Thai digits
    {0x1680, 0x1680, S},                    // Ogham space mark
    // General Punctuation: spaces, dashes, quotes, ellipsis, format characters.
    {0x2000, 0x200A, S}, {0x200B, 0x2027, O}, {0x2028, 0x2029, S}, {0x202A, 0x202E, O},
    {0x202F, 0x202F, S}, {0x2030, 0x205E, O}, {0x205F, 0x205F, S}, {0x2060, 0x206F, O},
    // Superscript and subscript digits and signs; currency; combining marks for symbols.
    {0x2070, 0x2070, N}, {0x2072, 0x2073, O}, {0x2074, 0x2079, N}, {0x207A, 0x207E, O},
    {0x2080, 0x2089, N}, {0x208A, 0x208F, O}, {0x209D, 0x20FF, O},
    // Number forms (fractions, Roman numerals); arrows, math, technical, OCR.
    {0x2150, 0x2182, N}, {0x2185, 0x2189, N}, {0x218A, 0x245F, O},
    // Enclosed alphanumerics: circled numbers are numbers, circled letters symbols.
    {0x2460, 0x249B, N}, {0x249C, 0x24E9, O}, {0x24EA, 0x24FF, N},
    // Box drawing, shapes, miscellaneous symbols, dingbats (with their digits), arrows.
    {0x2500, 0x2775, O}, {0x2776, 0x2793, N}, {0x2794, 0x2BFF, O},
    {0x2E00, 0x2E2E, O}, {0x2E30, 0x2E7F, O},  // supplemental punctuation (U+2E2F is a letter)
    // CJK symbols and punctuation: ideographic space, 、。「」 etc., Hangzhou numerals.
    {0x3000, 0x3000, S}, {0x3001, 0x3004, O}, {0x3007, 0x3007, N}, {0x3008, 0x3020, O},
    {0x3021, 0x3029, N}, {0x302A, 0x3030, O}, {0x3036, 0x3037, O}, {0x3038, 0x303A, N},
    {0x303D, 0x303F, O},
    {0x30FB, 0x30FB, O},  // katakana middle dot
    // Variation selectors, vertical and small forms, byte order mark.
    {0xFE00, 0xFE1F, O}, {0xFE30, 0xFE6F, O}, {0xFEFF, 0xFEFF, O},
    // Fullwidth punctuation and digits; halfwidth CJK punctuation; fullwidth symbols, specials.
    {0xFF01, 0xFF0F, O}, {0xFF10, 0xFF19, N}, {0xFF1A, 0xFF20, O}, {0xFF3B, 0xFF40, O},
    {0xFF5B, 0xFF65, O}, {0xFFE0, 0xFFFF, O},
    // Game symbols, enclosed alphanumeric supplement, emoji, legacy computing.
    {0x1F000, 0x1F0FF, O}, {0x1F100, 0x1F10C, N}, {0x1F10D, 0x1FAFF, O}, {0x1FB00, 0x1FBEF, O},
    {0x1FBF0, 0x1FBF9, N},
    {0xE0000, 0xE007F, O}, {0xE0100, 0xE01EF, O},  // tags, variation selectors supplement
};
// clang-format on

CharClass classify(int32_t cp) {
  if (cp < 0) return CharClass::kOther;  // not UTF-8
  if (cp < 0x80) {
    if ((cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z')) return CharClass::kLetter;
    if (cp >= '0' && cp <= '9') return CharClass::kNumber;
    if (cp == ' ' || (cp >= '\t' && cp <= '\r')) return CharClass::kSpace;
    return CharClass::kOther;
  }
  const auto* end = std::end(kNonLetters);
  const auto* it =
      std::upper_bound(std::begin(kNonLetters), end, cp,
                       [](int32_t value, const ClassRange& r) { return value < r.first; });
  if (it != std::begin(kNonLetters) && cp <= (it - 1)->last) return (it - 1)->char_class;
  return CharClass::kLetter;
}

// ---------------------------------------------------------------------------
// Reading vocab.json with nlohmann's SAX parser, so each problem can be given
// its line: the parser reads from a stream whose position, at each event, is
// just past the token it reported (or one character of look-ahead past a number).

// Lines of a text, for offsets that only grow.
class LineCounter {
 public:
  explicit LineCounter(std::string_view text) : text_(text) {}
  /// 1-based line of the byte at `offset`.
  int64_t line_of(std::size_t offset) {
    offset = std::min(offset, text_.size());
    if (offset < counted_) counted_ = 0, newlines_ = 0;  // not expected; stay correct
    newlines_ += std::count(text_.begin() + static_cast<std::ptrdiff_t>(counted_),
                            text_.begin() + static_cast<std::ptrdiff_t>(offset), '\n');
    counted_ = offset;
    return newlines_ + 1;
  }

 private:
  std::string_view text_;
  std::size_t counted_ = 0;
  int64_t newlines_ = 0;
};

struct VocabEntry {
  std::string token;  // as vocab.json spells it
  int64_t id;
  int64_t line;
};

class VocabReader : public nlohmann::json::json_sax_t {
 public:
  VocabReader(std::string_view text, std::istream& stream)
      : lines_(text), text_(text), stream_(stream) {}

  std::vector<VocabEntry> entries;
  // The first problem found, if any.
  std::optional<std::string> error;
  int64_t error_line = 0, error_column = 0;

  bool null() override { return value("null"); }
  bool boolean(bool) override { return value("a boolean"); }
  bool number_integer(number_integer_t v) override {  // only negative numbers come here
    return value(depth_ == 1 ? "negative (" + std::to_string(v) + ")" : "a number");
  }
  bool number_unsigned(number_unsigned_t v) override {
    if (depth_ != 1) return value("a number");
    if (v > static_cast<number_unsigned_t>(INT32_MAX))
      return fail("the id of \"" + key_ + "\" (" + std::to_string(v) + ") is above 2^31 - 1",
                  key_line_);
    entries.push_back({key_, static_cast<int64_t>(v), key_line_});
    return true;
  }
  bool number_float(number_float_t, const string_t& s) override {
    return value("a fraction (" + s + ")");
  }
  bool string(string_t&) override { return value("a string"); }
  bool binary(binary_t&) override { return value("binary"); }
  bool start_object(std::size_t) override {
    if (depth_ == 0) return ++depth_, true;
    return value("an object");
  }
  bool key(string_t& k) override {
    key_ = k;
    key_line_ = lines_.line_of(position() - 1);  // the key's closing quote
    const auto [it, inserted] = key_lines_.emplace(key_, key_line_);
    if (!inserted)
      return fail("\"" + key_ + "\" appears twice (lines " + std::to_string(it->second) + " and " +
                      std::to_string(key_line_) + ")",
                  key_line_);
    return true;
  }
  bool end_object() override { return --depth_, true; }
  bool start_array(std::size_t) override { return value("an array"); }
  bool end_array() override { return true; }
  bool parse_error(std::size_t byte, const std::string&,
                   const nlohmann::detail::exception&) override {
    // `byte` is the 1-based offset where parsing failed.
    const std::size_t at = byte > 0 ? byte - 1 : 0;
    const int64_t line = lines_.line_of(at);
    const std::size_t line_start = at == 0 ? std::string_view::npos : text_.rfind('\n', at - 1);
    const int64_t column =
        static_cast<int64_t>(line_start == std::string_view::npos ? at + 1 : at - line_start);
    return fail("not valid JSON", line, column);
  }

 private:
  std::size_t position() {
    const auto offset = stream_.rdbuf()->pubseekoff(0, std::ios_base::cur, std::ios_base::in);
    return offset < 0 ? text_.size() : static_cast<std::size_t>(offset);
  }

  // A value that is not an id: at the top level, the file is not an object;
  // inside it, an entry is wrong.
  bool value(const std::string& what) {
    if (depth_ == 0)
      return fail("expected an object from token strings to ids, found " + what,
                  lines_.line_of(position() - 1));
    return fail("the id of \"" + key_ + "\" is " + what + ", expected an integer >= 0", key_line_);
  }

  bool fail(std::string message, int64_t line, int64_t column = 0) {
    if (!error) error = std::move(message), error_line = line, error_column = column;
    return false;  // stops the parser
  }

  LineCounter lines_;
  std::string_view text_;
  std::istream& stream_;
  int depth_ = 0;
  std::string key_;
  int64_t key_line_ = 0;
  std::unordered_map<std::string, int64_t> key_lines_;
};

std::string read_whole_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw DataError(path, std::string("cannot open: ") + std::strerror(errno));
  std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  if (in.bad()) throw DataError(path, std::string("read failed: ") + std::strerror(errno));
  return text;
}

std::string hex_byte(int b) {
  static constexpr char kDigits[] = "0123456789ABCDEF";
  return std::string("0x") + kDigits[b >> 4] + kDigits[b & 15];
}

std::string code_point_name(int32_t cp) {
  char text[16];
  std::snprintf(text, sizeof text, "U+%04X", static_cast<unsigned>(cp));
  return text;
}

constexpr int32_t kNoMerge = INT32_MAX;

uint64_t pair_key(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

}  // namespace

// ---------------------------------------------------------------------------

std::string gpt2_byte_to_unicode(uint8_t b) {
  std::string out;
  append_utf8(byte_characters().code_point[b], out);
  return out;
}

std::vector<std::string_view> gpt2_pretokenize(std::string_view text) {
  // One entry per code point (or stray byte): where it starts, its class, and
  // the character itself for the ' ' and contraction tests.
  struct Char {
    std::size_t offset;
    int32_t value;
    CharClass char_class;
  };
  std::vector<Char> chars;
  chars.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    const CodePoint cp = decode_utf8(text, i);
    chars.push_back({i, cp.value, classify(cp.value)});
    i += static_cast<std::size_t>(cp.length);
  }
  const std::size_t n = chars.size();
  auto offset = [&](std::size_t k) { return k < n ? chars[k].offset : text.size(); };
  auto is = [&](std::size_t k, char c) { return k < n && chars[k].value == c; };

  std::vector<std::string_view> pieces;
  std::size_t k = 0;
  while (k < n) {
    std::size_t end = k;
    // 's|'t|'re|'ve|'m|'ll|'d (case-sensitive, ASCII apostrophe only)
    if (is(k, '\'') && (is(k + 1, 's') || is(k + 1, 't') || is(k + 1, 'm') || is(k + 1, 'd'))) {
      end = k + 2;
    } else if (is(k, '\'') &&
               ((is(k + 1, 'r') && is(k + 2, 'e')) || (is(k + 1, 'v') && is(k + 2, 'e')) ||
                (is(k + 1, 'l') && is(k + 2, 'l')))) {
      end = k + 3;
    } else {
      // ` ?\p{L}+`, ` ?\p{N}+`, ` ?[^\s\p{L}\p{N}]+`: an optional U+0020, then a
      // run of one class. Only one of the three can match, the class of the
      // first character after the optional space decides which.
      const std::size_t first = is(k, ' ') ? k + 1 : k;
      const CharClass run = first < n ? chars[first].char_class : CharClass::kSpace;
      if (run != CharClass::kSpace) {
        end = first;
        while (end < n && chars[end].char_class == run) ++end;
      } else {
        // Here chars[k] is white space (had it been anything else, `run` would
        // be its class). `\s+(?!\S)`: the whole run of white space if it ends the text, else all
        // but its last character (which then starts the next piece, as the
        // optional space of a word when it is U+0020); `\s+` when the run is a
        // single character before a non-space.
        std::size_t run_end = k;
        while (run_end < n && chars[run_end].char_class == CharClass::kSpace) ++run_end;
        end = (run_end == n || run_end - k == 1) ? run_end : run_end - 1;
      }
    }
    // One alternative always matches: end > k.
    pieces.push_back(text.substr(offset(k), offset(end) - offset(k)));
    k = end;
  }
  return pieces;
}

Gpt2BpeTokenizer Gpt2BpeTokenizer::from_files(const std::string& vocab_path,
                                              const std::string& merges_path) {
  const std::string vocab = read_whole_file(vocab_path);
  const std::string merges = read_whole_file(merges_path);
  return from_strings(vocab, merges, vocab_path, merges_path);
}

Gpt2BpeTokenizer Gpt2BpeTokenizer::from_strings(std::string_view vocab_json,
                                                std::string_view merges_txt,
                                                const std::string& vocab_name,
                                                const std::string& merges_name) {
  // vocab.json
  std::istringstream stream{std::string(vocab_json)};
  VocabReader reader(vocab_json, stream);
  nlohmann::json::sax_parse(stream, &reader);
  if (reader.error)
    throw DataError(vocab_name, *reader.error, reader.error_line, reader.error_column);
  if (reader.entries.empty()) throw DataError(vocab_name, "no tokens");

  Gpt2BpeTokenizer t;
  const auto size = static_cast<int64_t>(reader.entries.size());
  t.vocab_size_ = size;
  t.bytes_of_.resize(static_cast<std::size_t>(size));
  t.byte_ids_.fill(-1);
  std::vector<const VocabEntry*> owner(static_cast<std::size_t>(size), nullptr);  // id -> entry
  std::unordered_map<std::string_view, int32_t> ids;  // token as vocab.json spells it -> id
  const ByteCharacters& characters = byte_characters();
  for (const VocabEntry& e : reader.entries) {
    // Ids are Megatron's: vocab_size = len(encoder), so they must be 0..size-1, each once.
    if (e.id >= size)
      throw DataError(vocab_name,
                      "the id of \"" + e.token + "\" (" + std::to_string(e.id) +
                          ") is not below the number of tokens (" + std::to_string(size) +
                          "): ids must be 0 to " + std::to_string(size - 1) + ", each once",
                      e.line);
    const auto id = static_cast<std::size_t>(e.id);
    if (owner[id] != nullptr)
      throw DataError(vocab_name,
                      "id " + std::to_string(e.id) + " is given to both \"" + owner[id]->token +
                          "\" (line " + std::to_string(owner[id]->line) + ") and \"" + e.token +
                          "\"",
                      e.line);
    if (e.token.empty()) throw DataError(vocab_name, "empty token", e.line);
    std::string bytes;
    for (std::size_t i = 0; i < e.token.size();) {
      const CodePoint cp = decode_utf8(e.token, i);  // nlohmann has checked the UTF-8
      if (cp.value < 0 || cp.value >= kByteCharacterLimit || characters.byte[cp.value] < 0)
        throw DataError(vocab_name,
                        "\"" + e.token + "\" has " + code_point_name(cp.value) +
                            ", which is not one of GPT-2's 256 byte characters (bytes_to_unicode)",
                        e.line);
      bytes.push_back(static_cast<char>(characters.byte[cp.value]));
      i += static_cast<std::size_t>(cp.length);
    }
    if (bytes.size() == 1)
      t.byte_ids_[static_cast<unsigned char>(bytes[0])] = static_cast<int32_t>(e.id);
    t.bytes_of_[id] = std::move(bytes);
    owner[id] = &e;
    ids.emplace(e.token, static_cast<int32_t>(e.id));
  }
  for (int b = 0; b < 256; ++b) {
    if (t.byte_ids_[b] >= 0) continue;
    const auto missing = std::count(t.byte_ids_.begin(), t.byte_ids_.end(), -1);
    throw DataError(vocab_name, "no token for byte " + hex_byte(b) + " (\"" +
                                    gpt2_byte_to_unicode(static_cast<uint8_t>(b)) + "\"), one of " +
                                    std::to_string(missing) +
                                    " missing bytes: byte-level BPE needs all 256");
  }
  const auto eot = ids.find(kEndOfText);
  if (eot == ids.end())
    throw DataError(vocab_name,
                    "no \"" + std::string(kEndOfText) + "\" token (the end-of-document token)");
  t.end_of_document_ = eot->second;

  // merges.txt
  std::vector<int64_t> merge_lines;  // rank -> line
  int64_t line_number = 0;
  for (std::size_t start = 0; start < merges_txt.size();) {
    std::size_t stop = merges_txt.find('\n', start);
    if (stop == std::string_view::npos) stop = merges_txt.size();
    std::string_view line = merges_txt.substr(start, stop - start);
    start = stop + 1;
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line_number == 1 && line.starts_with("#version")) continue;
    if (line.empty()) continue;
    const std::size_t space = line.find(' ');
    if (space == 0 || space == std::string_view::npos || space + 1 == line.size() ||
        line.find(' ', space + 1) != std::string_view::npos)
      throw DataError(
          merges_name,
          "expected two tokens separated by one space, found \"" + std::string(line) + "\"",
          line_number);
    const std::string_view parts[2] = {line.substr(0, space), line.substr(space + 1)};
    int32_t part_ids[2];
    for (int p = 0; p < 2; ++p) {
      const auto it = ids.find(parts[p]);
      if (it == ids.end())
        throw DataError(merges_name, "\"" + std::string(parts[p]) + "\" is not in " + vocab_name,
                        line_number);
      part_ids[p] = it->second;
    }
    const std::string joined = std::string(parts[0]) + std::string(parts[1]);
    const auto merged = ids.find(joined);
    if (merged == ids.end())
      throw DataError(merges_name,
                      "merging gives \"" + joined + "\", which is not in " + vocab_name,
                      line_number);
    const auto rank = static_cast<int32_t>(t.merge_results_.size());
    const auto [it, inserted] = t.ranks_.emplace(pair_key(part_ids[0], part_ids[1]), rank);
    if (!inserted)
      throw DataError(merges_name,
                      "\"" + std::string(line) + "\" is also on line " +
                          std::to_string(merge_lines[static_cast<std::size_t>(it->second)]),
                      line_number);
    t.merge_results_.push_back(merged->second);
    merge_lines.push_back(line_number);
  }
  return t;
}

int32_t Gpt2BpeTokenizer::rank_of(int32_t left, int32_t right) const {
  const auto it = ranks_.find(pair_key(left, right));
  return it == ranks_.end() ? kNoMerge : it->second;
}

void Gpt2BpeTokenizer::encode_piece(std::string_view piece, std::vector<int32_t>& out) const {
  // The symbols, and the rank of each adjacent pair (kNoMerge if none).
  std::vector<int32_t> word(piece.size());
  for (std::size_t i = 0; i < piece.size(); ++i)
    word[i] = byte_ids_[static_cast<unsigned char>(piece[i])];
  if (word.size() > 1) {
    std::vector<int32_t> ranks(word.size() - 1);
    for (std::size_t i = 0; i + 1 < word.size(); ++i) ranks[i] = rank_of(word[i], word[i + 1]);
    std::vector<int32_t> next_word, next_ranks;
    std::vector<int64_t> origin;  // where each new symbol was in `word`, -1 if it was merged
    while (word.size() > 1) {
      // encoder.py's step: the pair that comes first in merges.txt, merged at
      // every place it occurs, left to right (so "aaa" gives "aa a").
      const int32_t best = *std::min_element(ranks.begin(), ranks.end());
      if (best == kNoMerge) break;
      next_word.clear();
      origin.clear();
      for (std::size_t i = 0; i < word.size();) {
        if (i + 1 < word.size() && ranks[i] == best) {
          next_word.push_back(merge_results_[static_cast<std::size_t>(best)]);
          origin.push_back(-1);
          i += 2;
        } else {
          next_word.push_back(word[i]);
          origin.push_back(static_cast<int64_t>(i));
          i += 1;
        }
      }
      // Two untouched neighbours were neighbours before, so their rank is known.
      next_ranks.resize(next_word.size() - 1);
      for (std::size_t i = 0; i + 1 < next_word.size(); ++i)
        next_ranks[i] = origin[i] >= 0 && origin[i + 1] >= 0
                            ? ranks[static_cast<std::size_t>(origin[i])]
                            : rank_of(next_word[i], next_word[i + 1]);
      word.swap(next_word);
      ranks.swap(next_ranks);
    }
  }
  out.insert(out.end(), word.begin(), word.end());
}

void Gpt2BpeTokenizer::encode(std::string_view text, std::vector<int32_t>& out) const {
  for (const std::string_view piece : gpt2_pretokenize(text)) encode_piece(piece, out);
}

std::vector<int32_t> Gpt2BpeTokenizer::encode(std::string_view text) const {
  std::vector<int32_t> out;
  encode(text, out);
  return out;
}

std::string Gpt2BpeTokenizer::decode(std::span<const int32_t> tokens) const {
  std::string out;
  for (const int32_t id : tokens) {
    if (id == end_of_document_) continue;
    if (id < 0 || id >= vocab_size_)
      throw std::out_of_range("GPT-2 BPE tokenizer: token id " + std::to_string(id) +
                              " is outside [0, " + std::to_string(vocab_size_) + ")");
    out += bytes_of_[static_cast<std::size_t>(id)];
  }
  return out;
}

}  // namespace sextant::engine::data
