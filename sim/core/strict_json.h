// Strict reading of JSON text (RFC 8259), for inputs that must be JSON and
// nothing laxer: config.json files and JSON lines.
//
// A JSON text is refused, at the first problem, when it has a NUL byte
// (text_encoding.h), invalid UTF-8, a syntax error (NaN, Infinity, a trailing comma,
// comments, single quotes, ... are all syntax errors in JSON), or an object
// that names a key twice (RFC 8259 section 4: names SHOULD be unique; parsers
// keep one of them silently, so a file holding two values would be read as one).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "sim/core/text_encoding.h"

namespace sextant::sim {

struct JsonProblem {
  enum class Kind { kEncoding, kSyntax, kDuplicateKey };
  Kind kind = Kind::kSyntax;
  std::size_t offset = 0;  // 0-based byte offset of the problem (the text's size: at its end)
  TextPosition position;
  std::string key;      // the repeated key, for a duplicate; else empty
  std::string message;  // what is wrong and what JSON expects there
};

/// The first problem of `text` as one JSON value, or std::nullopt when it is
/// well-formed UTF-8 JSON with no key repeated within an object.
std::optional<JsonProblem> first_json_problem(std::string_view text);

/// As first_json_problem, and the value of `text` into `value` when there is
/// no problem (in the same pass). Callers include <nlohmann/json.hpp>.
std::optional<JsonProblem> parse_strict_json(std::string_view text, nlohmann::json& value);

}  // namespace sextant::sim
