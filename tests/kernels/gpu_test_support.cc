#include "tests/kernels/gpu_test_support.h"

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdlib>
#include <iostream>
#include <sstream>

namespace sextant::kernels::testing {

std::string gpu_unavailable_reason() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    cudaGetLastError();  // clear it, so it does not surface in a later check
    return std::string("cudaGetDeviceCount failed: ") + cudaGetErrorName(status) + ": " +
           cudaGetErrorString(status);
  }
  if (count == 0) return "cudaGetDeviceCount found no CUDA device";
  return {};
}

bool gpu_required() {
  const char* value = std::getenv("SEXTANT_REQUIRE_GPU");
  return value != nullptr && std::string(value) == "1";
}

void GpuTest::SetUp() {
  if (const std::string reason = gpu_unavailable_reason(); !reason.empty()) {
    if (gpu_required()) FAIL() << "SEXTANT_REQUIRE_GPU=1 but no GPU is usable: " << reason;
    GTEST_SKIP() << "no GPU: " << reason;
  }
  if (const char* fixed = std::getenv("SEXTANT_TEST_SEED"); fixed != nullptr) {
    seed_ = std::strtoull(fixed, nullptr, 10);
  } else {
    std::random_device device;
    seed_ = (static_cast<std::uint64_t>(device()) << 32) ^ device();
  }
  rng_.seed(seed_);
  seeded_ = true;
  RecordProperty("seed", std::to_string(seed_));
}

void GpuTest::TearDown() {
  if (seeded_ && HasFailure())
    std::cout << "  (random inputs: repeat with SEXTANT_TEST_SEED=" << seed_ << ")\n";
}

std::vector<Bf16> random_bf16(std::mt19937_64& rng, std::size_t n, double mean, double stddev) {
  std::normal_distribution<double> dist(mean, stddev);
  std::vector<Bf16> out(n);
  for (auto& v : out) v = from_float(static_cast<float>(dist(rng)));
  return out;
}

std::vector<float> random_float(std::mt19937_64& rng, std::size_t n, double mean, double stddev) {
  std::normal_distribution<double> dist(mean, stddev);
  std::vector<float> out(n);
  for (auto& v : out) v = static_cast<float>(dist(rng));
  return out;
}

std::vector<double> to_double(const std::vector<Bf16>& values) {
  std::vector<double> out(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) out[i] = to_float(values[i]);
  return out;
}

std::vector<double> to_double(const std::vector<float>& values) {
  return std::vector<double>(values.begin(), values.end());
}

::testing::AssertionResult all_close(const std::vector<double>& got,
                                     const std::vector<double>& want, double rtol,
                                     const std::vector<double>& atol) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure()
           << "sizes differ: got " << got.size() << ", want " << want.size();
  if (atol.size() != 1 && atol.size() != want.size())
    return ::testing::AssertionFailure() << "atol has " << atol.size() << " entries";
  std::size_t failures = 0, worst = 0;
  double worst_excess = -1.0, max_error = 0.0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double error = std::abs(got[i] - want[i]);
    const double bound = rtol * std::abs(want[i]) + atol[atol.size() == 1 ? 0 : i];
    max_error = std::max(max_error, error);
    const bool ok = error <= bound;  // false for NaN
    if (!ok) {
      ++failures;
      const double excess = std::isnan(error) ? INFINITY : error / std::max(bound, 1e-300);
      if (excess > worst_excess) worst_excess = excess, worst = i;
    }
  }
  if (failures == 0) return ::testing::AssertionSuccess() << "max |error| " << max_error;
  const double bound = rtol * std::abs(want[worst]) + atol[atol.size() == 1 ? 0 : worst];
  std::ostringstream message;
  message.precision(9);
  message << failures << " of " << want.size() << " elements out of tolerance (rtol " << rtol
          << "); worst at [" << worst << "]: got " << got[worst] << ", want " << want[worst]
          << ", |error| " << std::abs(got[worst] - want[worst]) << " > bound " << bound;
  return ::testing::AssertionFailure() << message.str();
}

::testing::AssertionResult all_close(const std::vector<double>& got,
                                     const std::vector<double>& want, double rtol, double atol) {
  return all_close(got, want, rtol, std::vector<double>{atol});
}

}  // namespace sextant::kernels::testing
