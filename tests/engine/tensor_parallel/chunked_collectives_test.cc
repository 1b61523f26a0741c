// The chunked all-gather and reduce-scatter of tp_comm_overlap
// (engine/tensor_parallel/chunked_collectives.h) on the in-process
// communicator, tp = 2, 3 and 4, each rank with its own compute stream beside
// the communicator's: what the compute stream reads after each wait equals
// the communicator's own all-gather, and the chunk-by-chunk reduce-scatter
// equals its reduce-scatter — bit for bit, as both add the ranks' bf16 values
// in rank order in fp32 and round once (kernels/sum_buffers.h), which a CPU
// loop reproduces. Skips without a GPU (fails instead under SEXTANT_REQUIRE_GPU=1).
#include "engine/tensor_parallel/chunked_collectives.h"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <vector>

#include "engine/comm/communicator.h"
#include "kernels/cuda_check.h"
#include "tests/engine/comm/comm_test_support.h"
#include "tests/kernels/gpu_test_support.h"

namespace sextant::engine::tensor_parallel {
namespace {

using comm::DataType;
using comm::testing::from_device;
using comm::testing::round_to;
using comm::testing::run_in_process;
using comm::testing::to_device;

constexpr std::size_t kChunk = 24 * 64;  // a (24 tokens, 64) shard

class ChunkedCollectivesTest : public kernels::testing::GpuTestWithParam<int> {};

TEST_P(ChunkedCollectivesTest, EqualTheCommunicatorsCollectives) {
  const int tp = GetParam();
  const std::size_t n = static_cast<std::size_t>(tp);
  // shards[r]: rank r's shard; partials[r]: rank r's (tp·chunk) partial products; bf16 values.
  std::vector<std::vector<float>> shards(n), partials(n);
  for (std::size_t r = 0; r < n; ++r) {
    for (float x : kernels::testing::random_float(rng(), kChunk, 0.0, 1.0)) shards[r].push_back(round_to(x, DataType::kBf16));
    for (float x : kernels::testing::random_float(rng(), n * kChunk, 0.0, 1.0))
      partials[r].push_back(round_to(x, DataType::kBf16));
  }
  std::vector<std::vector<float>> gathered(n), copied(n), scattered(n), reference(n);
  std::vector<std::vector<int>> order(n);
  run_in_process(tp, [&](int r, comm::Communicator& c) {
    const std::size_t ru = static_cast<std::size_t>(r);
    cudaStream_t compute = nullptr;
    SEXTANT_CUDA_CHECK(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking));
    auto* shard = static_cast<kernels::Bf16*>(to_device(shards[ru], DataType::kBf16));
    auto* part = static_cast<kernels::Bf16*>(to_device(partials[ru], DataType::kBf16));
    auto zeros = [&] { return static_cast<kernels::Bf16*>(to_device(std::vector<float>(n * kChunk), DataType::kBf16)); };
    kernels::Bf16* all = zeros();
    kernels::Bf16* copy = zeros();  // what the compute stream saw of each chunk, in place of a GEMM
    kernels::Bf16* staging = zeros();
    kernels::Bf16* out = zeros();
    kernels::Bf16* ref = zeros();
    {
      ChunkedCollectives chunked(c, compute);
      EXPECT_EQ(chunked.chunks(), tp);
      chunked.start_all_gather(shard, all, kChunk);
      for (int step = 0; step < tp; ++step) {
        const int chunk = chunked.wait_gathered(step);
        order[ru].push_back(chunk);
        const std::size_t at = static_cast<std::size_t>(chunk) * kChunk;
        SEXTANT_CUDA_CHECK(cudaMemcpyAsync(copy + at, all + at, kChunk * sizeof(kernels::Bf16),
                                           cudaMemcpyDeviceToDevice, compute));
      }
      for (int chunk = 0; chunk < tp; ++chunk) chunked.reduce_chunk(chunk, part, staging, kChunk);
      chunked.finish_reduce_scatter(part, staging, out, kChunk);
      SEXTANT_CUDA_CHECK(cudaStreamSynchronize(compute));
    }
    c.reduce_scatter_sum(part, ref, kChunk, DataType::kBf16);
    SEXTANT_CUDA_CHECK(cudaStreamSynchronize(c.stream()));
    gathered[ru] = from_device(all, n * kChunk, DataType::kBf16);
    copied[ru] = from_device(copy, n * kChunk, DataType::kBf16);
    scattered[ru] = from_device(out, kChunk, DataType::kBf16);
    reference[ru] = from_device(ref, kChunk, DataType::kBf16);
    for (void* p : {static_cast<void*>(shard), static_cast<void*>(part), static_cast<void*>(all),
                    static_cast<void*>(copy), static_cast<void*>(staging), static_cast<void*>(out),
                    static_cast<void*>(ref)})
      cudaFree(p);
    cudaStreamDestroy(compute);
  });
  std::vector<float> want_gathered;
  for (const std::vector<float>& s : shards) want_gathered.insert(want_gathered.end(), s.begin(), s.end());
  for (std::size_t r = 0; r < n; ++r) {
    // Ring order: the own chunk, then r − 1, r − 2, ... (mod tp); tp = 3, rank 0: 0, 2, 1.
    std::vector<int> want_order;
    for (int i = 0; i < tp; ++i) want_order.push_back(((static_cast<int>(r) - i) % tp + tp) % tp);
    EXPECT_EQ(order[r], want_order) << "rank " << r;
    EXPECT_EQ(gathered[r], want_gathered) << "rank " << r;
    EXPECT_EQ(copied[r], want_gathered) << "rank " << r << ": a chunk read before it arrived";
    // Rank r's chunk: sum over ranks j in order of partials[j]'s block r, fp32, rounded once.
    std::vector<float> want(kChunk);
    for (std::size_t i = 0; i < kChunk; ++i) {
      float sum = 0;
      for (std::size_t j = 0; j < n; ++j) sum += partials[j][r * kChunk + i];
      want[i] = round_to(sum, DataType::kBf16);
    }
    EXPECT_EQ(scattered[r], want) << "rank " << r;
    EXPECT_EQ(scattered[r], reference[r]) << "rank " << r << ": differs from reduce_scatter_sum";
  }
}

INSTANTIATE_TEST_SUITE_P(Tp, ChunkedCollectivesTest, ::testing::Values(2, 3, 4),
                         [](const ::testing::TestParamInfo<int>& info) { return "tp" + std::to_string(info.param); });

}  // namespace
}  // namespace sextant::engine::tensor_parallel
