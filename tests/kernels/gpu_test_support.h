// What the kernel tests share: a fixture that skips without a GPU (and fails
// instead when SEXTANT_REQUIRE_GPU=1), a fresh random seed per test, device
// buffers, bf16 helpers, and an element-wise comparison that reports the worst
// element rather than thousands of failures.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/bf16.h"
#include "kernels/cuda_check.h"

namespace sextant::kernels::testing {

/// Empty when a CUDA device can be used; otherwise why not (the runtime's words).
std::string gpu_unavailable_reason();

/// True when SEXTANT_REQUIRE_GPU=1: a missing GPU is then a failure, not a skip.
bool gpu_required();

/// Base fixture for tests that run kernels. Each test gets a fresh seed
/// (std::random_device) unless SEXTANT_TEST_SEED fixes it; a failing test
/// prints the seed so the run can be repeated.
class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;
  std::mt19937_64& rng() { return rng_; }

 private:
  bool seeded_ = false;
  std::uint64_t seed_ = 0;
  std::mt19937_64 rng_;
};

template <typename Param>
class GpuTestWithParam : public GpuTest, public ::testing::WithParamInterface<Param> {};

/// Owns n elements of device memory (cudaMalloc: 256-byte aligned).
template <typename T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t n) : size_(n) {
    if (n > 0) SEXTANT_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&data_), n * sizeof(T)));
  }
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) { upload(host); }
  ~DeviceBuffer() {
    if (data_ != nullptr) cudaFree(data_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  T* get() { return data_; }
  const T* get() const { return data_; }
  std::size_t size() const { return size_; }

  void upload(const std::vector<T>& host) {
    if (host.size() != size_) throw std::invalid_argument("DeviceBuffer::upload: size mismatch");
    if (size_ > 0)
      SEXTANT_CUDA_CHECK(cudaMemcpy(data_, host.data(), size_ * sizeof(T), cudaMemcpyHostToDevice));
  }
  /// Waits for all queued work (cudaMemcpy synchronises), so a kernel fault shows up here.
  std::vector<T> download() const {
    std::vector<T> host(size_);
    if (size_ > 0)
      SEXTANT_CUDA_CHECK(cudaMemcpy(host.data(), data_, size_ * sizeof(T), cudaMemcpyDeviceToHost));
    return host;
  }

 private:
  T* data_ = nullptr;
  std::size_t size_;
};

/// n bf16 values drawn from N(mean, stddev), rounded to nearest.
std::vector<Bf16> random_bf16(std::mt19937_64& rng, std::size_t n, double mean, double stddev);
/// n fp32 values drawn from N(mean, stddev).
std::vector<float> random_float(std::mt19937_64& rng, std::size_t n, double mean, double stddev);

std::vector<double> to_double(const std::vector<Bf16>& values);
std::vector<double> to_double(const std::vector<float>& values);

/// Passes when |got[i] - want[i]| <= rtol * |want[i]| + atol[i] for every i;
/// otherwise names how many elements fail and the worst one. `atol` holds one
/// bound per element, or a single bound for all.
::testing::AssertionResult all_close(const std::vector<double>& got,
                                     const std::vector<double>& want, double rtol,
                                     const std::vector<double>& atol);
::testing::AssertionResult all_close(const std::vector<double>& got,
                                     const std::vector<double>& want, double rtol, double atol);

}  // namespace sextant::kernels::testing
