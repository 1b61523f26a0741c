#include "engine/calibration/device_info.h"

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <fstream>
#include <sstream>

#include "kernels/cuda_check.h"
#include "tools/git_commit.h"

namespace sextant::engine::calibration {

namespace {

std::string dotted(int code, int major_div, int minor_div, bool patch) {
  std::string s = std::to_string(code / major_div) + "." + std::to_string(code % major_div / minor_div);
  if (patch) s += "." + std::to_string(code % minor_div);
  return s;
}

// /proc/driver/nvidia/version: "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04  ..."
// or "... UNIX Open Kernel Module for x86_64  580.159.04 ...": the first word
// after "Kernel Module" that starts with a digit and holds a dot.
std::string kernel_module_version() {
  std::ifstream file("/proc/driver/nvidia/version");
  std::string line;
  if (!std::getline(file, line)) return "";
  const std::string marker = "Kernel Module";
  const std::size_t at = line.find(marker);
  if (at == std::string::npos) return "";
  std::istringstream rest(line.substr(at + marker.size()));
  std::string word;
  while (rest >> word)
    if (!word.empty() && word[0] >= '0' && word[0] <= '9' && word.find('.') != std::string::npos) return word;
  return "";
}

}  // namespace

int cuda_device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return count;
}

DeviceInfo device_info(int device) {
  DeviceInfo info;
  cudaDeviceProp p{};
  SEXTANT_CUDA_CHECK(cudaGetDeviceProperties(&p, device));
  info.name = p.name;
  info.memory_bytes = static_cast<std::int64_t>(p.totalGlobalMem);
  info.l2_bytes = static_cast<std::size_t>(p.l2CacheSize);
  info.sm_count = p.multiProcessorCount;
  int runtime = 0, driver = 0;
  SEXTANT_CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
  SEXTANT_CUDA_CHECK(cudaDriverGetVersion(&driver));
  info.cuda_runtime_version = dotted(runtime, 1000, 10, false);  // 13000 -> "13.0"
  info.driver_version = kernel_module_version();
  if (info.driver_version.empty()) info.driver_version = "CUDA driver API " + dotted(driver, 1000, 10, false);
  // cublasLtGetVersion: major * 10000 + minor * 100 + patch (130100 -> "13.1.0").
  info.cublas_version = dotted(static_cast<int>(cublasLtGetVersion()), 10000, 100, true);
  return info;
}

std::string build_commit() { return git_commit(); }

}  // namespace sextant::engine::calibration
