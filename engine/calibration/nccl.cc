#include "engine/calibration/nccl.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#ifndef SEXTANT_NO_NCCL_HEADER
#include <nccl.h>
#endif

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <vector>

#include "kernels/cuda_check.h"

namespace sextant::engine::calibration {

#ifndef SEXTANT_NO_NCCL_HEADER
namespace {

// The NCCL entry points used, resolved from the shared library.
struct Nccl {
  void* handle = nullptr;
  decltype(&ncclGetVersion) get_version = nullptr;
  decltype(&ncclGetErrorString) error_string = nullptr;
  decltype(&ncclCommInitAll) init_all = nullptr;
  decltype(&ncclCommDestroy) destroy = nullptr;
  decltype(&ncclGroupStart) group_start = nullptr;
  decltype(&ncclGroupEnd) group_end = nullptr;
  decltype(&ncclAllReduce) all_reduce = nullptr;
  decltype(&ncclReduceScatter) reduce_scatter = nullptr;
  decltype(&ncclAllGather) all_gather = nullptr;
  decltype(&ncclAlltoAll) all_to_all = nullptr;  // NCCL >= 2.28; null before
  decltype(&ncclSend) send = nullptr;
  decltype(&ncclRecv) recv = nullptr;

  ~Nccl() {
    if (handle != nullptr) dlclose(handle);
  }
  void check(ncclResult_t r, const char* call) const {
    if (r != ncclSuccess)
      throw std::runtime_error(std::string("NCCL ") + call + ": " + (error_string ? error_string(r) : "error"));
  }
};

template <typename F>
void resolve(void* handle, F& f, const char* name) {
  f = reinterpret_cast<F>(dlsym(handle, name));
}

bool load(Nccl& n) {
  n.handle = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
  if (n.handle == nullptr) return false;
  resolve(n.handle, n.get_version, "ncclGetVersion");
  resolve(n.handle, n.error_string, "ncclGetErrorString");
  resolve(n.handle, n.init_all, "ncclCommInitAll");
  resolve(n.handle, n.destroy, "ncclCommDestroy");
  resolve(n.handle, n.group_start, "ncclGroupStart");
  resolve(n.handle, n.group_end, "ncclGroupEnd");
  resolve(n.handle, n.all_reduce, "ncclAllReduce");
  resolve(n.handle, n.reduce_scatter, "ncclReduceScatter");
  resolve(n.handle, n.all_gather, "ncclAllGather");
  resolve(n.handle, n.all_to_all, "ncclAlltoAll");
  resolve(n.handle, n.send, "ncclSend");
  resolve(n.handle, n.recv, "ncclRecv");
  return n.get_version && n.init_all && n.destroy && n.group_start && n.group_end && n.all_reduce &&
         n.reduce_scatter && n.all_gather && n.send && n.recv;
}

std::vector<int> group_sizes(int gpu_count) {
  std::vector<int> sizes;
  for (int g = 2; g <= std::min(gpu_count, 8); g *= 2) sizes.push_back(g);
  return sizes;
}

constexpr int kCollectives = 5;

}  // namespace

std::vector<long long> nccl_message_bytes(bool quick) {
  std::vector<long long> sizes;
  const long long largest = quick ? (64LL << 20) : (256LL << 20);
  for (long long b = 4096; b <= largest; b *= quick ? 16 : 4) sizes.push_back(b);
  return sizes;
}

int nccl_point_count(int gpu_count, bool quick) {
  return static_cast<int>(group_sizes(gpu_count).size() * nccl_message_bytes(quick).size()) * kCollectives;
}

NcclResult measure_nccl(int gpu_count, bool quick, const std::function<void()>& on_point) {
  NcclResult result;
  if (gpu_count < 2) {
    result.note = "one GPU: no collective measured";
    return result;
  }
  Nccl n;
  if (!load(n)) {
    result.note = "libnccl.so.2 not found (or too old): no collective measured";
    return result;
  }
  int code = 0;
  n.check(n.get_version(&code), "ncclGetVersion");
  // NCCL_VERSION_CODE since 2.9: major * 10000 + minor * 100 + patch (nccl.h).
  result.version = std::to_string(code / 10000) + "." + std::to_string(code / 100 % 100) + "." + std::to_string(code % 100);
  const std::vector<long long> sizes = nccl_message_bytes(quick);
  const long long largest = sizes.back();
  for (const int g : group_sizes(gpu_count)) {
    std::vector<int> devices(static_cast<std::size_t>(g));
    for (int d = 0; d < g; ++d) devices[static_cast<std::size_t>(d)] = d;
    std::vector<ncclComm_t> comms(static_cast<std::size_t>(g));
    n.check(n.init_all(comms.data(), g, devices.data()), "ncclCommInitAll");
    std::vector<cudaStream_t> streams(static_cast<std::size_t>(g));
    std::vector<void*> send(static_cast<std::size_t>(g)), recv(static_cast<std::size_t>(g));
    for (int d = 0; d < g; ++d) {
      SEXTANT_CUDA_CHECK(cudaSetDevice(d));
      SEXTANT_CUDA_CHECK(cudaStreamCreateWithFlags(&streams[static_cast<std::size_t>(d)], cudaStreamNonBlocking));
      SEXTANT_CUDA_CHECK(cudaMalloc(&send[static_cast<std::size_t>(d)], static_cast<std::size_t>(largest)));
      SEXTANT_CUDA_CHECK(cudaMalloc(&recv[static_cast<std::size_t>(d)], static_cast<std::size_t>(largest)));
      SEXTANT_CUDA_CHECK(cudaMemset(send[static_cast<std::size_t>(d)], 0, static_cast<std::size_t>(largest)));
    }
    auto sync_all = [&] {
      for (int d = 0; d < g; ++d) {
        SEXTANT_CUDA_CHECK(cudaSetDevice(d));
        SEXTANT_CUDA_CHECK(cudaStreamSynchronize(streams[static_cast<std::size_t>(d)]));
      }
    };
    for (int c = 0; c < kCollectives; ++c) {
      std::vector<CollectivePoint>* table[] = {&result.tables.all_reduce, &result.tables.reduce_scatter,
                                               &result.tables.all_gather, &result.tables.all_to_all,
                                               &result.tables.send_recv};
      for (const long long bytes : sizes) {
        const std::size_t elements = static_cast<std::size_t>(bytes) / 2;  // bf16
        const std::size_t per_rank = elements / static_cast<std::size_t>(g);
        auto call = [&] {
          n.check(n.group_start(), "ncclGroupStart");
          for (int d = 0; d < g; ++d) {
            const std::size_t i = static_cast<std::size_t>(d);
            ncclComm_t comm = comms[i];
            cudaStream_t s = streams[i];
            switch (c) {
              case 0: n.check(n.all_reduce(send[i], recv[i], elements, ncclBfloat16, ncclSum, comm, s), "ncclAllReduce"); break;
              case 1: n.check(n.reduce_scatter(send[i], recv[i], per_rank, ncclBfloat16, ncclSum, comm, s), "ncclReduceScatter"); break;
              case 2: n.check(n.all_gather(send[i], recv[i], per_rank, ncclBfloat16, comm, s), "ncclAllGather"); break;
              case 3: n.check(n.all_to_all(send[i], recv[i], per_rank, ncclBfloat16, comm, s), "ncclAlltoAll"); break;
              default:
                n.check(n.send(send[i], elements, ncclBfloat16, (d + 1) % g, comm, s), "ncclSend");
                n.check(n.recv(recv[i], elements, ncclBfloat16, (d + g - 1) % g, comm, s), "ncclRecv");
            }
          }
          n.check(n.group_end(), "ncclGroupEnd");
        };
        if (c == 3 && n.all_to_all == nullptr) {
          result.note = "this NCCL has no ncclAlltoAll (2.28+): all_to_all not measured";
          on_point();
          continue;
        }
        for (int w = 0; w < 3; ++w) call();
        sync_all();
        auto time_batch = [&](int calls) {
          const auto start = std::chrono::steady_clock::now();
          for (int i = 0; i < calls; ++i) call();
          sync_all();
          return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / calls;
        };
        const double estimate = time_batch(1);
        const int calls = static_cast<int>(std::clamp(1e-3 / estimate, 1.0, 200.0));
        std::vector<double> means;
        for (int r = 0; r < 5; ++r) means.push_back(time_batch(calls));
        std::nth_element(means.begin(), means.begin() + 2, means.end());
        table[c]->push_back({g, bytes, means[2]});
        on_point();
      }
    }
    for (int d = 0; d < g; ++d) {
      const std::size_t i = static_cast<std::size_t>(d);
      cudaSetDevice(d);
      cudaFree(send[i]);
      cudaFree(recv[i]);
      cudaStreamDestroy(streams[i]);
      n.destroy(comms[i]);
    }
  }
  SEXTANT_CUDA_CHECK(cudaSetDevice(0));
  return result;
}
#else
std::vector<long long> nccl_message_bytes(bool) { return {}; }
int nccl_point_count(int, bool) { return 0; }
NcclResult measure_nccl(int, bool, const std::function<void()>&) {
  NcclResult r;
  r.note = "built without nccl.h: no collective measured";
  return r;
}
#endif

}  // namespace sextant::engine::calibration
