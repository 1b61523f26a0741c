// The bucketed gradient all-reduce on the in-process communicator: every
// rank's gradients end as the rank-order fp32 sum (bit for bit), and each
// reduction waits for backward's write of its bucket — which here comes after
// a host function that sleeps 50 ms on the compute stream, so a reduction that
// did not wait would sum the zeros before it and fail.
#include "engine/data_parallel/gradient_reducer.h"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "kernels/cuda_check.h"
#include "tests/engine/comm/comm_test_support.h"
#include "tests/kernels/gpu_test_support.h"

namespace sextant::engine::data_parallel {
namespace {

using comm::Communicator;
using comm::DataType;

class GradientReducerTest : public kernels::testing::GpuTestWithParam<int> {};

TEST_P(GradientReducerTest, EveryRankEndsWithTheSumOfEveryBucket) {
  const int dp = GetParam();
  constexpr std::size_t kElements = 10000;
  // Three buckets, marked last first, as backward produces them; the tail
  // [9000, 10000) is in none and must stay this rank's own.
  const std::vector<GradientBucket> buckets{{0, 3000}, {3000, 4000}, {7000, 2000}};
  std::vector<std::vector<float>> local(dp), result(dp);
  for (auto& v : local) v = kernels::testing::random_float(rng(), kElements, 0.0, 1.0);
  comm::testing::run_in_process(dp, [&](int r, Communicator& comm) {
    cudaStream_t compute = nullptr;
    SEXTANT_CUDA_CHECK(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking));
    void* source = comm::testing::to_device(local[r], DataType::kFp32);
    auto* grads = static_cast<float*>(comm::testing::to_device(std::vector<float>(kElements, 0.0f), DataType::kFp32));
    {
      GradientReducer reducer(comm, grads, buckets);
      const auto sleep_50_ms = [](void*) { std::this_thread::sleep_for(std::chrono::milliseconds(50)); };
      for (int b = 2; b >= 0; --b) {
        SEXTANT_CUDA_CHECK(cudaLaunchHostFunc(compute, sleep_50_ms, nullptr));
        const GradientBucket& bucket = buckets[b];
        SEXTANT_CUDA_CHECK(cudaMemcpyAsync(grads + bucket.begin,
                                           static_cast<float*>(source) + bucket.begin,
                                           bucket.elements * sizeof(float),
                                           cudaMemcpyDeviceToDevice, compute));
        reducer.bucket_ready(b, compute);
      }
      SEXTANT_CUDA_CHECK(cudaMemcpyAsync(grads + 9000, static_cast<float*>(source) + 9000,
                                         1000 * sizeof(float), cudaMemcpyDeviceToDevice, compute));
      reducer.finish(compute);
      SEXTANT_CUDA_CHECK(cudaStreamSynchronize(compute));
    }
    result[r] = comm::testing::from_device(grads, kElements, DataType::kFp32);
    cudaFree(source);
    cudaFree(grads);
    cudaStreamDestroy(compute);
  });
  for (int r = 0; r < dp; ++r) {
    for (std::size_t i = 0; i < kElements; ++i) {
      float want = local[r][i];  // the tail: no bucket, no reduction
      if (i < 9000) {
        want = local[0][i];
        for (int j = 1; j < dp; ++j) want += local[j][i];
      }
      ASSERT_EQ(result[r][i], want) << "rank " << r << ", element " << i;
    }
  }
}

TEST_P(GradientReducerTest, ReduceScatterLeavesEachRankItsBlockOfTheSum) {
  // Two buckets of 12·25 = 300 elements (divisible by dp = 1, 2, 3, 4):
  // rank r's block [begin + r·300/dp, +300/dp) of each holds the sum.
  const int dp = GetParam();
  constexpr std::size_t kElements = 600;
  const std::vector<GradientBucket> buckets{{0, 300}, {300, 300}};
  std::vector<std::vector<float>> local(dp), result(dp);
  for (auto& v : local) v = kernels::testing::random_float(rng(), kElements, 0.0, 1.0);
  std::vector<std::vector<GradientBucket>> owned(dp);
  comm::testing::run_in_process(dp, [&](int r, Communicator& comm) {
    auto* grads = static_cast<float*>(comm::testing::to_device(local[r], DataType::kFp32));
    {
      GradientReducer reducer(comm, grads, buckets, Reduction::kReduceScatter);
      reducer.bucket_ready(1, comm.stream());
      reducer.bucket_ready(0, comm.stream());
      reducer.finish(comm.stream());
      owned[r] = {reducer.owned(0), reducer.owned(1)};
      SEXTANT_CUDA_CHECK(cudaStreamSynchronize(comm.stream()));
    }
    result[r] = comm::testing::from_device(grads, kElements, DataType::kFp32);
    cudaFree(grads);
  });
  const std::size_t block = 300 / dp;
  for (int r = 0; r < dp; ++r) {
    for (int b = 0; b < 2; ++b) {
      EXPECT_EQ(owned[r][b].begin, b * 300 + r * block);
      EXPECT_EQ(owned[r][b].elements, block);
      for (std::size_t i = owned[r][b].begin; i < owned[r][b].begin + block; ++i) {
        float want = local[0][i];
        for (int j = 1; j < dp; ++j) want += local[j][i];
        ASSERT_EQ(result[r][i], want) << "rank " << r << ", element " << i;
      }
    }
  }
}

TEST_P(GradientReducerTest, FinishNamesTheBucketsNotMarked) {
  const int dp = GetParam();
  std::vector<std::string> errors(dp);
  comm::testing::run_in_process(dp, [&](int r, Communicator& comm) {
    auto* grads = static_cast<float*>(comm::testing::to_device(std::vector<float>(100, 1.0f), DataType::kFp32));
    {
      GradientReducer reducer(comm, grads, {{0, 50}, {50, 50}});
      reducer.bucket_ready(1, comm.stream());
      try {
        reducer.finish(comm.stream());
      } catch (const std::logic_error& e) {
        errors[r] = e.what();
      }
    }
    cudaFree(grads);
  });
  for (const std::string& e : errors)
    EXPECT_EQ(e, "GradientReducer::finish: buckets 0 were not marked ready");
}

INSTANTIATE_TEST_SUITE_P(DataParallel, GradientReducerTest, ::testing::Values(1, 2, 3, 4),
                         [](const auto& info) { return "dp" + std::to_string(info.param); });

}  // namespace
}  // namespace sextant::engine::data_parallel
