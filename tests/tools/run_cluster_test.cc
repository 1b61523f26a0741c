// Which cluster `sextant run --compare` predicts for when --cluster is left out.
#include "tools/run_cluster.h"

#include <gtest/gtest.h>

namespace sextant::tools {
namespace {

TEST(RunCluster, FollowsTheGpuThisRunTrainsOn) {
  const sim::PresetCatalog catalog(SEXTANT_TEST_CONFIG_DIR);
  // configs/clusters/dgx-h200.yaml names gpu: h200-sxm-141gb; dgx-a100 a100-sxm-80gb.
  EXPECT_EQ(cluster_of_gpu(catalog, "h200-sxm-141gb"), "dgx-h200");
  EXPECT_EQ(cluster_of_gpu(catalog, "a100-sxm-80gb"), "dgx-a100");
  EXPECT_EQ(cluster_of_gpu(catalog, "rtx-4090"), "");
  EXPECT_EQ(cluster_of_gpu(catalog, ""), "");
  const RunCluster h200 = run_cluster(catalog, "", "NVIDIA H200", "h200-sxm-141gb");
  EXPECT_EQ(h200.name, "dgx-h200");
  EXPECT_EQ(h200.note, "");
}

TEST(RunCluster, FallsBackToDgxH100AndSaysWhy) {
  const sim::PresetCatalog catalog(SEXTANT_TEST_CONFIG_DIR);
  // No GPU at all (a CPU machine checking its input): no note to give.
  EXPECT_EQ(run_cluster(catalog, "", "", "").name, "dgx-h100");
  EXPECT_EQ(run_cluster(catalog, "", "", "").note, "");
  const RunCluster pcie = run_cluster(catalog, "", "NVIDIA H100 PCIe", "");
  EXPECT_EQ(pcie.name, "dgx-h100");
  EXPECT_EQ(pcie.note, "note: no cluster preset has this GPU (NVIDIA H100 PCIe); predicting for dgx-h100 — give "
                       "--cluster to choose another");
}

TEST(RunCluster, KeepsAGivenClusterAndNotesAnotherGpu) {
  const sim::PresetCatalog catalog(SEXTANT_TEST_CONFIG_DIR);
  EXPECT_EQ(run_cluster(catalog, "dgx-h100", "NVIDIA H100 80GB HBM3", "h100-sxm-80gb").note, "");
  const RunCluster other = run_cluster(catalog, "dgx-h100", "NVIDIA H200", "h200-sxm-141gb");
  EXPECT_EQ(other.name, "dgx-h100");
  EXPECT_EQ(other.note, "note: --cluster dgx-h100 predicts for its h100-sxm-80gb while this run trains on NVIDIA H200 "
                        "(h200-sxm-141gb); the comparison includes the difference between the two GPUs");
}

}  // namespace
}  // namespace sextant::tools
