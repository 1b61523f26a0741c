// Diagnostic::to_string leaves out what is not known; ConfigError carries all.
#include "sim/core/config_error.h"

#include <gtest/gtest.h>

namespace sextant::sim {
namespace {

TEST(Diagnostic, EveryPart) {
  EXPECT_EQ((Diagnostic{"model.yaml", 3, 14, "hidden_size", "must be positive, got 0"}).to_string(),
            "model.yaml:3:14: hidden_size: must be positive, got 0");
}

TEST(Diagnostic, UnknownPartsAreLeftOut) {
  EXPECT_EQ((Diagnostic{"model.yaml", 3, 0, "hidden_size", "m"}).to_string(),
            "model.yaml:3: hidden_size: m");
  EXPECT_EQ((Diagnostic{"model.yaml", 0, 0, "hidden_size", "m"}).to_string(),
            "model.yaml: hidden_size: m");
  EXPECT_EQ((Diagnostic{"model.yaml", 0, 0, "", "m"}).to_string(), "model.yaml: m");
  // A column without a line is meaningless and is not printed.
  EXPECT_EQ((Diagnostic{"--layout", 0, 7, "tp", "m"}).to_string(), "--layout: tp: m");
}

TEST(ConfigError, WhatJoinsEveryDiagnostic) {
  const ConfigError e({{"a.yaml", 1, 2, "x", "first"}, {"b.yaml", 0, 0, "", "second"}});
  EXPECT_STREQ(e.what(), "a.yaml:1:2: x: first\nb.yaml: second");
  ASSERT_EQ(e.diagnostics().size(), 2u);
  EXPECT_EQ(e.diagnostics()[1].file, "b.yaml");
}

TEST(ConfigError, ThrowIfAny) {
  EXPECT_NO_THROW(throw_if_any({}));
  EXPECT_THROW(throw_if_any({{"a.yaml", 0, 0, "", "bad"}}), ConfigError);
}

}  // namespace
}  // namespace sextant::sim
