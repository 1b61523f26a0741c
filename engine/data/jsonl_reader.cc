#include "engine/data/jsonl_reader.h"

#include <cerrno>
#include <cstring>
#include <optional>
#include <nlohmann/json.hpp>

#include "engine/data/data_error.h"
#include "sim/core/strict_json.h"

namespace sextant::engine::data {

namespace {
bool blank(const std::string& line) {
  return line.find_first_not_of(" \t\r\n") == std::string::npos;
}

std::string keys_of(const nlohmann::json& object) {
  std::string out;
  for (auto it = object.begin(); it != object.end(); ++it) {
    if (!out.empty()) out += ", ";
    out += "\"" + it.key() + "\"";
  }
  return out.empty() ? "none" : out;
}
}  // namespace

JsonlReader::JsonlReader(std::string path, std::string key)
    : path_(std::move(path)), key_(std::move(key)), in_(path_, std::ios::binary) {
  if (!in_) throw DataError(path_, std::string("cannot open: ") + std::strerror(errno));
}

bool JsonlReader::next(std::string& text) {
  while (std::getline(in_, buffer_)) {
    ++line_;
    bytes_read_ += static_cast<int64_t>(buffer_.size()) + (in_.eof() ? 0 : 1);
    if (blank(buffer_)) continue;
    // Strict JSON: nlohmann alone keeps one of two values under a repeated key
    // silently, and says only "not valid JSON" about bytes that are not UTF-8.
    nlohmann::json value;
    if (const std::optional<sim::JsonProblem> problem = sim::parse_strict_json(buffer_, value)) {
      const int64_t column = problem->position.column;
      switch (problem->kind) {
        case sim::JsonProblem::Kind::kDuplicateKey:
          throw DataError(path_, "the key \"" + problem->key + "\" is " + problem->message,
                          line_, column);
        case sim::JsonProblem::Kind::kEncoding:
          throw DataError(path_, problem->message, line_, column);
        case sim::JsonProblem::Kind::kSyntax:
          // The column is the 1-based byte where parsing stopped (nlohmann's e.byte).
          throw DataError(path_, "not valid JSON", line_, column);
      }
    }
    if (!value.is_object()) {
      throw DataError(path_, std::string("expected a JSON object, got ") + value.type_name(),
                      line_);
    }
    const auto it = value.find(key_);
    if (it == value.end()) {
      throw DataError(path_, "no key \"" + key_ + "\" (keys: " + keys_of(value) + ")", line_);
    }
    if (!it->is_string()) {
      throw DataError(path_, "\"" + key_ + "\" is " + it->type_name() + ", expected a string",
                      line_);
    }
    text = it->get<std::string>();
    return true;
  }
  if (in_.bad()) throw DataError(path_, std::string("read failed: ") + std::strerror(errno), line_);
  return false;
}

}  // namespace sextant::engine::data
