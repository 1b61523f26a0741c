// StrictMap: every key of a YAML mapping is either read or reported.
#include "sim/core/strict_yaml.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace sextant::sim {
namespace {

using Lines = std::vector<std::string>;

Lines text_of(const std::vector<Diagnostic>& diagnostics) {
  Lines out;
  for (const Diagnostic& d : diagnostics) out.push_back(d.to_string());
  return out;
}

YAML::Node parse(const std::string& text) {
  std::vector<Diagnostic> diagnostics;
  auto node = parse_yaml_text(text, "t.yaml", diagnostics);
  EXPECT_TRUE(node && diagnostics.empty()) << text;
  return node ? *node : YAML::Node();
}

TEST(ParseYamlText, ErrorCarriesTheParsersPosition) {
  std::vector<Diagnostic> diagnostics;
  EXPECT_FALSE(parse_yaml_text("a: [1, 2\n", "t.yaml", diagnostics));
  EXPECT_EQ(text_of(diagnostics),
            Lines{"t.yaml:2:1: invalid YAML: end of sequence flow not found"});
}

TEST(StrictMap, ReadsEveryType) {
  std::vector<Diagnostic> diagnostics;
  StrictMap map(parse("s: text\ni: -42\nd: 2.5e3\nb: true\n"), "t.yaml", diagnostics);
  ASSERT_TRUE(map.is_map());
  EXPECT_TRUE(map.has("s"));
  EXPECT_FALSE(map.has("z"));
  EXPECT_EQ(map.required_string("s"), "text");
  EXPECT_EQ(map.required_int("i"), -42);
  EXPECT_DOUBLE_EQ(map.required_double("d"), 2500);
  EXPECT_TRUE(map.required_bool("b"));
  EXPECT_FALSE(map.optional_int("z"));
  map.finish({"s", "i", "d", "b", "z"});
  EXPECT_EQ(text_of(diagnostics), Lines{});
}

TEST(StrictMap, MissingAndMistypedValuesGivePlaceholders) {
  std::vector<Diagnostic> diagnostics;
  StrictMap map(parse("a: 1\nb: [x]\n"), "t.yaml", diagnostics);
  EXPECT_EQ(map.required_string("s"), "");
  EXPECT_EQ(map.required_int("b"), 0);
  EXPECT_FALSE(map.required_bool("a"));  // 1 is not a YAML boolean
  EXPECT_EQ(text_of(diagnostics), (Lines{"t.yaml:1:1: s: required key is missing",
                                         "t.yaml:2:4: b: expected an integer, got a list",
                                         "t.yaml:1:4: a: expected true or false, got '1'"}));
}

TEST(StrictMap, NestedKeysCarryTheirParentsName) {
  std::vector<Diagnostic> diagnostics;
  StrictMap map(parse("outer:\n  inner: -1\n  extra: 2\n"), "t.yaml", diagnostics);
  StrictMap outer = map.child("outer");
  ASSERT_TRUE(outer.is_map());
  outer.require_positive("inner", static_cast<double>(outer.required_int("inner")));
  outer.finish({"inner"});
  map.finish({"outer"});
  EXPECT_EQ(text_of(diagnostics),
            (Lines{"t.yaml:2:10: outer.inner: must be positive, got -1",
                   "t.yaml:3:3: outer.extra: unknown key; accepted keys: inner"}));
}

TEST(StrictMap, AbsentChildIsNotAMap) {
  std::vector<Diagnostic> diagnostics;
  StrictMap map(parse("a: 1\n"), "t.yaml", diagnostics);
  EXPECT_FALSE(map.child("outer").is_map());
  EXPECT_EQ(map.optional_int("a"), 1);
  map.finish({"a", "outer"});
  EXPECT_EQ(text_of(diagnostics), Lines{});
}

TEST(StrictMap, RangeCheckSkipsMissingKeys) {
  std::vector<Diagnostic> diagnostics;
  StrictMap map(parse("x: 5\n"), "t.yaml", diagnostics);
  map.require_in_range("x", 5, 0, 1);
  map.require_in_range("y", 5, 0, 1);  // missing: reported by whoever requires it
  map.require_positive("y", -1);
  EXPECT_EQ(text_of(diagnostics), Lines{"t.yaml:1:4: x: must be in [0, 1], got 5"});
}

TEST(StrictMap, FinishListsEveryUnreadKey) {
  std::vector<Diagnostic> diagnostics;
  StrictMap map(parse("a: 1\nb: 2\nc: 3\n"), "t.yaml", diagnostics);
  map.optional_int("b");
  map.finish({"b", "d"});
  EXPECT_EQ(text_of(diagnostics), (Lines{"t.yaml:1:1: a: unknown key; accepted keys: b, d",
                                         "t.yaml:3:1: c: unknown key; accepted keys: b, d"}));
}

}  // namespace
}  // namespace sextant::sim
