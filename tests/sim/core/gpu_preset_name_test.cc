// The one GPU name -> preset rule (sim/core/gpu_preset_name.h). Before it,
// three rules disagreed: `sextant run`'s MFU table (a substring: any name with
// "H100" was the SXM H100), `sextant calibrate`'s (form factor and memory),
// and the validation cases' (a prefix: "H100 PCIe" was a DGX H100). The cases
// where they disagreed are the ones below.
#include "sim/core/gpu_preset_name.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace sextant::sim {
namespace {

constexpr std::int64_t kGiB = 1LL << 30;

TEST(GpuPresetName, FromTheDeviceName) {
  EXPECT_EQ(gpu_preset_name("NVIDIA H100 80GB HBM3", 79 * kGiB), "h100-sxm-80gb");
  EXPECT_EQ(gpu_preset_name("NVIDIA H200", 140 * kGiB), "h200-sxm-141gb");
  EXPECT_EQ(gpu_preset_name("NVIDIA A100-SXM4-80GB", 79 * kGiB), "a100-sxm-80gb");
  EXPECT_EQ(gpu_preset_name("NVIDIA H100 PCIe", 79 * kGiB), "");
  EXPECT_EQ(gpu_preset_name("NVIDIA GeForce RTX 4090", 24 * kGiB), "");
}

// `sextant run` took these for SXM parts and divided MFU by their peak.
TEST(GpuPresetName, OtherFormFactorsAndMemoriesHaveNoPreset) {
  EXPECT_EQ(gpu_preset_name("NVIDIA H100 NVL", 93 * kGiB), "");
  EXPECT_EQ(gpu_preset_name("NVIDIA H200 NVL", 140 * kGiB), "");
  EXPECT_EQ(gpu_preset_name("NVIDIA A100-PCIE-40GB", 39 * kGiB), "");
  EXPECT_EQ(gpu_preset_name("NVIDIA A100 80GB PCIe", 79 * kGiB), "");
  EXPECT_EQ(gpu_preset_name("NVIDIA A100-SXM4-40GB", 39 * kGiB), "");
  // Grace Hopper: "H200" inside another word is not an H200 (nor is its memory).
  EXPECT_EQ(gpu_preset_name("NVIDIA GH200 480GB", 95 * kGiB), "");
}

// Validation cases name the GPU without its memory; `sextant calibrate`'s rule
// needed the memory and so knew none of them.
TEST(GpuPresetName, FromACaseNameWithoutMemory) {
  EXPECT_EQ(gpu_preset_name("A100-SXM4-80GB"), "a100-sxm-80gb");
  EXPECT_EQ(gpu_preset_name("H100-SXM-80GB"), "h100-sxm-80gb");
  EXPECT_EQ(gpu_preset_name("H100-SXM-80GB (DGX-H100)"), "h100-sxm-80gb");
  EXPECT_EQ(gpu_preset_name("H100-SXM-80GB (implied by README context; not stated in table)"), "h100-sxm-80gb");
  EXPECT_EQ(gpu_preset_name("H200-SXM-141GB"), "h200-sxm-141gb");
  // The validation cases' prefix rule made these a DGX of the SXM part.
  EXPECT_EQ(gpu_preset_name("H100 PCIe"), "");
  EXPECT_EQ(gpu_preset_name("A100-SXM4-40GB"), "");
  EXPECT_EQ(gpu_preset_name("B200"), "");
}

}  // namespace
}  // namespace sextant::sim
