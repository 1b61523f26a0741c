#include "engine/launch/sbatch_script.h"

#include <gtest/gtest.h>

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
