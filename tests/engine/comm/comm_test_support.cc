#include "tests/engine/comm/comm_test_support.h"

#include <cuda_runtime_api.h>

#include <cstring>
#include <exception>
#include <thread>

#include "engine/comm/in_process_communicator.h"
#include "kernels/bf16.h"
#include "kernels/cuda_check.h"

namespace sextant::engine::comm::testing {

void run_in_process(int ranks, const std::function<void(int, Communicator&)>& body,
                    std::chrono::milliseconds timeout) {
  std::vector<cudaStream_t> streams(ranks);
  for (auto& s : streams) SEXTANT_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  std::vector<std::exception_ptr> errors(ranks);
  {
    auto world = InProcessCommunicator::create_world(streams, timeout);
    std::vector<std::thread> threads;
    for (int r = 0; r < ranks; ++r) {
      threads.emplace_back([&, r] {
        try {
          body(r, *world[r]);
          SEXTANT_CUDA_CHECK(cudaStreamSynchronize(streams[r]));
        } catch (...) {
          errors[r] = std::current_exception();
        }
      });
    }
    for (auto& t : threads) t.join();
  }
  for (auto& s : streams) cudaStreamDestroy(s);
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
}

float round_to(float value, DataType type) {
  return type == DataType::kBf16 ? kernels::to_float(kernels::from_float(value)) : value;
}

void* to_device(const std::vector<float>& values, DataType type) {
  std::vector<std::byte> bytes(values.size() * bytes_of(type));
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (type == DataType::kBf16) {
      const kernels::Bf16 v = kernels::from_float(values[i]);
      std::memcpy(bytes.data() + 2 * i, &v, 2);
    } else {
      std::memcpy(bytes.data() + 4 * i, &values[i], 4);
    }
  }
  void* device = nullptr;
  SEXTANT_CUDA_CHECK(cudaMalloc(&device, bytes.size() + 1));
  if (!bytes.empty())
    SEXTANT_CUDA_CHECK(cudaMemcpy(device, bytes.data(), bytes.size(), cudaMemcpyHostToDevice));
  // A pageable copy may return before its DMA lands; the ranks read it from other streams.
  SEXTANT_CUDA_CHECK(cudaDeviceSynchronize());
  return device;
}

std::vector<float> from_device(const void* device, std::size_t count, DataType type) {
  std::vector<std::byte> bytes(count * bytes_of(type));
  if (!bytes.empty())
    SEXTANT_CUDA_CHECK(cudaMemcpy(bytes.data(), device, bytes.size(), cudaMemcpyDeviceToHost));
  std::vector<float> out(count);
  for (std::size_t i = 0; i < count; ++i) {
    if (type == DataType::kBf16) {
      kernels::Bf16 v;
      std::memcpy(&v, bytes.data() + 2 * i, 2);
      out[i] = kernels::to_float(v);
    } else {
      std::memcpy(&out[i], bytes.data() + 4 * i, 4);
    }
  }
  return out;
}

}  // namespace sextant::engine::comm::testing
