// What the profile records about the machine it was measured on.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace sextant::engine::calibration {

struct DeviceInfo {
  std::string name;                   // "NVIDIA H100 80GB HBM3"
  std::int64_t memory_bytes = 0;
  std::size_t l2_bytes = 0;           // read from the device, never typed
  int sm_count = 0;
  std::string driver_version;         // the kernel module's ("580.159.04"), else the driver API's
  std::string cuda_runtime_version;   // "13.0"
  std::string cublas_version;         // cuBLASLt's, "13.1.0"
};

/// Number of CUDA devices; 0 when the runtime finds none (or no driver).
int cuda_device_count();

/// Reads `device`'s properties and the library versions. Throws CudaError.
DeviceInfo device_info(int device);

/// The git commit the binary was built from (tools/git_commit.h: stamped at
/// build time, "-dirty" for an unclean tree, "unknown" outside a checkout).
std::string build_commit();

}  // namespace sextant::engine::calibration
