#include "engine/launch/host_list.h"

#include <gtest/gtest.h>

#include "sim/core/config_error.h"

namespace sextant::engine::launch {
namespace {

using Hosts = std::vector<std::string>;

TEST(HostList, PlainNames) {
  EXPECT_EQ(expand_host_list("gpu5", "V"), (Hosts{"gpu5"}));
  EXPECT_EQ(expand_host_list("a,b.example.org", "V"), (Hosts{"a", "b.example.org"}));
}

TEST(HostList, RangesKeepTheirZeroPadding) {
  EXPECT_EQ(expand_host_list("node[01-04,07],gpu5", "V"),
            (Hosts{"node01", "node02", "node03", "node04", "node07", "gpu5"}));
  EXPECT_EQ(expand_host_list("n[8-11]", "V"), (Hosts{"n8", "n9", "n10", "n11"}));
  EXPECT_EQ(expand_host_list("n[098-101]", "V"), (Hosts{"n098", "n099", "n100", "n101"}));
}

TEST(HostList, SeveralBracketsAndASuffix) {
  EXPECT_EQ(expand_host_list("rack[1-2]-n[1,3]-ib", "V"),
            (Hosts{"rack1-n1-ib", "rack1-n3-ib", "rack2-n1-ib", "rack2-n3-ib"}));
}

TEST(HostList, ErrorsNameTheVariableAndColumn) {
  try {
    expand_host_list("node[01-x]", "SLURM_STEP_NODELIST");
    FAIL() << "accepted";
  } catch (const sim::ConfigError& e) {
    EXPECT_EQ(e.diagnostics().at(0).to_string(),
              "SLURM_STEP_NODELIST:1:6: '01-x' is not a number or a range a-b in host list "
              "'node[01-x]' (expected hosts like node[01-04,07],gpu5)")
        << e.what();
  }
  EXPECT_THROW(expand_host_list("node[01-04", "V"), sim::ConfigError);
  EXPECT_THROW(expand_host_list("node[4-1]", "V"), sim::ConfigError);
  EXPECT_THROW(expand_host_list("", "V"), sim::ConfigError);
  EXPECT_THROW(expand_host_list(",a", "V"), sim::ConfigError);
}

}  // namespace
}  // namespace sextant::engine::launch
