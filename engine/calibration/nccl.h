// NCCL collectives between the GPUs of this machine, by message size and group
// size, for the profile's `nccl:` tables. One process drives every GPU
// (ncclCommInitAll); groups are the first 2, 4, 8 GPUs.
//
// NCCL is loaded at run time (dlopen "libnccl.so.2"), so the sextant binary
// starts on machines without NCCL and calibrates one GPU there; the engine
// itself does not link NCCL yet.
#pragma once

#include <functional>
#include <string>

#include "engine/calibration/measured_profile.h"

namespace sextant::engine::calibration {

struct NcclResult {
  NcclTables tables;
  std::string version;  // "2.28.9", "" when NCCL was not loaded
  std::string note;     // why a table is empty, when one is
};

/// Message sizes measured: 4 KiB x 4^k up to 256 MiB (quick: x 16 up to 64 MiB).
std::vector<long long> nccl_message_bytes(bool quick);

/// Times all-reduce, reduce-scatter, all-gather, all-to-all and a ring of
/// send/recv on bf16 buffers, for groups of 2, 4, 8 <= gpu_count GPUs. bytes is
/// the full buffer as nccl-tests counts it (doc/PERFORMANCE.md): all-reduce's
/// buffer, reduce-scatter's input, all-gather's output, all-to-all's send
/// buffer, the message each rank sends. Host wall clock around a batch of
/// calls, all GPUs synchronised, median of 5 batches after 3 warm-up calls.
/// `on_point` is called after each point (progress). Throws std::runtime_error
/// when NCCL is found but fails.
NcclResult measure_nccl(int gpu_count, bool quick, const std::function<void()>& on_point);

/// Points measure_nccl will time for `gpu_count` GPUs (for the progress bar).
int nccl_point_count(int gpu_count, bool quick);

}  // namespace sextant::engine::calibration
