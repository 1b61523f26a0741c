// One number from every rank of a group, on the host: for what the ranks
// report together after training (each pipeline stage's measured compute for
// `run --compare`), not for the step. One fp32 all_gather through device
// memory, then a wait on the group's stream.
#pragma once

#include <chrono>
#include <vector>

#include "engine/comm/communicator.h"

namespace sextant::engine::comm {

/// Every rank's `value`, in group-rank order, on every rank; every rank of
/// `group` calls it. Waits at most `timeout` (Communicator::synchronize:
/// throws CommError naming the group when a peer does not come).
std::vector<float> all_gather_on_host(Communicator& group, float value, std::chrono::milliseconds timeout);

}  // namespace sextant::engine::comm
