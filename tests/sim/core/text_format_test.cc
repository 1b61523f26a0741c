// Numbers in messages and tables (sim/core/text_format.h).
#include "sim/core/text_format.h"

#include <gtest/gtest.h>

namespace sextant::sim {
namespace {

TEST(TextFormat, NumbersWithTheirUnits) {
  EXPECT_EQ(format_gib(1.5 * 1024 * 1024 * 1024), "1.5 GiB");
  EXPECT_EQ(format_gib(80.0 * 1024 * 1024 * 1024, 2), "80.00 GiB");
  EXPECT_EQ(format_percent(0.081), "8.1 %");
  EXPECT_EQ(format_number("%.3f ms", 12.3456), "12.346 ms");
  EXPECT_EQ(format_number("%+.1f %%", -20.04), "-20.0 %");
  EXPECT_EQ(format_number("%.6g", 0.1), "0.1");
}

}  // namespace
}  // namespace sextant::sim
