// Every collective of the in-process communicator against a CPU reference on
// random data, for 1, 2, 3, 4 and 8 ranks, bf16 and fp32. The reductions add
// ranks in rank order with fp32 accumulation and round once (sum_buffers.h);
// the reference does the same, so results must match bit for bit.
#include "engine/comm/in_process_communicator.h"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "engine/comm/comm_error.h"
#include "engine/comm/host_gather.h"
#include "engine/comm/parallel_groups.h"
#include "kernels/cuda_check.h"
#include "tests/engine/comm/comm_test_support.h"
#include "tests/kernels/gpu_test_support.h"

namespace sextant::engine::comm {
namespace {

using testing::from_device;
using testing::round_to;
using testing::run_in_process;
using testing::to_device;

// An odd length, so no rank's block is a multiple of a thread block or a vector width.
constexpr std::size_t kCount = 3001;

class InProcessCollectives
    : public kernels::testing::GpuTestWithParam<std::tuple<int, DataType>> {
 protected:
  int ranks() const { return std::get<0>(GetParam()); }
  DataType type() const { return std::get<1>(GetParam()); }
  // One vector of n values per rank, already representable in type().
  std::vector<std::vector<float>> inputs(std::size_t n) {
    std::vector<std::vector<float>> out;
    for (int r = 0; r < ranks(); ++r) {
      std::vector<float> v = kernels::testing::random_float(rng(), n, 0.0, 1.0);
      for (float& x : v) x = round_to(x, type());
      out.push_back(std::move(v));
    }
    return out;
  }
  // Runs `call(comm, send, recv)` on every rank, rank r sending in[r]; returns
  // each rank's recv (out_count elements, filled with -1 before the call).
  std::vector<std::vector<float>> run_collective(
      const std::vector<std::vector<float>>& in, std::size_t out_count,
      const std::function<void(Communicator&, void*, void*)>& call) {
    std::vector<std::vector<float>> out(ranks());
    run_in_process(ranks(), [&](int r, Communicator& comm) {
      void* send = to_device(in[r], type());
      void* recv = to_device(std::vector<float>(out_count, -1.0f), type());
      call(comm, send, recv);
      SEXTANT_CUDA_CHECK(cudaStreamSynchronize(comm.stream()));
      out[r] = from_device(recv, out_count, type());
      cudaFree(send);
      cudaFree(recv);
    });
    return out;
  }
  // The sum over ranks of in[j][offset + i], i < n: fp32, rank order, rounded once.
  std::vector<float> reference_sum(const std::vector<std::vector<float>>& in, std::size_t offset,
                                   std::size_t n) const {
    std::vector<float> out(n);
    for (std::size_t i = 0; i < n; ++i) {
      float sum = in[0][offset + i];
      for (int j = 1; j < ranks(); ++j) sum += in[j][offset + i];
      out[i] = round_to(sum, type());
    }
    return out;
  }
};

TEST_P(InProcessCollectives, AllReduceSumOutOfPlaceAndInPlace) {
  const auto in = inputs(kCount);
  const std::vector<float> want = reference_sum(in, 0, kCount);
  std::vector<std::vector<float>> out_of_place(ranks()), in_place(ranks());
  run_in_process(ranks(), [&](int r, Communicator& comm) {
    void* send = to_device(in[r], type());
    void* recv = to_device(std::vector<float>(kCount, -1.0f), type());
    comm.all_reduce_sum(send, recv, kCount, type());
    comm.all_reduce_sum(send, send, kCount, type());
    SEXTANT_CUDA_CHECK(cudaStreamSynchronize(comm.stream()));
    out_of_place[r] = from_device(recv, kCount, type());
    in_place[r] = from_device(send, kCount, type());
    cudaFree(send);
    cudaFree(recv);
  });
  for (int r = 0; r < ranks(); ++r) {
    EXPECT_EQ(out_of_place[r], want) << "rank " << r;
    EXPECT_EQ(in_place[r], want) << "rank " << r << " in place";
  }
}

TEST_P(InProcessCollectives, ReduceScatterSum) {
  const auto in = inputs(ranks() * kCount);
  const auto out = run_collective(in, kCount, [&](Communicator& comm, void* send, void* recv) {
    comm.reduce_scatter_sum(send, recv, kCount, type());
  });
  // Rank r holds the sum of block r: elements [r·kCount, (r+1)·kCount) of every rank.
  for (int r = 0; r < ranks(); ++r)
    EXPECT_EQ(out[r], reference_sum(in, r * kCount, kCount)) << "rank " << r;
}

TEST_P(InProcessCollectives, AllGather) {
  const auto in = inputs(kCount);
  std::vector<float> want;
  for (const auto& v : in) want.insert(want.end(), v.begin(), v.end());
  const auto out = run_collective(in, ranks() * kCount, [&](Communicator& comm, void* send, void* recv) {
    comm.all_gather(send, recv, kCount, type());
  });
  for (int r = 0; r < ranks(); ++r) EXPECT_EQ(out[r], want) << "rank " << r;
}

TEST_P(InProcessCollectives, AllToAll) {
  const auto in = inputs(ranks() * kCount);
  const auto out = run_collective(in, ranks() * kCount, [&](Communicator& comm, void* send, void* recv) {
    comm.all_to_all(send, recv, kCount, type());
  });
  // Block j of rank r's result is block r of rank j's input.
  for (int r = 0; r < ranks(); ++r) {
    std::vector<float> want;
    for (int j = 0; j < ranks(); ++j)
      want.insert(want.end(), in[j].begin() + r * kCount, in[j].begin() + (r + 1) * kCount);
    EXPECT_EQ(out[r], want) << "rank " << r;
  }
}

TEST_P(InProcessCollectives, SendRecvRingBothWays) {
  const auto in = inputs(kCount);
  std::vector<std::vector<float>> exchanged(ranks()), paired(ranks());
  run_in_process(ranks(), [&](int r, Communicator& comm) {
    const int next = (r + 1) % ranks(), previous = (r + ranks() - 1) % ranks();
    void* send = to_device(in[r], type());
    void* recv = to_device(std::vector<float>(kCount, -1.0f), type());
    void* recv2 = to_device(std::vector<float>(kCount, -1.0f), type());
    // Every rank sends and receives at once: send_recv cannot deadlock.
    comm.send_recv(send, kCount, next, recv, kCount, previous, type());
    // Blocking pairs in the other direction: even ranks send first, odd ranks receive first.
    if (ranks() > 1) {
      if (r % 2 == 0) {
        comm.send(send, kCount, type(), previous);
        comm.recv(recv2, kCount, type(), next);
      } else {
        comm.recv(recv2, kCount, type(), next);
        comm.send(send, kCount, type(), previous);
      }
    }
    SEXTANT_CUDA_CHECK(cudaStreamSynchronize(comm.stream()));
    exchanged[r] = from_device(recv, kCount, type());
    paired[r] = from_device(recv2, kCount, type());
    cudaFree(send);
    cudaFree(recv);
    cudaFree(recv2);
  });
  for (int r = 0; r < ranks(); ++r) {
    EXPECT_EQ(exchanged[r], in[(r + ranks() - 1) % ranks()]) << "rank " << r;
    if (ranks() > 1) {
      EXPECT_EQ(paired[r], in[(r + 1) % ranks()]) << "rank " << r;
    }
  }
}

TEST_P(InProcessCollectives, BarrierWaitsForEveryRank) {
  // Each rank counts itself in before the barrier; after it, all must be counted.
  std::atomic<int> arrived{0};
  std::vector<int> seen(ranks());
  run_in_process(ranks(), [&](int r, Communicator& comm) {
    for (int round = 1; round <= 3; ++round) {
      ++arrived;
      comm.barrier();
      if (round == 3) seen[r] = arrived.load();
      comm.barrier();  // nobody counts the next round before all have looked
    }
  });
  for (int r = 0; r < ranks(); ++r) EXPECT_EQ(seen[r], 3 * ranks()) << "rank " << r;
}

INSTANTIATE_TEST_SUITE_P(
    RanksAndTypes, InProcessCollectives,
    ::testing::Combine(::testing::Values(1, 2, 3, 4, 8),
                       ::testing::Values(DataType::kBf16, DataType::kFp32)),
    [](const auto& info) {
      return std::to_string(std::get<0>(info.param)) + "ranks_" +
             std::string(to_string(std::get<1>(info.param)));
    });

class InProcessGroups : public kernels::testing::GpuTest {};

// exchange(): rank 2 sends X to rank 0, then (once X is taken) Y to rank 1;
// rank 1 forwards Y to rank 0 as Z. Rank 0 receives Z and X in one exchange,
// Z listed first: taken in arrival order (X, then Z) it completes; taken in the
// listed order it would wait for Z forever. Ranks 0 and 1 also send to each
// other inside the same exchanges (crossing sends).
TEST_F(InProcessGroups, ExchangeReceivesInArrivalOrder) {
  std::vector<std::vector<float>> got(3);
  run_in_process(3, [&](int r, Communicator& comm) {
    const std::size_t n = 4;
    auto filled = [&](float v) { return to_device(std::vector<float>(n, v), DataType::kFp32); };
    if (r == 2) {
      void* x = filled(1.0f);
      void* y = filled(2.0f);
      const PeerTransfer to0[] = {{x, n, 0}};
      comm.exchange(to0, {}, DataType::kFp32);
      const PeerTransfer to1[] = {{y, n, 1}};
      comm.exchange(to1, {}, DataType::kFp32);
      comm.synchronize(std::chrono::seconds(10));
      cudaFree(x);
      cudaFree(y);
    } else if (r == 1) {
      void* y = filled(-1.0f);
      void* from0 = filled(-1.0f);
      void* mine = filled(10.0f);
      const PeerTransfer receive_y[] = {{y, n, 2}};
      comm.exchange({}, receive_y, DataType::kFp32);
      const PeerTransfer sends[] = {{y, n, 0}, {mine, n, 0}};  // Z, and a second message
      const PeerTransfer receive[] = {{from0, n, 0}};
      comm.exchange(sends, receive, DataType::kFp32);
      got[1] = from_device(from0, n, DataType::kFp32);
      for (void* p : {y, from0, mine}) cudaFree(p);
    } else {
      void* z = filled(-1.0f);
      void* x = filled(-1.0f);
      void* second = filled(-1.0f);
      void* mine = filled(20.0f);
      const PeerTransfer sends[] = {{mine, n, 1}};
      const PeerTransfer receives[] = {{z, n, 1}, {x, n, 2}, {second, n, 1}};
      comm.exchange(sends, receives, DataType::kFp32);
      got[0] = from_device(z, n, DataType::kFp32);
      const std::vector<float> xs = from_device(x, n, DataType::kFp32);
      const std::vector<float> seconds = from_device(second, n, DataType::kFp32);
      got[0].insert(got[0].end(), xs.begin(), xs.end());
      got[0].insert(got[0].end(), seconds.begin(), seconds.end());
      for (void* p : {z, x, second, mine}) cudaFree(p);
    }
  });
  // Rank 0: Z = Y = 2, X = 1, then rank 1's second message 10 (pairs in send order).
  EXPECT_EQ(got[0], (std::vector<float>{2, 2, 2, 2, 1, 1, 1, 1, 10, 10, 10, 10}));
  EXPECT_EQ(got[1], (std::vector<float>{20, 20, 20, 20}));
}

TEST_F(InProcessGroups, ParallelGroupsFollowTheRankOrder) {
  // tp=2, dp=2, pp=2, ep=4 on 8 ranks: each rank all-gathers its world rank in
  // each group. TP groups {0,1},{2,3},..; DP {0,2},{1,3},{4,6},{5,7}; PP
  // {0,4},{1,5},..; EP the 4 ranks of a stage; CP one rank each.
  sim::ParallelLayout layout;
  layout.tp = 2, layout.dp = 2, layout.pp = 2, layout.ep = 4;
  std::vector<std::vector<std::vector<float>>> members(8);
  std::vector<std::vector<int>> group_ranks(8);
  run_in_process(8, [&](int r, Communicator& world) {
    ParallelGroups groups = make_parallel_groups(world, layout, world.stream());
    void* mine = to_device({static_cast<float>(r)}, DataType::kFp32);
    for (Communicator* g : {groups.tp.get(), groups.cp.get(), groups.ep.get(), groups.dp.get(),
                            groups.pp.get()}) {
      void* all = to_device(std::vector<float>(g->size(), -1.0f), DataType::kFp32);
      g->all_gather(mine, all, 1, DataType::kFp32);
      SEXTANT_CUDA_CHECK(cudaStreamSynchronize(g->stream()));
      members[r].push_back(from_device(all, g->size(), DataType::kFp32));
      group_ranks[r].push_back(g->rank());
      cudaFree(all);
    }
    cudaFree(mine);
  });
  using V = std::vector<float>;
  EXPECT_EQ(members[5][0], (V{4, 5}));          // tp
  EXPECT_EQ(members[5][1], (V{5}));             // cp
  EXPECT_EQ(members[5][2], (V{4, 5, 6, 7}));    // ep
  EXPECT_EQ(members[5][3], (V{5, 7}));          // dp
  EXPECT_EQ(members[5][4], (V{1, 5}));          // pp
  EXPECT_EQ(group_ranks[5], (std::vector<int>{1, 0, 1, 0, 1}));
  EXPECT_EQ(members[2][3], (V{0, 2}));
  EXPECT_EQ(members[2][4], (V{2, 6}));
}

TEST_F(InProcessGroups, EveryGroupKindWithContextAndExpertParallelism) {
  // tp=2, cp=2, dp=2 on 8 ranks, ep=2, etp=2 (the stage's 8 ranks folded as
  // etp x ep x edp = 2 x 2 x 2): each rank all-gathers its world rank in each
  // group, and the coordinates come from sim::rank_coordinates.
  sim::ParallelLayout layout;
  layout.tp = 2, layout.cp = 2, layout.dp = 2, layout.ep = 2, layout.etp = 2;
  const sim::ParallelGroup kinds[] = {sim::ParallelGroup::kTp,       sim::ParallelGroup::kCp,
                                      sim::ParallelGroup::kDp,       sim::ParallelGroup::kDpCp,
                                      sim::ParallelGroup::kEp,       sim::ParallelGroup::kExpertTp,
                                      sim::ParallelGroup::kExpertDp, sim::ParallelGroup::kPp,
                                      sim::ParallelGroup::kEmbedding};
  std::vector<std::vector<std::vector<float>>> members(8);
  std::vector<sim::RankCoordinates> coordinates(8);
  run_in_process(8, [&](int r, Communicator& world) {
    ParallelGroups groups = make_parallel_groups(world, layout, world.stream());
    coordinates[r] = groups.coordinates;
    void* mine = to_device({static_cast<float>(r)}, DataType::kFp32);
    for (const sim::ParallelGroup kind : kinds) {
      Communicator* g = groups.group(kind);
      ASSERT_NE(g, nullptr) << sim::to_string(kind);
      EXPECT_EQ(groups.size(kind), g->size());
      EXPECT_EQ(groups.spanning(kind), g->size() > 1 ? g : nullptr);
      void* all = to_device(std::vector<float>(g->size(), -1.0f), DataType::kFp32);
      g->all_gather(mine, all, 1, DataType::kFp32);
      SEXTANT_CUDA_CHECK(cudaStreamSynchronize(g->stream()));
      members[r].push_back(from_device(all, g->size(), DataType::kFp32));
      cudaFree(all);
    }
    cudaFree(mine);
  });
  using V = std::vector<float>;
  // Rank 5 = tp 1 + 2·(cp 0 + 2·dp 1).
  EXPECT_EQ(members[5][0], (V{4, 5}));        // tp
  EXPECT_EQ(members[5][1], (V{5, 7}));        // cp, stride tp
  EXPECT_EQ(members[5][2], (V{1, 5}));        // dp, stride tp·cp
  EXPECT_EQ(members[5][3], (V{1, 3, 5, 7}));  // dp x cp
  EXPECT_EQ(members[5][4], (V{5, 7}));        // ep: stride etp
  EXPECT_EQ(members[5][5], (V{4, 5}));        // expert tp
  EXPECT_EQ(members[5][6], (V{1, 5}));        // expert dp: stride etp·ep
  EXPECT_EQ(members[5][7], (V{5}));           // pp
  EXPECT_EQ(members[5][8], (V{5}));           // embedding: one stage
  EXPECT_EQ(coordinates[5].tp, 1);
  EXPECT_EQ(coordinates[5].dp, 1);
  EXPECT_EQ(coordinates[5].ep, 0);
  EXPECT_EQ(coordinates[5].edp, 1);
}

TEST_F(InProcessGroups, SplitWithNegativeColorJoinsNoGroup) {
  // Ranks 0..3: colors 0, -1, 0, 1; keys reverse the order in color 0.
  std::vector<int> sizes(4, -1), new_ranks(4, -1);
  run_in_process(4, [&](int r, Communicator& world) {
    const int color[] = {0, -1, 0, 1};
    auto child = world.split(color[r], 10 - r, "half", world.stream());
    if (child) sizes[r] = child->size(), new_ranks[r] = child->rank();
  });
  EXPECT_EQ(sizes, (std::vector<int>{2, -1, 2, 1}));
  EXPECT_EQ(new_ranks, (std::vector<int>{1, -1, 0, 0}));  // key 8 (rank 2) before key 10
}

// Counts are summed exactly in int32: 3 ranks of 2^25 + r each sum to
// 3·2^25 + 3, which fp32 (24 significant bits) would round to 3·2^25.
TEST_F(InProcessGroups, AllReduceSumsInt32CountsExactly) {
  constexpr int kRanks = 3;
  constexpr std::int32_t kBase = 1 << 25;
  std::vector<std::vector<std::int32_t>> got(kRanks);
  run_in_process(kRanks, [&](int r, Communicator& comm) {
    const std::vector<std::int32_t> mine = {kBase + r, r, -r};
    void* buffer = nullptr;
    SEXTANT_CUDA_CHECK(cudaMalloc(&buffer, mine.size() * sizeof(std::int32_t)));
    SEXTANT_CUDA_CHECK(cudaMemcpy(buffer, mine.data(), mine.size() * sizeof(std::int32_t), cudaMemcpyHostToDevice));
    comm.all_reduce_sum(buffer, buffer, mine.size(), DataType::kInt32);
    SEXTANT_CUDA_CHECK(cudaStreamSynchronize(comm.stream()));
    got[r].resize(mine.size());
    SEXTANT_CUDA_CHECK(
        cudaMemcpy(got[r].data(), buffer, mine.size() * sizeof(std::int32_t), cudaMemcpyDeviceToHost));
    cudaFree(buffer);
  });
  for (int r = 0; r < kRanks; ++r)
    EXPECT_EQ(got[r], (std::vector<std::int32_t>{3 * kBase + 3, 3, -3})) << "rank " << r;
}

TEST_F(InProcessGroups, DisagreeingCountsFailOnEveryRank) {
  std::vector<std::string> errors(2);
  try {
    run_in_process(2, [&](int r, Communicator& comm) {
      void* buffer = to_device(std::vector<float>(20, 1.0f), DataType::kFp32);
      try {
        comm.all_reduce_sum(buffer, buffer, r == 0 ? 10 : 20, DataType::kFp32);
      } catch (const CommError& e) {
        errors[r] = e.what();
      }
      cudaFree(buffer);
    });
  } catch (const std::exception& e) {
    FAIL() << e.what();
  }
  for (const std::string& e : errors) {
    EXPECT_NE(e.find("all_reduce on group 'world'"), std::string::npos) << e;
    EXPECT_NE(e.find("mismatch: rank 0 called all_reduce with 10 fp32 elements, "
                     "rank 1 called all_reduce with 20 fp32 elements"), std::string::npos) << e;
  }
}

TEST_F(InProcessGroups, ARankThatNeverArrivesTimesOut) {
  // Rank 1 skips the all-reduce: rank 0 gives up after the 200 ms timeout
  // with a message naming the collective and the group, instead of hanging.
  std::string error;
  run_in_process(2, [&](int r, Communicator& comm) {
    if (r == 1) return;
    void* buffer = to_device(std::vector<float>(4, 1.0f), DataType::kFp32);
    try {
      comm.all_reduce_sum(buffer, buffer, 4, DataType::kFp32);
    } catch (const CommError& e) {
      error = e.what();
    }
    cudaFree(buffer);
  }, std::chrono::milliseconds(200));
  EXPECT_EQ(error, "all_reduce on group 'world' (rank 0 of 2): timeout: 1 of 2 ranks arrived within 0.2 s");
}

TEST_F(InProcessGroups, SynchronizeWaitsForTheStreamOrTimesOut) {
  // A host function that sleeps 300 ms holds the stream: a 50 ms synchronize
  // fails naming the group, a 10 s one returns once the sleep is over.
  std::string error;
  run_in_process(1, [&](int, Communicator& comm) {
    const auto sleep_300_ms = [](void*) { std::this_thread::sleep_for(std::chrono::milliseconds(300)); };
    SEXTANT_CUDA_CHECK(cudaLaunchHostFunc(comm.stream(), sleep_300_ms, nullptr));
    try {
      comm.synchronize(std::chrono::milliseconds(50));
    } catch (const CommError& e) {
      error = e.what();
    }
    comm.synchronize(std::chrono::seconds(10));
  });
  EXPECT_EQ(error, "synchronize on group 'world' (rank 0 of 1): timeout: the stream's work was "
                   "not done within 0.05 s");
}

TEST_F(InProcessGroups, ARecvWithoutASendTimesOut) {
  std::string error;
  run_in_process(2, [&](int r, Communicator& comm) {
    if (r == 1) return;
    void* buffer = to_device(std::vector<float>(4, 1.0f), DataType::kFp32);
    try {
      comm.recv(buffer, 4, DataType::kFp32, 1);
    } catch (const CommError& e) {
      error = e.what();
    }
    cudaFree(buffer);
  }, std::chrono::milliseconds(200));
  EXPECT_EQ(error, "recv on group 'world' (rank 0 of 2): timeout: no message from rank 1 within 0.2 s");
}

// all_gather_on_host: each rank's number on every rank, in rank order.
class HostGather : public kernels::testing::GpuTest {};

TEST_F(HostGather, EveryRankGetsEveryRanksNumber) {
  std::mutex m;
  std::vector<std::vector<float>> got(3);
  run_in_process(3, [&](int r, Communicator& comm) {
    const std::vector<float> all = all_gather_on_host(comm, 0.5f + static_cast<float>(r), std::chrono::seconds(30));
    std::lock_guard<std::mutex> lock(m);
    got[static_cast<std::size_t>(r)] = all;
  });
  for (const std::vector<float>& all : got) EXPECT_EQ(all, (std::vector<float>{0.5f, 1.5f, 2.5f}));
}

}  // namespace
}  // namespace sextant::engine::comm
