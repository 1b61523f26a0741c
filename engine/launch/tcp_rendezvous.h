// The start-up handshake of a multi-process run, over TCP: rank 0 listens on
// MASTER_PORT, every other rank connects to MASTER_ADDR:MASTER_PORT and says
// who it is (rank, world size, a line about itself: host and GPU); once all
// have connected, rank 0 sends each of them the blob (NCCL's unique id: opaque
// bytes) and every rank's line. So every rank leaves with the same blob and
// the whole rank map.
//
// Nothing waits forever: a master that cannot be reached, a rank that never
// connects, a reply that never comes all fail after `timeout` with an error
// naming the address and the ranks concerned.
#pragma once

#include <chrono>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

namespace sextant::engine::launch {

/// A failed rendezvous; what() names host:port and what did not happen.
class RendezvousError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct RendezvousOptions {
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  int rank = 0;
  int world_size = 1;
  std::chrono::milliseconds timeout = std::chrono::seconds(120);
};

struct RendezvousResult {
  std::vector<std::byte> blob;             // rank 0's blob, on every rank
  std::vector<std::string> rank_lines;     // each rank's line, by rank
};

/// Rank 0 passes the blob to hand out; the others pass nothing and receive it.
/// World size 1 returns at once without opening a socket.
RendezvousResult rendezvous(const RendezvousOptions& options, const std::vector<std::byte>& blob,
                            const std::string& rank_line);

}  // namespace sextant::engine::launch
