// Which GPU preset (configs/gpus) a device is, from the name the CUDA runtime
// gives it and its memory, so the profile says which datasheet it is measured against.
#pragma once

#include <cstdint>
#include <string>

namespace sextant::engine::calibration {

/// "h100-sxm-80gb" for "NVIDIA H100 80GB HBM3", "h200-sxm-141gb" for "NVIDIA H200",
/// "a100-sxm-80gb" for "NVIDIA A100-SXM4-80GB"; "" for a GPU no preset describes
/// (PCIe and NVL parts included: their clocks and bandwidths differ).
std::string gpu_preset_name(const std::string& device_name, std::int64_t memory_bytes);

}  // namespace sextant::engine::calibration
