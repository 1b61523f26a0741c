// What the communicator tests share: runs one body per rank on its own thread
// and stream, and converts test data between host floats and device bytes.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <vector>

#include "engine/comm/communicator.h"

namespace sextant::engine::comm::testing {

/// Runs body(rank, communicator) for `ranks` in-process ranks, each on its own
/// thread and stream; waits for every stream, then rethrows the first rank's
/// exception, if any.
void run_in_process(int ranks, const std::function<void(int, Communicator&)>& body,
                    std::chrono::milliseconds timeout = std::chrono::seconds(60));

/// `values` as `type` (bf16 rounds to nearest even), in device memory; the
/// caller frees it with cudaFree.
void* to_device(const std::vector<float>& values, DataType type);
/// `count` elements of `type` at `device`, as floats (waits for the device).
std::vector<float> from_device(const void* device, std::size_t count, DataType type);
/// Rounds to what `type` holds: bf16 to nearest even, fp32 unchanged.
float round_to(float value, DataType type);

}  // namespace sextant::engine::comm::testing
