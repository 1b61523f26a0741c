#include "engine/launch/slurm_time.h"

#include <gtest/gtest.h>

namespace sextant::engine::launch {
namespace {

TEST(SlurmTime, AcceptsEachOfSlurmsForms) {
  EXPECT_EQ(parse_slurm_time("90").seconds, 90 * 60);                      // minutes
  EXPECT_EQ(parse_slurm_time("90:30").seconds, 90 * 60 + 30);              // minutes:seconds
  EXPECT_EQ(parse_slurm_time("36:05:07").seconds, 36 * 3600 + 5 * 60 + 7);  // hours:minutes:seconds
  EXPECT_EQ(parse_slurm_time("2-12").seconds, 2 * 86400 + 12 * 3600);       // days-hours
  EXPECT_EQ(parse_slurm_time("2-12:30").seconds, 2 * 86400 + 12 * 3600 + 30 * 60);
  EXPECT_EQ(parse_slurm_time("0-00:00:01").seconds, 1);
  EXPECT_EQ(parse_slurm_time("365-00").seconds, kLongestSlurmTimeS);
  EXPECT_EQ(parse_slurm_time("2-12:30:59").problem, "");
}

TEST(SlurmTime, RefusesClockFieldsOutOfRangeNamingTheField) {
  EXPECT_EQ(parse_slurm_time("99:99:99").problem,
            "'99:99:99': minutes 99 is out of range 0-59; accepted: Slurm's forms minutes, MM:SS, HH:MM:SS, "
            "D-HH, D-HH:MM, D-HH:MM:SS (digits only)");
  EXPECT_NE(parse_slurm_time("10:60").problem.find("seconds 60 is out of range 0-59"), std::string::npos);
  EXPECT_NE(parse_slurm_time("1-24").problem.find("hours 24 is out of range 0-23"), std::string::npos);
  EXPECT_NE(parse_slurm_time("1-2:3:60").problem.find("seconds 60 is out of range 0-59"), std::string::npos);
}

TEST(SlurmTime, RefusesTextThatIsNoneOfTheForms) {
  for (const char* text : {"", "1h", "01:00:00;rm -rf /", "1:2:3:4", "1-2-3", "-5", "1-", ":30", "1.5", " 10",
                           "1234567890", "01:00:00\n#SBATCH --account=other"}) {
    const SlurmTime t = parse_slurm_time(text);
    EXPECT_EQ(t.seconds, 0) << text;
    EXPECT_NE(t.problem.find("accepted: Slurm's forms"), std::string::npos) << text;
  }
  // A newline is shown escaped, never raw.
  EXPECT_EQ(parse_slurm_time("1:00\n#SBATCH x").problem.find('\n'), std::string::npos);
  EXPECT_NE(parse_slurm_time("1:00\n#SBATCH x").problem.find("'1:00\\n#SBATCH x'"), std::string::npos);
}

TEST(SlurmTime, RefusesZeroAndMoreThanAYear) {
  EXPECT_NE(parse_slurm_time("0").problem.find("a zero limit (leave --time out for the partition's default)"),
            std::string::npos);
  EXPECT_NE(parse_slurm_time("0-00:00:00").problem.find("a zero limit"), std::string::npos);
  EXPECT_NE(parse_slurm_time("366-00").problem.find("longer than a year"), std::string::npos);
  EXPECT_NE(parse_slurm_time("999999999").problem.find("longer than a year"), std::string::npos);
}

}  // namespace
}  // namespace sextant::engine::launch
