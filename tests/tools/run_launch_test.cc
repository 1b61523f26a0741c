// `sextant run`'s launch options through the binary (no GPU needed).
#include <gtest/gtest.h>

#include "tests/support/run_sextant.h"
#include "tests/support/temp_dir.h"

namespace sextant::tools {
namespace {

using sextant::testing::CommandResult;
using sextant::testing::run_sextant;
using sextant::testing::TempDir;

TEST(RunLaunch, PrintSbatchWritesTheSlurmScript) {
  TempDir dir;
  const CommandResult r = run_sextant(
      dir, "run --print-sbatch --nodes 4 --model llama3-70b --layout tp=8,pp=4 --steps 10");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("#SBATCH --nodes=4\n#SBATCH --ntasks-per-node=8\n#SBATCH --gpus-per-node=8\n"),
            std::string::npos) << r.out;
  EXPECT_NE(r.out.find("/sextant run --model llama3-70b --layout tp=8,pp=4 --steps 10\n"),
            std::string::npos) << r.out;
}

TEST(RunLaunch, ALayoutThatDoesNotFitTheRanksStopsEveryRank) {
  // 2 ranks, tp=3: each rank refuses the layout (exit 2); the supervisor exits 2 with the message.
  TempDir dir;
  const CommandResult r = run_sextant(dir, "run --nproc-per-node 2 --model gpt-350m --layout tp=3");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("sextant: error: --layout: tp·cp·pp = 3 does not divide the 2 ranks the "
                       "launcher started"),
            std::string::npos) << r.err;
  EXPECT_NE(r.err.find("sextant run: rank "), std::string::npos) << r.err;
}

}  // namespace
}  // namespace sextant::tools
