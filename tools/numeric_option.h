// Numeric command-line options, all checked by one rule so every command refuses
// bad numbers the same way, before CLI11 converts them:
//
//   sextant: error: --gpus: expected a whole number from 1 to 16777216, got '0'
//   sextant: error: --memory-headroom: expected a number from 0 to 0.9, got 'nan'
//
// A value is parsed whole (no trailing text), must be finite, and must lie in
// [low, high]; a whole number out of the 64-bit range ("99999999999999999999")
// is out of range, never saturated. The message is CLI11's ValidationError,
// which main() prints in the `sextant: error:` form with exit code 2.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

namespace sextant::tools {

/// "expected a whole number from 1 to 8, got 'x'" or "" when `text` is one.
std::string whole_number_problem(const std::string& text, std::int64_t low, std::int64_t high);
/// "expected a number from 0 to 0.9, got 'nan'" or "" when `text` is one.
std::string number_problem(const std::string& text, double low, double high);

/// Adds `name` bound to `value` (an integer type), accepting whole numbers in [low, high].
template <typename Int>
CLI::Option* add_whole_number_option(CLI::App& cmd, const std::string& name, Int& value,
                                     const std::string& description, std::int64_t low,
                                     std::int64_t high) {
  return cmd.add_option(name, value, description)
      ->check(CLI::Validator(
          [low, high](std::string& text) { return whole_number_problem(text, low, high); },
          "INT in [" + std::to_string(low) + ", " + std::to_string(high) + "]"));
}

/// Adds `name` bound to `value`, accepting finite numbers in [low, high].
CLI::Option* add_number_option(CLI::App& cmd, const std::string& name, double& value,
                               const std::string& description, double low, double high);

/// The largest GPU count any option takes: 2^24 GPUs (16,777,216), above any
/// cluster built; larger is a typo.
constexpr std::int64_t kMostGpus = std::int64_t{1} << 24;

}  // namespace sextant::tools
