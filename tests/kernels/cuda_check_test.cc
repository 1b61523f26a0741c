// Error reporting and bf16 conversion: plain CPU tests, no GPU needed
// (cudaGetErrorName/String are table look-ups in the runtime).
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <cmath>
#include <limits>

#include "kernels/bf16.h"
#include "kernels/cuda_check.h"

namespace sextant::kernels {
namespace {

TEST(CudaCheck, ErrorNamesCallPlaceAndRuntimeMessage) {
  try {
    check_cuda(cudaErrorInvalidValue, "cudaMemcpy(dst, src, n, kind)", "kernels/x.cu", 42);
    FAIL() << "expected CudaError";
  } catch (const CudaError& e) {
    EXPECT_STREQ(e.what(),
                 "kernels/x.cu:42: cudaMemcpy(dst, src, n, kind): cudaErrorInvalidValue: invalid "
                 "argument");
    EXPECT_EQ(e.call(), "cudaMemcpy(dst, src, n, kind)");
    EXPECT_EQ(e.line(), 42);
    EXPECT_EQ(e.status_name(), "cudaErrorInvalidValue");
  }
  EXPECT_NO_THROW(check_cuda(cudaSuccess, "anything", "f", 1));
}

TEST(Bf16, RoundsToNearestEven) {
  EXPECT_EQ(from_float(1.0f).bits, 0x3f80);
  // 1 + 2^-8 lies halfway between 1 and 1 + 2^-7: ties go to the even 1.
  EXPECT_EQ(from_float(1.0f + 0x1p-8f).bits, 0x3f80);
  // 1 + 3 * 2^-8 lies halfway between 1 + 2^-7 and 1 + 2^-6: to the even 1 + 2^-6.
  EXPECT_EQ(from_float(1.0f + 3 * 0x1p-8f).bits, 0x3f82);
  EXPECT_EQ(from_float(-2.5f).bits, 0xc020);
  EXPECT_EQ(to_float(Bf16{0x3f80}), 1.0f);
  EXPECT_TRUE(std::isinf(to_float(from_float(std::numeric_limits<float>::infinity()))));
  EXPECT_TRUE(std::isnan(to_float(from_float(std::numeric_limits<float>::quiet_NaN()))));
  // The largest float rounds up past bf16's largest finite value to infinity.
  EXPECT_TRUE(std::isinf(to_float(from_float(std::numeric_limits<float>::max()))));
}

}  // namespace
}  // namespace sextant::kernels
