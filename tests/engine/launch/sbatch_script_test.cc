#include "engine/launch/sbatch_script.h"

#include <gtest/gtest.h>

#include "sim/core/config_error.h"

namespace sextant::engine::launch {
namespace {

TEST(SbatchScript, FourNodesOfEightGpus) {
  SbatchOptions o;
  o.nodes = 4;
  o.gpus_per_node = 8;
  o.job_name = "sextant-llama3-70b";
  o.command = {"/opt/sextant/bin/sextant", "run", "--model", "llama3-70b", "--layout",
               "tp=8,pp=4", "--data", "my data/corpus"};
  EXPECT_EQ(sbatch_script(o),
            "#!/bin/bash\n"
            "#SBATCH --job-name=sextant-llama3-70b\n"
            "#SBATCH --nodes=4\n"
            "#SBATCH --ntasks-per-node=8\n"
            "#SBATCH --gpus-per-node=8\n"
            "#SBATCH --exclusive\n"
            "\n"
            "# 32 ranks, one per GPU. Each reads its rank from SLURM_PROCID,\n"
            "# SLURM_NTASKS and SLURM_LOCALID; rank 0 runs on the first host of\n"
            "# SLURM_STEP_NODELIST and hands NCCL's id to the others on MASTER_PORT.\n"
            "export MASTER_PORT=${MASTER_PORT:-29500}\n"
            "\n"
            "srun --kill-on-bad-exit=1 /opt/sextant/bin/sextant run --model llama3-70b --layout "
            "tp=8,pp=4 --data 'my data/corpus'\n");
}

TEST(SbatchScript, ShellQuoting) {
  EXPECT_EQ(shell_quote("tp=8,pp=4"), "tp=8,pp=4");
  EXPECT_EQ(shell_quote(""), "''");
  EXPECT_EQ(shell_quote("it's"), "'it'\\''s'");
  EXPECT_EQ(shell_quote("$HOME"), "'$HOME'");
}

}  // namespace
}  // namespace sextant::engine::launch

namespace sextant::engine::launch {
namespace {

std::string refusal(const SbatchOptions& o) {
  try {
    sbatch_script(o);
  } catch (const sim::ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(SbatchScript, RefusesATimeLimitThatIsNotSlurms) {
  SbatchOptions o;
  o.command = {"sextant", "run"};
  o.time_limit = "01:00:00; rm -rf ~";
  EXPECT_NE(refusal(o).find("--time: '01:00:00; rm -rf ~': "), std::string::npos) << refusal(o);
  o.time_limit = "2-00:30:00";
  EXPECT_NE(sbatch_script(o).find("#SBATCH --time=2-00:30:00\n"), std::string::npos);
}

TEST(SbatchScript, RefusesControlCharactersAndAJobNameSbatchCannotRead) {
  SbatchOptions o;
  o.command = {"sextant", "run", "--data", "corpus\n#SBATCH --account=other"};
  const std::string message = refusal(o);
  EXPECT_NE(message.find("batch script: the argument 'corpus\\n#SBATCH --account=other' holds a control character"),
            std::string::npos) << message;
  EXPECT_EQ(message.find("\n#SBATCH"), std::string::npos) << "the newline is shown escaped";
  o.command = {"sextant", "run"};
  o.job_name = "a job";
  EXPECT_NE(refusal(o).find("job name: 'a job': accepted: letters, digits, '_', '.', '-'"), std::string::npos);
}

TEST(SbatchScript, QuotesEveryCommandWordAShellWouldSplitOrExpand) {
  SbatchOptions o;
  o.command = {"sextant", "run", "--data", "a;b", "--save", "$(reboot)", "--load", "it's"};
  EXPECT_NE(sbatch_script(o).find("srun --kill-on-bad-exit=1 sextant run --data 'a;b' --save '$(reboot)' --load "
                                  "'it'\\''s'\n"),
            std::string::npos) << sbatch_script(o);
}

}  // namespace
}  // namespace sextant::engine::launch
