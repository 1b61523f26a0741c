// sextant_comm_check: every collective of the NCCL communicator on every
// parallel group of a layout, across real processes and GPUs — the check to
// run first on a machine with several GPUs (issue 13's multi-GPU runs).
//
//   sextant_comm_check --nproc-per-node 8 --layout tp=2,pp=2      # one node
//   srun -N 2 --ntasks-per-node 8 sextant_comm_check --layout tp=8  # Slurm
//
// Each rank fills its buffers with small integers (|x| <= 6), so every sum
// over at most 40 ranks is exact in bf16 whatever order NCCL adds in, and
// checks its own results against the CPU's. Every collective is followed by a
// synchronize with a timeout, so a hang is reported, not waited on. Exit code
// 0 when every rank passed, 1 otherwise (the supervisor names the first).
#include <cstddef>
#include <CLI/CLI.hpp>
#include <cuda_runtime_api.h>

#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "engine/comm/comm_error.h"
#include "engine/comm/world_setup.h"
#include "engine/launch/run_launcher.h"
#include "kernels/bf16.h"
#include "kernels/cuda_check.h"
#include "sim/core/config_error.h"

namespace {

using namespace sextant;
using engine::comm::Communicator;
using engine::comm::DataType;

// Rank r's element i of a test buffer: a small integer, exact in bf16.
float value(int rank, std::size_t i) { return static_cast<float>((rank * 7 + static_cast<int>(i % 13)) % 13 - 6); }

std::vector<float> values(int rank, std::size_t n, std::size_t offset = 0) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = value(rank, offset + i);
  return v;
}

// A device buffer of `n` elements of `type`, filled from `host` (or zeros).
class Buffer {
 public:
  Buffer(std::size_t n, DataType type) : n_(n), type_(type) {
    SEXTANT_CUDA_CHECK(cudaMalloc(&data_, n * engine::comm::bytes_of(type) + 16));
    SEXTANT_CUDA_CHECK(cudaMemset(data_, 0, n * engine::comm::bytes_of(type)));
  }
  ~Buffer() { cudaFree(data_); }
  void* get() { return data_; }
  void upload(const std::vector<float>& host) {
    std::vector<std::byte> bytes(n_ * engine::comm::bytes_of(type_));
    for (std::size_t i = 0; i < n_; ++i) {
      if (type_ == DataType::kBf16) {
        const kernels::Bf16 b = kernels::from_float(host[i]);
        std::memcpy(&bytes[2 * i], &b, 2);
      } else {
        std::memcpy(&bytes[4 * i], &host[i], 4);
      }
    }
    SEXTANT_CUDA_CHECK(cudaMemcpy(data_, bytes.data(), bytes.size(), cudaMemcpyHostToDevice));
  }
  std::vector<float> download() const {
    std::vector<std::byte> bytes(n_ * engine::comm::bytes_of(type_));
    SEXTANT_CUDA_CHECK(cudaMemcpy(bytes.data(), data_, bytes.size(), cudaMemcpyDeviceToHost));
    std::vector<float> out(n_);
    for (std::size_t i = 0; i < n_; ++i) {
      if (type_ == DataType::kBf16) {
        kernels::Bf16 b;
        std::memcpy(&b, &bytes[2 * i], 2);
        out[i] = kernels::to_float(b);
      } else {
        std::memcpy(&out[i], &bytes[4 * i], 4);
      }
    }
    return out;
  }

 private:
  void* data_ = nullptr;
  std::size_t n_;
  DataType type_;
};

// Runs every collective on `g`; returns the names of those whose result differs.
std::vector<std::string> check_group(Communicator& g, DataType type, std::size_t n,
                                     std::chrono::milliseconds timeout) {
  std::vector<std::string> failed;
  const int p = g.size(), r = g.rank();
  const std::string tag = g.name() + " " + std::string(engine::comm::to_string(type)) + " ";
  auto expect = [&](const char* op, Buffer& got, const std::vector<float>& want) {
    g.synchronize(timeout);
    if (got.download() != want) failed.push_back(tag + op);
  };
  Buffer send(p * n, type), recv(p * n, type);
  // all_reduce: Σ_j value(j, i)
  send.upload(values(r, p * n));
  g.all_reduce_sum(send.get(), recv.get(), p * n, type);
  std::vector<float> sum(p * n, 0.0f);
  for (int j = 0; j < p; ++j)
    for (std::size_t i = 0; i < p * n; ++i) sum[i] += value(j, i);
  expect("all_reduce", recv, sum);
  // reduce_scatter: block r of that sum
  Buffer block(n, type);
  g.reduce_scatter_sum(send.get(), block.get(), n, type);
  expect("reduce_scatter", block, std::vector<float>(sum.begin() + r * n, sum.begin() + (r + 1) * n));
  // all_gather: block j is rank j's first n values
  g.all_gather(send.get(), recv.get(), n, type);
  std::vector<float> gathered;
  for (int j = 0; j < p; ++j) {
    const auto v = values(j, n);
    gathered.insert(gathered.end(), v.begin(), v.end());
  }
  expect("all_gather", recv, gathered);
  // all_to_all: block j comes from rank j's block r
  g.all_to_all(send.get(), recv.get(), n, type);
  std::vector<float> exchanged;
  for (int j = 0; j < p; ++j) {
    const auto v = values(j, n, r * n);
    exchanged.insert(exchanged.end(), v.begin(), v.end());
  }
  expect("all_to_all", recv, exchanged);
  // send_recv around the ring: from rank r-1
  g.send_recv(send.get(), n, (r + 1) % p, block.get(), n, (r + p - 1) % p, type);
  expect("send_recv", block, values((r + p - 1) % p, n));
  // exchange both ways around the ring in one group (a pipeline stage's
  // exchange with both neighbours): the first block from rank r-1, the
  // second from rank r+1.
  {
    Buffer both(2 * n, type);
    auto* second = static_cast<std::byte*>(both.get()) + n * engine::comm::bytes_of(type);
    const engine::comm::PeerTransfer sends[] = {{send.get(), n, (r + 1) % p}, {send.get(), n, (r + p - 1) % p}};
    const engine::comm::PeerTransfer receives[] = {{both.get(), n, (r + p - 1) % p}, {second, n, (r + 1) % p}};
    g.exchange(sends, receives, type);
    std::vector<float> want = values((r + p - 1) % p, n);
    const std::vector<float> from_next = values((r + 1) % p, n);
    want.insert(want.end(), from_next.begin(), from_next.end());
    expect("exchange", both, want);
  }
  g.barrier();
  return failed;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Checks every NCCL collective on every parallel group of a layout, across processes and GPUs."};
  engine::launch::LaunchOptions launch;
  std::string layout_spec;
  std::size_t count = 1 << 20;
  double timeout_s = 120;
  app.add_option("--nproc-per-node", launch.nproc_per_node, "start N ranks on this node (else: one, or the launcher's)");
  app.add_option("--layout", layout_spec, "tp, cp, pp, ep, etp (dp fills the ranks)");
  app.add_option("--count", count, "elements per rank and block")->capture_default_str();
  app.add_option("--timeout", timeout_s, "seconds before a collective counts as hung")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  try {
    const auto env = engine::launch::process_environment();
    if (const auto code = engine::launch::launch_or_continue(
            launch, env, engine::launch::this_process_arguments(),
            engine::launch::this_executable(), std::cout, std::cerr))
      return *code;
    engine::launch::RankEnvironment rank = engine::launch::rank_environment(env).value_or(
        engine::launch::RankEnvironment{});
    if (rank.launcher.empty()) rank.launcher = "none";
    const sim::ParallelLayout layout =
        engine::launch::layout_for_world(sim::parse_layout(layout_spec), rank.world_size);
    const auto timeout = std::chrono::milliseconds(static_cast<long long>(timeout_s * 1000));
    const auto job = engine::comm::join_job(rank, layout, std::cerr, timeout);
    std::vector<std::string> failed;
    for (Communicator* g : {job->world.get(), job->groups.tp.get(), job->groups.cp.get(),
                            job->groups.ep.get(), job->groups.dp.get(), job->groups.pp.get()}) {
      if (g != job->world.get() && g->size() == 1) continue;
      for (DataType type : {DataType::kBf16, DataType::kFp32}) {
        const auto f = check_group(*g, type, count, timeout);
        failed.insert(failed.end(), f.begin(), f.end());
      }
    }
    if (!failed.empty()) {
      std::cerr << "rank " << rank.rank << ": wrong results:";
      for (const std::string& f : failed) std::cerr << " [" << f << "]";
      std::cerr << "\n";
      return 1;
    }
    if (rank.rank == 0)
      std::cout << "comm_check: every collective right on every group of " << layout.to_spec()
                << " (" << rank.world_size << " ranks, " << count << " elements per block)\n";
    return 0;
  } catch (const sim::ConfigError& e) {
    std::cerr << "sextant_comm_check: error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "sextant_comm_check: " << e.what() << "\n";
    return 1;
  }
}
