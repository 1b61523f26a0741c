// Which kernels flash_attention_backward runs (kernels/flash_attention.h): the
// Hopper wgmma backward (kernels/flash_attention_backward_sm90.cu) on compute
// capability 9.0 at head_dim 64 and 128, causal or not, with or without GQA;
// on any other device the generic mma.sync backward, which expands K and V to
// every query head for GQA at head_dim 64 when its blocks would not fill the
// GPU. The kernels' results are checked by the reference tests beside this one.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kernels/cuda_check.h"
#include "kernels/flash_attention.h"
#include "tests/kernels/flash_attention_reference.h"
#include "tests/kernels/gpu_test_support.h"

namespace sextant::kernels {
namespace {

using FlashAttentionBackendTest = testing::GpuTest;

bool device_is_sm90() {
  int device = 0, major = 0, minor = 0;
  SEXTANT_CUDA_CHECK(cudaGetDevice(&device));
  SEXTANT_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  SEXTANT_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  return major == 9 && minor == 0;
}

FlashAttentionShape non_causal(FlashAttentionShape s) {
  s.causal = false;
  return s;
}

// {1, 256, 0, 4, 1, 64}: one kv head, two 128-key blocks, far fewer blocks
// than any GPU's SMs, so the generic kernel expands it; Llama 3.2 1B's 32
// heads over 8 at 2048 tokens (8 x 16 = 128 blocks, below an H100's 132 SMs).
TEST_F(FlashAttentionBackendTest, HeadDim64RunsTheHopperBackwardOnComputeCapability90) {
  const bool sm90 = device_is_sm90();
  const std::vector<FlashAttentionShape> head_dim_64 = {
      {1, 256, 0, 4, 1, 64},          {1, 2048, 0, 32, 8, 64},
      {2, 1000, 0, 4, 4, 64},         {2, 200, 264, 4, 2, 64},
      non_causal({2, 300, 70, 4, 2, 64}), {1, 1, 0, 4, 2, 64, 392, 392}};
  for (const FlashAttentionShape& s : head_dim_64) {
    const std::string name = testing::flash_attention_shape_name({s, 0});
    EXPECT_EQ(flash_attention_backward_runs_sm90(s), sm90) << name;
    // Expanded only on the generic kernel, and there at GQA shapes with few blocks.
    if (sm90) {
      EXPECT_FALSE(flash_attention_backward_expands_kv_heads(s)) << name;
    }
  }
  if (!sm90) {
    EXPECT_TRUE(flash_attention_backward_expands_kv_heads(head_dim_64[0]));
  }
}

TEST_F(FlashAttentionBackendTest, HeadDim128RunsTheHopperBackwardOnComputeCapability90) {
  const bool sm90 = device_is_sm90();
  for (const FlashAttentionShape& s :
       {FlashAttentionShape{1, 256, 0, 4, 1, 128}, FlashAttentionShape{2, 100, 300, 4, 2, 128},
        non_causal({2, 300, 70, 8, 2, 128})}) {
    const std::string name = testing::flash_attention_shape_name({s, 0});
    EXPECT_EQ(flash_attention_backward_runs_sm90(s), sm90) << name;
    // The generic kernel runs head_dim 128 unexpanded on any device.
    EXPECT_FALSE(flash_attention_backward_expands_kv_heads(s)) << name;
  }
}

}  // namespace
}  // namespace sextant::kernels
