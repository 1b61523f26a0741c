// What a rank holds on its GPU beyond the model's tensors: the CUDA context
// and the libraries' own device memory, NCCL's per-communicator structures
// and its connection buffers. Priced by mechanism from NCCL's source (2.28.3,
// the version the engine ran with), with the two constants NCCL's source does
// not give fitted on our own runs (named below with the runs).
//
// Why these terms and not others:
// - cuBLASLt's workspace (32 MiB, kernels/gemm_cublaslt.h) and every other
//   workspace the engine uses live in its one arena (engine/model/arena_plan.h,
//   category "other"); the simulator's tensor terms do not count them, the
//   context term below (measured as peak minus arena on one GPU) does not
//   either, so nothing is counted twice.
// - The engine allocates its tensors once, in one cudaMalloc (engine/
//   device_arena.cc): there is no caching allocator and so no fragmentation to
//   model. NCCL's own allocations are rounded to the allocation granularity,
//   which is modelled.
// - NCCL connects lazily (NCCL_RUNTIME_CONNECT=1 with cuMem, src/init.cc,
//   src/enqueue.cc, src/group.cc ncclCollPreconnect): ring buffers appear on a
//   communicator's first collective, send/recv buffers per peer on its first
//   send/recv, so only what the step runs is priced (sim/comm/rank_communicators.h).
// - NVLink SHARP (NVLS) buffers are not modelled: every engine run sets
//   NCCL_NVLS_ENABLE=0 (tools/bench/*.sh); with NVLS on NCCL allocates more.
// - Tree connections are not priced: on one node the 2- and 4-rank
//   communicators measured show none beyond the ring's.
#pragma once

#include <vector>

#include "sim/comm/rank_communicators.h"
#include "sim/core/parallel_layout.h"

namespace sextant::sim {

/// The rank's runtime memory by part, bytes.
struct RuntimeMemory {
  double cuda_context = 0;        // CUDA context, runtime reservations, cuBLASLt handle, loaded kernels
  double nccl_process = 0;        // NCCL's once per process that runs collectives over several ranks
  double nccl_communicators = 0;  // per communicator: device structures, per channel and fixed
  double nccl_ring_buffers = 0;   // ring connections of communicators that run collectives
  double nccl_p2p_buffers = 0;    // send/recv connections, per peer
  double nccl() const { return nccl_process + nccl_communicators + nccl_ring_buffers + nccl_p2p_buffers; }
  double total() const { return cuda_context + nccl(); }
};

/// NCCL's sizes on NVLink 4 through NVSwitch (H100/H200 boards), with cuMem
/// (NCCL's default since 2.19) and NVLS off. Defaults are NCCL 2.28.3's and
/// our measurements'; each cites its source.
struct NcclMemorySettings {
  /// cuMemGetAllocationGranularity (CU_MEM_ALLOC_GRANULARITY_MINIMUM) for
  /// device memory: 2 MiB on Hopper. NCCL rounds every device allocation up
  /// to it (src/include/alloc.h ncclCuMemAlloc; p2p.cc aligns connection
  /// buffers to CUDA_IPC_MIN = 2 MiB, src/include/comm.h).
  double granularity_bytes = 2.0 * 1024 * 1024;
  /// Protocol buffers per connection (src/init.cc computeBuffSizes):
  /// Simple NCCL_BUFFSIZE 4 MiB; LL 8 lines x 512 threads x 8 steps x 16 B;
  /// LL128 120 elements x 640 threads x 8 steps x 8 B (src/include/device.h).
  double simple_buffer_bytes = 4.0 * 1024 * 1024;
  double ll_buffer_bytes = 8.0 * 512 * 8 * 16;
  double ll128_buffer_bytes = 120.0 * 640 * 8 * 8;
  /// ncclSendMem / ncclRecvMem: the head/tail words padded to MEM_ALIGN 4096
  /// (src/include/comm.h).
  double connection_header_bytes = 4096;
  /// NVLink peers use P2P read (src/graph/paths.cc ncclTopoCheckP2p: NVLink on
  /// Ampere and later): the Simple buffer sits with the sender, LL and LL128
  /// with the receiver (src/transport/p2p.cc p2pSendSetup/p2pRecvSetup).
  bool p2p_read = true;
  /// Ring channels of a communicator of two or more ranks on one NVSwitch
  /// node: NCCL's ring search reaches 6 channels of 60 GB/s on 18 NVLink 4
  /// links (src/graph/search.cc sm90SpeedArrayIntra, SM90_NVLINK_BW 20.6 per
  /// link), duplicates them (search.cc) and doubles them again
  /// (src/graph/connect.cc ncclTopoPostset): 24. Measured: on 2 x H200 the
  /// memory outside the arena grows by 48 MiB per channel under NCCL_MAX_CTAS
  /// = 2, 4, 8, 16 and the default lands where 24 ring channels put it
  /// (reports/measurements/2026-11-24-h200x2-tp-comm-overlap-timing/max-ctas).
  int ring_channels = 24;
  /// Channels every communicator of two or more ranks initialises: its ring
  /// channels rounded up to a power of two for send/recv (src/graph/paths.cc
  /// ncclTopoComputeP2pChannels, p2pnChannels = pow2Up(nChannels)).
  int channel_slots = 32;
  /// Channels of a one-rank communicator: MAXCHANNELS (src/include/device.h);
  /// measured: six one-rank communicators (`run_nccl_world_of_one`) and the
  /// one-rank groups of every two-GPU run match 64 channels each.
  int one_rank_channels = 64;
  /// Channels per send/recv peer on NVLink: 2 x (path bandwidth / link
  /// bandwidth) = 36 for 18 links, capped by the 32 channel slots
  /// (src/graph/paths.cc ncclTopoGetNchannels, ncclTopoComputeP2pChannels);
  /// measured: tp_comm_overlap's send/recv adds 12 MiB per channel, 32
  /// channels by default (the max-ctas series above).
  int p2p_channels_per_peer = 32;
  /// Device allocations per channel a communicator initialises: the shared
  /// peer array, the channel's peer pointers and its ring ranks (src/channel.cc
  /// initChannel), each a granule.
  int allocations_per_channel = 3;
  /// Fixed device allocations per communicator: ncclDevCommAndChannels and
  /// rankToLocalRank (src/init.cc devCommSetup).
  int allocations_per_communicator = 2;
  /// Fitted: what NCCL adds once to a process whose communicators of several
  /// ranks run collectives, beyond the per-communicator terms (its kernels as
  /// CUDA loads them, the proxy's device state): 376 MiB, peak minus arena of
  /// `run_dp2` (2 x H200, GPT-350M, dp=2) minus the context and the
  /// communicator terms (reports/measurements/2026-11-27-h200x4-one-trainer/
  /// final/gpu_logs.tar.gz).
  double process_bytes = 376.0 * 1024 * 1024;
  /// Fitted: what the first send/recv adds beyond its buffers (the send/recv
  /// kernel as CUDA loads it): 61 MiB, `run_pp2` minus `run_dp2` minus one
  /// peer's buffers (same archive); the tp_comm_overlap series above gives 62.
  double p2p_first_use_bytes = 61.0 * 1024 * 1024;

  /// Device bytes one connection (one peer, one channel, both directions'
  /// halves a rank holds: the receive side of one and the send side of the
  /// other) takes on this rank.
  double connection_bytes() const;
  /// Device bytes a communicator of `ranks` ranks takes at initialisation.
  double communicator_bytes(int ranks) const;
};

/// The context and NCCL's settings.
struct RuntimeMemorySettings {
  /// Measured: peak in use (cudaMemGetInfo) minus the engine's arena on one
  /// GPU, no NCCL: 542 MiB on an H200 (`run_single`, GPT-350M, final archive
  /// above); 0.52-0.54 GiB on H100 and H200 for GPT-350M to 6.7B
  /// (2026-11-23-h100-calibration-check-3, 2026-11-23-h200-calibration-check).
  /// The CUDA 13 context and its reservations, cuBLASLt's handle and every
  /// kernel loaded: one figure, as they are measured together.
  double cuda_context_bytes = 542.0 * 1024 * 1024;
  NcclMemorySettings nccl;
};

/// The runtime memory of a rank of pipeline stage `stage` of `layout`.
RuntimeMemory runtime_memory(const ParallelLayout& layout, int stage, const ModelTraffic& traffic,
                             const RuntimeMemorySettings& settings = {});
/// The same for a given set of communicators (rank_communicators).
RuntimeMemory runtime_memory(const std::vector<RankCommunicator>& communicators,
                             const RuntimeMemorySettings& settings = {});

}  // namespace sextant::sim
