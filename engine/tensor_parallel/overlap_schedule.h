// The chunk order of tensor-parallel communication overlapped with the GEMMs
// (Megatron-LM --tp-comm-overlap, layout knob tp_comm_overlap; needs sequence
// parallelism). The token dimension of a (tokens, width) activation is split
// into tp chunks, chunk j being rank j's sequence shard: rows
// [j·tokens/tp, (j+1)·tokens/tp) (Korthikanti et al. 2022, Sec. 4.2.2).
//
// All-gather before a column-parallel GEMM: a ring of tp − 1 steps, the
// schedule of Transformer Engine's userbuffers ring-exchange all-gather
// overlap (TransformerEngine, transformer_engine/common/comm_gemm_overlap/
// comm_gemm_overlap.cpp, CommOverlapP2PBase::split_overlap_ag: at step i a
// rank multiplies the chunk it holds while it passes that chunk on to the next
// rank and receives the previous rank's). Step 0 is the rank's own chunk, with
// no transfer; at step i ≥ 1 rank r sends chunk (r − i + 1) mod tp to rank
// r + 1 and receives chunk (r − i) mod tp from rank r − 1, so every chunk has
// gone round once after tp − 1 steps. The GEMM of step i's chunk runs while
// step i + 1's chunk travels.
//
// Reduce-scatter after a row-parallel GEMM: the GEMM runs chunk by chunk in
// chunk order 0, 1, ..., tp − 1 on every rank (Megatron's split_overlap_rs
// computes one output chunk per step and reduces it while the next one is
// computed); each chunk's partial product goes to its owner (rank j owns chunk
// j) while the next chunk computes, and the owner sums the tp partials of its
// chunk in rank order with fp32 accumulation, rounded once — the in-process
// communicator's reduce-scatter arithmetic, so that path's sums are the same.
// (A ring whose steps add in bf16 would round at every hop.)
//
// Plain integer functions: the CPU tests check them.
#pragma once

namespace sextant::engine::tensor_parallel {

/// The chunk rank `rank` of `size` holds after ring step `step` of the
/// all-gather (0 <= step < size): its own at step 0, then one more per step.
constexpr int ring_gather_received_chunk(int rank, int size, int step) {
  return ((rank - step) % size + size) % size;
}

/// The chunk rank `rank` sends to rank + 1 at ring step `step` (1 <= step < size):
/// the one it received at the step before.
constexpr int ring_gather_sent_chunk(int rank, int size, int step) {
  return ring_gather_received_chunk(rank, size, step - 1);
}

/// The ring's neighbours: rank + 1 receives what this rank sends, rank − 1 sends to it.
constexpr int ring_next(int rank, int size) { return (rank + 1) % size; }
constexpr int ring_previous(int rank, int size) { return (rank + size - 1) % size; }

}  // namespace sextant::engine::tensor_parallel
