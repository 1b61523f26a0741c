#include "engine/launch/slurm_time.h"

#include <vector>

#include "engine/launch/printable_text.h"

namespace sextant::engine::launch {
namespace {

constexpr const char* kAccepted =
    "accepted: Slurm's forms minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS (digits only)";

struct Field {
  const char* name;
  std::int64_t most;  // the largest value; -1: any (the leading field)
  std::int64_t seconds_per_unit;
};

// One unsigned decimal field of at most 9 digits (no sign, no space), or -1.
std::int64_t field_value(const std::string& text) {
  if (text.empty() || text.size() > 9 || text.find_first_not_of("0123456789") != std::string::npos) return -1;
  return std::stoll(text);
}

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  for (std::size_t at = text.find(separator); at != std::string::npos; at = text.find(separator, start)) {
    parts.push_back(text.substr(start, at - start));
    start = at + 1;
  }
  parts.push_back(text.substr(start));
  return parts;
}

// The fields a form names, in order, by how it is spelt: with a day part
// ("D-HH[:MM[:SS]]") the clock fields are bounded; without one the first
// field (minutes, or hours in HH:MM:SS) may be any size, as Slurm reads it.
std::vector<Field> fields_of(bool with_days, std::size_t clock_fields) {
  const Field days{"days", -1, 86400}, hours{"hours", 23, 3600}, minutes{"minutes", 59, 60},
      seconds{"seconds", 59, 1};
  if (with_days) {
    std::vector<Field> f{days, hours, minutes, seconds};
    f.resize(1 + clock_fields);
    return f;
  }
  if (clock_fields == 1) return {{"minutes", -1, 60}};
  if (clock_fields == 2) return {{"minutes", -1, 60}, seconds};
  return {{"hours", -1, 3600}, minutes, seconds};
}

}  // namespace

SlurmTime parse_slurm_time(const std::string& text) {
  auto refuse = [&](const std::string& why) { return SlurmTime{0, "'" + printable_text(text) + "': " + why + "; " + kAccepted}; };
  const std::vector<std::string> day_parts = split(text, '-');
  if (day_parts.size() > 2) return refuse("more than one '-'");
  const bool with_days = day_parts.size() == 2;
  std::vector<std::string> values = split(day_parts.back(), ':');
  if (values.size() > 3) return refuse("more than three ':'-separated fields");
  if (with_days) values.insert(values.begin(), day_parts.front());
  const std::vector<Field> fields = fields_of(with_days, values.size() - (with_days ? 1 : 0));
  std::int64_t total_s = 0;
  for (std::size_t i = 0; i < fields.size(); ++i) {
    const std::int64_t v = field_value(values[i]);
    if (v < 0) return refuse(std::string(fields[i].name) + " '" + printable_text(values[i]) + "' is not a whole number of up to 9 digits");
    if (fields[i].most >= 0 && v > fields[i].most)
      return refuse(std::string(fields[i].name) + " " + values[i] + " is out of range 0-" + std::to_string(fields[i].most));
    total_s += v * fields[i].seconds_per_unit;
  }
  if (total_s == 0) return refuse("a zero limit (leave --time out for the partition's default)");
  if (total_s > kLongestSlurmTimeS) return refuse("longer than a year");
  return SlurmTime{total_s, ""};
}

}  // namespace sextant::engine::launch
