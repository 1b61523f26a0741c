// Which GPU preset (configs/gpus) a GPU name describes: the one rule of the
// project, for the name the CUDA runtime gives a device ("NVIDIA H100 80GB
// HBM3", with its memory) and for the names validation cases and users write
// ("H100-SXM-80GB (DGX-H100)").
//
// A preset is a datasheet: one chip in one form factor with one memory size.
// A name matches it when it names the chip as a word of its own ("H100", not
// "GH200"), does not name another form factor (PCIe and NVL parts run other
// clocks, power limits and interconnects), and its memory is the preset's —
// the device's memory when given, else a "<N>GB" word of the name, else
// (neither known) the chip alone decides.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace sextant::sim {

/// "h100-sxm-80gb" for "NVIDIA H100 80GB HBM3" (79.6 GiB) or "H100-SXM-80GB";
/// "h200-sxm-141gb" for "NVIDIA H200" (140 GiB); "a100-sxm-80gb" for
/// "NVIDIA A100-SXM4-80GB"; "" for a GPU no preset describes ("NVIDIA H100
/// PCIe", "NVIDIA H100 NVL", "NVIDIA A100-SXM4-40GB", "NVIDIA GH200 480GB").
/// `memory_bytes`: the device's total memory, when known.
std::string gpu_preset_name(std::string_view gpu_name, std::optional<std::int64_t> memory_bytes = std::nullopt);

}  // namespace sextant::sim
