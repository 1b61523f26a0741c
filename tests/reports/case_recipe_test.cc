#include "reports/case_recipe.h"

#include <gtest/gtest.h>

namespace sextant::reports {
namespace {

// Each source maps to the preset of the software that ran it.
TEST(CaseRecipe, FrameworkOfSource) {
  EXPECT_EQ(framework_of("NVIDIA/Megatron-LM examples/llama/README.md '### FP8 Performance' "
                         "table; README says configs follow NeMo performance scripts."),
            "megatron-core-0.12");  // names NeMo, but ran Megatron-Core r0.12
  EXPECT_EQ(framework_of("NVIDIA/NeMo docs/source/performance/performance_summary.md"),
            "nemo-24.07");
  EXPECT_EQ(framework_of("Narayanan et al., 'Efficient Large-Scale Language Model Training'"),
            "megatron-lm-2021");
  EXPECT_EQ(framework_of("Korthikanti et al. 2022, Table 5"), "megatron-lm-2022");
  EXPECT_EQ(framework_of("Smith et al. 2022 (MT-NLG), Sec. 3"), "deepspeed-pipe-2021");
  EXPECT_EQ(framework_of("Smith et al. 2022, arXiv:2201.11990"), "deepspeed-pipe-2021");
  EXPECT_EQ(framework_of("Smith et al. 2024, another paper"), "");  // the surname alone is not enough
  EXPECT_EQ(framework_of("BigScience 2022, BLOOM"), "deepspeed-pipe-2021");
  EXPECT_EQ(framework_of("NVIDIA/Megatron-LM README.md 'Training Speed and Scalability'"), "");
}

}  // namespace
}  // namespace sextant::reports
