// Keeps a stream busy for a set time on the GPU, for benchmarks: queued before
// a timed region's start event, it holds the stream while the host queues the
// region's launches, so the region times the GPU's work and not the host's
// launch rate (the blocking-kernel idea of NVIDIA's nvbench).
#pragma once

#include <cstdint>

#include "kernels/stream.h"

namespace sextant::kernels {

/// One thread that spins on the GPU's global timer for `nanoseconds` (>= 0).
void gpu_wait(std::int64_t nanoseconds, cudaStream_t stream);

}  // namespace sextant::kernels
