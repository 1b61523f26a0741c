// Time of NCCL collectives and point-to-point transfers, bandwidth plus latency.
//
// Ring algorithms (Patarasuk & Yuan 2009; NCCL): an all-reduce of S bytes over
// n ranks moves 2(n−1)/n·S through every rank's link in 2(n−1) steps; a
// reduce-scatter or all-gather moves half of that in n−1 steps. NCCL runs one
// ring per NIC, so a group with r ranks on each of N > 1 nodes pushes its data
// through r NICs per node at once: the bottleneck bandwidth is the smaller of
// NVLink and r·(NIC bandwidth) (a flat ring across nodes crosses each node
// boundary once per ring). Rates passed in are already the achieved ones; each
// call also pays a fixed launch cost (measured: reports/measurements/2026-11-22-h200x2-nccl).
#pragma once

#include "sim/comm/group_placement.h"

namespace sextant::sim {

/// Achieved per-GPU, per-direction bandwidths and per-step latencies.
struct LinkRates {
  double intra_node_bytes_per_s = 0;
  double inter_node_bytes_per_s = 0;
  double intra_node_latency_s = 0;
  double inter_node_latency_s = 0;
  double collective_launch_s = 0;  // fixed cost per collective or send call
  /// Whose context-parallel ring runs (parallel_comm.cc): the sextant engine's
  /// carries dK/dV in fp32, one hop behind K/V; Megatron-Core's (Transformer
  /// Engine) in bf16, together with K/V. Set from the profile's software.
  bool engine_context_ring = false;
};

/// `bytes` is the full buffer each rank holds before an all-reduce or
/// reduce-scatter and after an all-gather.
double all_reduce_time_s(double bytes, const GroupPlacement& group, const LinkRates& rates);
double reduce_scatter_time_s(double bytes, const GroupPlacement& group, const LinkRates& rates);
double all_gather_time_s(double bytes, const GroupPlacement& group, const LinkRates& rates);
/// `bytes` is what each rank sends in total (a share (n−1)/n leaves the rank,
/// (n−r)/n of it leaves the node through the rank's own NIC).
double all_to_all_time_s(double bytes, const GroupPlacement& group, const LinkRates& rates);
/// One send of `bytes` between two ranks, over NVLink or the network.
double p2p_time_s(double bytes, bool crosses_nodes, const LinkRates& rates);

}  // namespace sextant::sim
