#include "sim/core/strict_json.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <iterator>
#include <nlohmann/json.hpp>
#include <vector>

namespace sextant::sim {

namespace {

// A char iterator that records how far the parser has read, so that a SAX
// callback (which nlohmann calls without a position) knows where it is.
class TrackedIterator {
 public:
  using iterator_category = std::input_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = const char&;

  TrackedIterator(const char* at, const char** furthest) : at_(at), furthest_(furthest) {}
  reference operator*() const { return *at_; }
  TrackedIterator& operator++() {
    ++at_;
    if (at_ > *furthest_) *furthest_ = at_;
    return *this;
  }
  TrackedIterator operator++(int) {
    TrackedIterator before = *this;
    ++*this;
    return before;
  }
  bool operator==(const TrackedIterator& other) const { return at_ == other.at_; }
  bool operator!=(const TrackedIterator& other) const { return at_ != other.at_; }

 private:
  const char* at_;
  const char** furthest_;
};

// The byte where a key string read up to `end` (just past its closing quote) opens.
std::size_t key_start(std::string_view text, std::size_t end) {
  std::size_t i = end >= 2 ? end - 2 : 0;  // the last byte inside the quotes
  while (i > 0) {
    if (text[i] == '"') {
      std::size_t backslashes = 0;
      while (backslashes < i && text[i - 1 - backslashes] == '\\') ++backslashes;
      if (backslashes % 2 == 0) return i;
    }
    --i;
  }
  return 0;
}

// The byte to blame when the parser stopped at `offset` inside a UTF-8
// sequence: Latin-1 "caf\xe9\"" stops at the quote, but the bad byte is 0xe9,
// a lead byte whose sequence the quote cuts short.
std::size_t utf8_sequence_start(std::string_view text, std::size_t offset) {
  for (std::size_t back = 1; back <= 3 && back <= offset; ++back) {
    const auto b = static_cast<unsigned char>(text[offset - back]);
    if (b < 0x80) break;  // ASCII before: the byte at `offset` is the bad one
    if (b < 0xC0) continue;  // a continuation byte: look further back
    const std::size_t length = b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : 2;  // RFC 3629 section 3
    return back < length ? offset - back : offset;
  }
  return offset;
}

// Plain words for what nlohmann's lexer reports tersely: the JSON rule that was broken.
void explain_syntax_error(std::string_view text, const std::string& parser_message,
                          JsonProblem& p) {
  const std::size_t offset = p.offset;
  // nlohmann checks UTF-8 (RFC 3629) inside strings; outside them any byte
  // above 0x7f is a syntax error of its own.
  if (parser_message.find("ill-formed UTF-8 byte") != std::string::npos && offset < text.size()) {
    p.offset = utf8_sequence_start(text, offset);
    p.position = text_position(text, p.offset);
    char hex[8];
    std::snprintf(hex, sizeof hex, "0x%02x",
                  static_cast<unsigned>(static_cast<unsigned char>(text[p.offset])));
    p.kind = JsonProblem::Kind::kEncoding;
    p.message = std::string("invalid UTF-8 (byte ") + hex +
                "): JSON text must be UTF-8 (RFC 8259 section 8.1; is the file in another "
                "encoding?)";
    return;
  }
  std::size_t word_end = offset;
  while (word_end < text.size() && std::isalpha(static_cast<unsigned char>(text[word_end])))
    ++word_end;
  std::string word(text.substr(offset, word_end - offset));
  for (char& c : word) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (word == "nan" || word == "infinity" || word == "inf") {
    // push_back and append() rather than "'" + ... or assign("'"), which trip
    // GCC 12's -Wrestrict false positive.
    p.message.clear();
    p.message.push_back('\'');
    p.message.append(text.substr(offset, word_end - offset))
        .append("' is not a JSON number (RFC 8259 section 6 has no NaN or Infinity); write a "
                "number");
    return;
  }
  if (offset < text.size() && (text[offset] == '}' || text[offset] == ']')) {
    std::size_t before = offset;
    while (before > 0 && std::isspace(static_cast<unsigned char>(text[before - 1]))) --before;
    if (before > 0 && text[before - 1] == ',') {
      p.message = std::string("a trailing comma before '") + text[offset] +
                  "': JSON allows none; remove the comma";
      return;
    }
  }
  // "[json.exception.parse_error.101] parse error at line 2, column 3: syntax
  // error while parsing value - ...": the position is given separately.
  const std::size_t colon = parser_message.find(": ");
  p.message = "invalid JSON: ";
  p.message.append(colon == std::string::npos ? parser_message : parser_message.substr(colon + 2));
}

// Thrown from the parser's callback to stop at a repeated key; caught below.
struct RepeatedKey {};

// Remembers the keys of every open object, to find one given twice.
// Objects hold a few keys: a linear search beats a set's allocations.
class KeyTracker {
 public:
  void open() { starts_.push_back(keys_.size()); }
  void close() {
    keys_.resize(starts_.back());
    starts_.pop_back();
  }
  /// False when `name` is already a key of the innermost open object.
  bool add(const std::string& name) {
    const auto first = keys_.begin() + static_cast<std::ptrdiff_t>(starts_.back());
    if (std::find(first, keys_.end(), name) != keys_.end()) return false;
    keys_.push_back(name);
    return true;
  }

 private:
  std::vector<std::string> keys_;   // the keys of the open objects, outermost first
  std::vector<std::size_t> starts_;  // where each open object's keys begin in keys_
};

}  // namespace

std::optional<JsonProblem> parse_strict_json(std::string_view text, nlohmann::json& value) {
  if (const auto bad = nul_byte_problem(text)) {
    return JsonProblem{JsonProblem::Kind::kEncoding, bad->offset, bad->position, "", bad->message};
  }
  // One pass: nlohmann builds the value and calls back on each key, which is
  // checked against its object's others; the tracked iterator says where it is.
  const char* furthest = text.data();
  KeyTracker keys;
  std::optional<JsonProblem> repeated;
  const auto check_keys = [&](int, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using Event = nlohmann::json::parse_event_t;
    if (event == Event::object_start) keys.open();
    if (event == Event::object_end) keys.close();
    if (event == Event::key && !keys.add(parsed.get_ref<const std::string&>())) {
      JsonProblem p;
      p.kind = JsonProblem::Kind::kDuplicateKey;
      p.offset = key_start(text, static_cast<std::size_t>(furthest - text.data()));
      p.position = text_position(text, p.offset);
      p.key = parsed.get<std::string>();
      p.message = "given twice in one object; each key may appear once";
      repeated = std::move(p);
      throw RepeatedKey{};  // stop: one problem at a time, as a parser would
    }
    return true;
  };
  try {
    value = nlohmann::json::parse(TrackedIterator(text.data(), &furthest),
                                  TrackedIterator(text.data() + text.size(), &furthest),
                                  check_keys);
  } catch (const RepeatedKey&) {
    return repeated;
  } catch (const nlohmann::json::parse_error& error) {
    // error.byte counts the bytes read, the offending one included.
    JsonProblem p;
    p.offset = error.byte == 0 ? 0 : std::min<std::size_t>(error.byte - 1, text.size());
    p.position = text_position(text, p.offset);
    explain_syntax_error(text, error.what(), p);
    return p;
  }
  return std::nullopt;
}

std::optional<JsonProblem> first_json_problem(std::string_view text) {
  nlohmann::json value;
  return parse_strict_json(text, value);
}

}  // namespace sextant::sim
