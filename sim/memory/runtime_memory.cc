#include "sim/memory/runtime_memory.h"

#include <cmath>

namespace sextant::sim {

namespace {

double round_up(double bytes, double granularity) { return std::ceil(bytes / granularity) * granularity; }

}  // namespace

double NcclMemorySettings::connection_bytes() const {
  // src/transport/p2p.cc: the receiver holds ncclRecvMem and the LL and LL128
  // buffers (and Simple unless the sender reads), the sender ncclSendMem (and
  // Simple when it reads); each rounded up to CUDA_IPC_MIN.
  const double simple_at_receiver = p2p_read ? 0.0 : simple_buffer_bytes;
  const double simple_at_sender = p2p_read ? simple_buffer_bytes : 0.0;
  const double receive = connection_header_bytes + ll_buffer_bytes + ll128_buffer_bytes + simple_at_receiver;
  const double send = connection_header_bytes + simple_at_sender;
  return round_up(receive, granularity_bytes) + round_up(send, granularity_bytes);
}

double NcclMemorySettings::communicator_bytes(int ranks) const {
  const int channels = ranks <= 1 ? one_rank_channels : channel_slots;
  return (allocations_per_communicator + channels * allocations_per_channel) * granularity_bytes;
}

RuntimeMemory runtime_memory(const std::vector<RankCommunicator>& communicators,
                             const RuntimeMemorySettings& settings) {
  RuntimeMemory out;
  out.cuda_context = settings.cuda_context_bytes;
  if (communicators.empty()) return out;
  const NcclMemorySettings& nccl = settings.nccl;
  out.nccl_process = nccl.process_bytes;
  int peers = 0;
  for (const RankCommunicator& c : communicators) {
    out.nccl_communicators += nccl.communicator_bytes(c.ranks);
    // A ring channel connects this rank's receive from the previous rank and
    // its send to the next (src/transport/generic.cc ncclTransportRingConnect).
    if (c.collectives) out.nccl_ring_buffers += nccl.ring_channels * nccl.connection_bytes();
    // Send/recv to a peer connects p2p_channels_per_peer channels both ways
    // (src/enqueue.cc, src/transport.cc ncclTransportP2pSetup, connIndex 1).
    out.nccl_p2p_buffers += c.p2p_peers * nccl.p2p_channels_per_peer * nccl.connection_bytes();
    peers += c.p2p_peers;
  }
  if (peers > 0) out.nccl_p2p_buffers += nccl.p2p_first_use_bytes;
  return out;
}

RuntimeMemory runtime_memory(const ParallelLayout& layout, int stage, const ModelTraffic& traffic,
                             const RuntimeMemorySettings& settings) {
  return runtime_memory(rank_communicators(layout, stage, traffic), settings);
}

}  // namespace sextant::sim
