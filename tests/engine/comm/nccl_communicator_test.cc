// The NCCL communicator at world size 1 (the one-GPU machine): every
// collective is then a copy, and the parallel groups are the world itself.
// Several ranks run on the multi-GPU machines (issue 13's two-GPU runs).
#include "engine/comm/nccl_communicator.h"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <chrono>
#include <sstream>
#include <thread>
#include <string>

#include "engine/comm/comm_error.h"
#include "engine/comm/parallel_groups.h"
#include "engine/comm/world_setup.h"
#include "kernels/cuda_check.h"
#include "tests/engine/comm/comm_test_support.h"
#include "tests/kernels/gpu_test_support.h"

namespace sextant::engine::comm {
namespace {

using testing::from_device;
using testing::round_to;
using testing::to_device;

class NcclWorldOfOne : public kernels::testing::GpuTestWithParam<DataType> {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    if (IsSkipped() || HasFailure()) return;
    SEXTANT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    world_ = NcclCommunicator::join(nccl_unique_id(), 1, 0, stream_);
  }
  void TearDown() override {
    world_.reset();
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
    GpuTest::TearDown();
  }
  std::vector<float> random(std::size_t n) {
    std::vector<float> v = kernels::testing::random_float(rng(), n, 0.0, 1.0);
    for (float& x : v) x = round_to(x, GetParam());
    return v;
  }
  std::vector<float> read(const void* device, std::size_t n) {
    SEXTANT_CUDA_CHECK(cudaStreamSynchronize(stream_));
    return from_device(device, n, GetParam());
  }

  cudaStream_t stream_ = nullptr;
  std::unique_ptr<NcclCommunicator> world_;
};

TEST_P(NcclWorldOfOne, EveryCollectiveIsACopy) {
  constexpr std::size_t n = 3001;
  const DataType type = GetParam();
  const std::vector<float> x = random(n);
  void* send = to_device(x, type);
  void* recv = to_device(std::vector<float>(n, -1.0f), type);
  EXPECT_EQ(world_->rank(), 0);
  EXPECT_EQ(world_->size(), 1);
  world_->all_reduce_sum(send, recv, n, type);
  EXPECT_EQ(read(recv, n), x) << "all_reduce";
  SEXTANT_CUDA_CHECK(cudaMemsetAsync(recv, 0, n * bytes_of(type), stream_));
  world_->reduce_scatter_sum(send, recv, n, type);
  EXPECT_EQ(read(recv, n), x) << "reduce_scatter";
  SEXTANT_CUDA_CHECK(cudaMemsetAsync(recv, 0, n * bytes_of(type), stream_));
  world_->all_gather(send, recv, n, type);
  EXPECT_EQ(read(recv, n), x) << "all_gather";
  SEXTANT_CUDA_CHECK(cudaMemsetAsync(recv, 0, n * bytes_of(type), stream_));
  world_->all_to_all(send, recv, n, type);
  EXPECT_EQ(read(recv, n), x) << "all_to_all";
  SEXTANT_CUDA_CHECK(cudaMemsetAsync(recv, 0, n * bytes_of(type), stream_));
  world_->send_recv(send, n, 0, recv, n, 0, type);
  EXPECT_EQ(read(recv, n), x) << "send_recv to itself";
  // exchange: two sends and two receives to itself in one group, paired in order.
  void* recv2 = to_device(std::vector<float>(n, -1.0f), type);
  SEXTANT_CUDA_CHECK(cudaMemsetAsync(recv, 0, n * bytes_of(type), stream_));
  const PeerTransfer sends[] = {{send, n, 0}, {send, n / 2, 0}};
  const PeerTransfer receives[] = {{recv, n, 0}, {recv2, n / 2, 0}};
  world_->exchange(sends, receives, type);
  EXPECT_EQ(read(recv, n), x) << "exchange";
  std::vector<float> half = read(recv2, n);
  EXPECT_EQ(std::vector<float>(half.begin(), half.begin() + n / 2), std::vector<float>(x.begin(), x.begin() + n / 2))
      << "exchange, second transfer";
  cudaFree(recv2);
  world_->barrier();
  world_->all_reduce_sum(send, recv, n, type);
  world_->synchronize(std::chrono::seconds(30));
  cudaFree(send);
  cudaFree(recv);
}

TEST_P(NcclWorldOfOne, ParallelGroupsOfOneGpu) {
  const DataType type = GetParam();
  ParallelGroups groups = make_parallel_groups(*world_, sim::ParallelLayout{}, stream_);
  const std::vector<float> x = random(5);
  void* data = to_device(x, type);
  for (Communicator* g : {groups.tp.get(), groups.cp.get(), groups.ep.get(), groups.dp.get(),
                          groups.pp.get()}) {
    ASSERT_NE(g, nullptr);
    EXPECT_EQ(g->size(), 1) << g->name();
    g->all_reduce_sum(data, data, x.size(), type);
  }
  EXPECT_EQ(read(data, x.size()), x);
  EXPECT_EQ(groups.dp->name(), "dp");
  cudaFree(data);
}

// A stream that does not finish in time (here a host function sleeping 1.5 s
// behind an all-reduce; with several ranks, a peer that never joins the
// collective): synchronize gives up after its timeout, names the last
// collective queued and aborts the communicator, so later calls fail at once
// instead of hanging.
TEST_P(NcclWorldOfOne, SynchronizeTimesOutNamingTheCollectiveAndAborts) {
  void* data = to_device(std::vector<float>(4, 1.0f), GetParam());
  world_->all_reduce_sum(data, data, 4, GetParam());
  SEXTANT_CUDA_CHECK(cudaLaunchHostFunc(
      stream_, [](void*) { std::this_thread::sleep_for(std::chrono::milliseconds(1500)); }, nullptr));
  try {
    world_->synchronize(std::chrono::milliseconds(200));
    FAIL() << "synchronize returned while the stream was blocked";
  } catch (const CommError& e) {
    EXPECT_EQ(e.collective(), "all_reduce");
    EXPECT_EQ(e.status_name(), "timeout");
    EXPECT_EQ(std::string(e.what()).rfind("all_reduce on group 'world' (rank 0 of 1): timeout: not done within 0.2 s", 0),
              0u)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("collective #1 queued on this group"), std::string::npos) << e.what();
  }
  // No bound on how long this took: on the H100 with NCCL 2.28.3 the abort inside
  // synchronize waited for the blocked stream (1.51 s, 2026-11-23); a rank stuck for
  // good is ended by the step watchdog (engine/launch/step_watchdog.h).
  try {
    world_->all_reduce_sum(data, data, 4, GetParam());
    FAIL() << "an aborted communicator took a collective";
  } catch (const CommError& e) {
    EXPECT_EQ(e.status_name(), "aborted");
  }
  SEXTANT_CUDA_CHECK(cudaStreamSynchronize(stream_));  // the host function ends; nothing else is queued
  cudaFree(data);
}

TEST_P(NcclWorldOfOne, AnInvalidPeerNamesTheCallAndTheGroup) {
  void* data = to_device(std::vector<float>(4, 1.0f), GetParam());
  try {
    world_->send(data, 4, GetParam(), 3);
    FAIL() << "a send to rank 3 of a world of 1 was accepted";
  } catch (const CommError& e) {
    EXPECT_EQ(e.collective(), "send");
    EXPECT_EQ(e.group(), "world");
    EXPECT_EQ(std::string(e.what()).rfind("send on group 'world' (rank 0 of 1): nccl", 0), 0u)
        << e.what();
  }
  cudaFree(data);
}

class NcclJob : public kernels::testing::GpuTest {};

TEST_F(NcclJob, AWorldOfOneMeetsJoinsAndPrintsTheRankMap) {
  // What `sextant run --nproc-per-node 1` does before training: rendezvous
  // (world of one: no socket), NCCL world, five groups of one, rank map.
  launch::RankEnvironment rank;
  rank.launcher = "env";
  std::ostringstream log;
  const auto job = join_job(rank, sim::ParallelLayout{}, log);
  EXPECT_EQ(job->world->size(), 1);
  EXPECT_EQ(job->groups.pp->size(), 1);
  EXPECT_NE(log.str().find("sextant run: 1 ranks (env), NCCL 2."), std::string::npos) << log.str();
  EXPECT_NE(log.str().find("rank  host"), std::string::npos) << log.str();
  EXPECT_NE(log.str().find("    0   0   0   0   0   0\n"), std::string::npos) << log.str();
}

INSTANTIATE_TEST_SUITE_P(Types, NcclWorldOfOne,
                         ::testing::Values(DataType::kBf16, DataType::kFp32),
                         [](const auto& info) { return std::string(to_string(info.param)); });

}  // namespace
}  // namespace sextant::engine::comm
