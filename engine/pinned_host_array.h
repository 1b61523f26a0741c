// A host array in page-locked memory (cudaMallocHost), freed at scope exit: a
// device-to-host cudaMemcpyAsync into it is asynchronous, where one into
// pageable memory returns only once the stream has drained up to and through
// the copy (CUDA Runtime API, "API synchronization behavior"; measured on an
// H100: 1.4 us against the whole 2,000 us of the work queued before it,
// reports/measurements/2026-12-07-h100-recalibration-moe-host-calls/probe.txt). So several
// read-backs can be queued and waited for with one cudaStreamSynchronize.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <span>
#include <utility>

#include "kernels/cuda_check.h"

namespace sextant::engine {

template <typename T>
class PinnedHostArray {
 public:
  PinnedHostArray() = default;
  explicit PinnedHostArray(std::size_t size) : size_(size) {
    if (size > 0) SEXTANT_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&data_), size * sizeof(T)));
  }
  ~PinnedHostArray() {
    if (data_ != nullptr) cudaFreeHost(data_);
  }
  PinnedHostArray(PinnedHostArray&& other) noexcept : data_(other.data_), size_(other.size_) {
    other.data_ = nullptr, other.size_ = 0;
  }
  PinnedHostArray& operator=(PinnedHostArray&& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(size_, other.size_);
    return *this;
  }
  PinnedHostArray(const PinnedHostArray&) = delete;
  PinnedHostArray& operator=(const PinnedHostArray&) = delete;

  T* data() const { return data_; }
  std::size_t size() const { return size_; }
  T& operator[](std::size_t i) const { return data_[i]; }
  std::span<T> span() const { return {data_, size_}; }

 private:
  T* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace sextant::engine
