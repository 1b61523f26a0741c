#include "engine/transformer/context_parallel_ring_attention_core.h"

#include <algorithm>

#include "engine/comm/communicator.h"
#include "kernels/attention_merge.h"
#include "kernels/fp32_rows.h"

// Stream ordering (the argument every reused buffer relies on). Two streams:
// the compute stream (every kernel here) and the cp group's stream (every
// transfer). Collectives::start makes the group's stream wait for all the
// compute work queued before the call, and PendingCollective::wait makes the
// compute stream's later work wait for the transfer; the group's stream runs
// its transfers in the order started. A send_recv is done (its event fires)
// only once both its receive has landed and its send buffer has been read:
// NCCL's grouped ncclSend/ncclRecv completes on the stream as one operation;
// the in-process communicator's send_recv makes this rank's stream wait for
// the peer's copy out of the send buffer (await_taken) before it returns.
//
// K/V ring (forward and backward). Block B_i = held_block(i) = kv_ block i % 2.
// The exchange started at step i sends B_i and receives B_{i+1}, i.e. block
// (i+1) % 2, the block step i−1's calls read. It starts after every kernel
// queued so far — step i−1's calls included — so the receive overwrites
// nothing still read; step i's calls read B_i while it is sent (reads only).
// Step i+1's calls are queued after the wait for it. The next exchange
// (step i+1: sends B_{i+1}, receives into B_i) starts after step i's calls.
//
// dK/dV ring (backward). Accumulator A_i = grad_accumulator(i) = grad_kv_
// accumulator i % 2. At step i the compute stream adds the step's partials
// into A_i — after waiting for its arrival (i >= 1) — and then the exchange
// sends A_i and receives A_{i+1} (= A_{i−1}'s memory): it starts after those
// additions, and A_{i−1} was last touched by the previous exchange's send,
// earlier on the same stream. The step's partials (partial_kv_) are written
// by step i's flash calls and read by step i's additions, both on the compute
// stream, before step i+1's calls write them again.
//
// Across calls: the last transfer of a forward (the K/V exchange of step
// cp−2) and of a backward (the dK/dV hop after step cp−1, queued after every
// other on the group's stream) is waited for before the call returns, so the
// next layer's packing into kv_ and its additions into grad_kv_ (compute
// stream) come after every transfer of this call. Scratch used by the compute
// stream alone (partial_q_, partial_lse_, q_fp32_) is ordered by that stream.
//
// Both communicators pair the ring's messages: every rank calls the same
// send_recv's in the same order (send to rank+1, receive from rank−1), NCCL
// groups each send with its receive so no rank's send waits for its peer's
// receive to be posted first, and the in-process send_recv posts its message
// before it waits for the peer's, so the ring's simultaneous calls all meet.

namespace sextant::engine::transformer {
namespace {

constexpr auto kAct = MemoryCategory::kActivations;

}  // namespace

ContextParallelRingAttentionCore::ContextParallelRingAttentionCore(ModelContext& context)
    : context_(context), layout_(context.shape(), "ContextParallelRingAttentionCore") {}

ContextParallelRingAttentionCore::~ContextParallelRingAttentionCore() = default;

void ContextParallelRingAttentionCore::reserve(BufferReserver& r) {
  const std::size_t block = layout_.kv.block_elements();  // 2E
  const std::size_t c = to_size(layout_.kv.chunk_tokens);
  const std::size_t batch = to_size(layout_.kv.batch);
  r.shared(kv_, "cp.ring.kv", kAct, 2 * block);
  r.shared(q_fp32_, "cp.ring.q_fp32", kAct, batch * to_size(layout_.kv.local_tokens()) * layout_.q_width);
  r.shared(partial_q_, "cp.ring.partial_q", kAct, c * layout_.q_row_stride);
  r.shared(partial_lse_, "cp.ring.partial_lse", kAct, to_size(layout_.local.heads) * c);
  r.shared(partial_kv_, "cp.ring.partial_kv", kAct, 2 * batch * 3 * c * layout_.kv_width);
  r.shared(grad_kv_, "cp.ring.grad_kv_fp32", kAct, 2 * block);
  workspace_bytes_ = 0;
  for (int kv_seq : {layout_.kv.chunk_tokens, 2 * layout_.kv.chunk_tokens})
    for (bool causal : {true, false})
      workspace_bytes_ = std::max(workspace_bytes_,
                                  kernels::flash_attention_backward_workspace_bytes(call_shape({0, kv_seq, causal})));
  r.shared(workspace_, "workspace.attention", MemoryCategory::kOther, workspace_bytes_);
}

tensor_parallel::Collectives& ContextParallelRingAttentionCore::group() const {
  return context_parallel_group(context_, layout_.kv.cp, "ContextParallelRingAttentionCore");
}

int ContextParallelRingAttentionCore::calls_of_step(int step, Call calls[2]) const {
  const int n = layout_.kv.cp, r = rank(), c = layout_.kv.chunk_tokens;
  const int source = (r - step + n) % n;
  if (source == r) {  // the rank's own keys: causal, bottom-right aligned
    calls[0] = {0, c, true};
    calls[1] = {1, 2 * c, true};
    return 2;
  }
  if (source < r) {  // k_s0 lies wholly before both query chunks, k_s1 wholly after
    calls[0] = {0, c, false};
    calls[1] = {1, c, false};
    return 2;
  }
  calls[0] = {1, 2 * c, false};  // source > r: only q1 sees them, both chunks wholly
  return 1;
}

template <typename F>
void ContextParallelRingAttentionCore::for_each_call(int step, F&& f) const {
  Call calls[2];
  const int count = calls_of_step(step, calls);
  for (int b = 0; b < layout_.kv.batch; ++b)
    for (int i = 0; i < count; ++i) f(b, calls[i], layout_.chunk_row(b, calls[i].chunk));
}

kernels::FlashAttentionShape ContextParallelRingAttentionCore::call_shape(const Call& call) const {
  kernels::FlashAttentionShape a = layout_.local;
  a.batch = 1;  // a sequence's chunk rows are not evenly spaced across the micro-batch
  a.seq = layout_.kv.chunk_tokens;
  a.kv_seq = call.kv_seq;
  a.kv_row_stride = 0;  // the [K | V] block (and the partial dK, dV) are contiguous
  a.causal = call.causal;
  return a;
}

kernels::Bf16* ContextParallelRingAttentionCore::held_block(int step) const {
  return kv_ + to_size(step % 2) * layout_.kv.block_elements();
}

float* ContextParallelRingAttentionCore::grad_accumulator(int step) const {
  return grad_kv_ + to_size(step % 2) * layout_.kv.block_elements();
}

kernels::Bf16* ContextParallelRingAttentionCore::partial_grad(bool value, int b, int j) const {
  const std::size_t c = to_size(layout_.kv.chunk_tokens);
  const std::size_t per_sequence = 3 * c * layout_.kv_width;
  return partial_kv_ + (value ? to_size(layout_.kv.batch) * per_sequence : 0) + to_size(b) * per_sequence +
         to_size(j) * c * layout_.kv_width;
}

void ContextParallelRingAttentionCore::make_pending() {
  if (!kv_arrival_) kv_arrival_ = std::make_unique<tensor_parallel::PendingCollective>();
  if (!grad_kv_arrival_) grad_kv_arrival_ = std::make_unique<tensor_parallel::PendingCollective>();
}

void ContextParallelRingAttentionCore::start_exchange(const void* send, void* receive, comm::DataType type,
                                                      tensor_parallel::PendingCollective& done) {
  const int n = layout_.kv.cp, r = rank();
  const std::size_t count = layout_.kv.block_elements();  // a [K | V] block, or its gradient
  group().start(
      [&](comm::Communicator& g) { g.send_recv(send, count, (r + 1) % n, receive, count, (r - 1 + n) % n, type); },
      done);
}

void ContextParallelRingAttentionCore::start_kv_exchange(int step) {
  start_exchange(held_block(step), held_block(step + 1), comm::DataType::kBf16, *kv_arrival_);
}

void ContextParallelRingAttentionCore::start_grad_exchange(int step) {
  start_exchange(grad_accumulator(step), grad_accumulator(step + 1), comm::DataType::kFp32, *grad_kv_arrival_);
}

void ContextParallelRingAttentionCore::start_ring(const kernels::Bf16* k, const kernels::Bf16* v) {
  make_pending();
  layout_.pack_kv(held_block(0), k, v, context_.stream());
}

std::size_t ContextParallelRingAttentionCore::sequence_kv(int b) const {
  return to_size(b) * to_size(layout_.kv.local_tokens()) * layout_.kv_width;
}

kernels::RowBlock ContextParallelRingAttentionCore::local_q_rows() const {
  kernels::RowBlock rows;
  rows.rows = static_cast<long long>(layout_.kv.batch) * layout_.kv.local_tokens();
  rows.width = static_cast<int>(layout_.q_width);
  return rows;
}

void ContextParallelRingAttentionCore::forward(kernels::Bf16* out, float* lse, const kernels::Bf16* q,
                                               const kernels::Bf16* k, const kernels::Bf16* v) {
  const cudaStream_t stream = context_.stream();
  start_ring(k, v);
  const int n = layout_.kv.cp;
  const std::size_t half = layout_.kv.block_elements() / 2;  // E: a block's K, then its V
  kernels::AttentionMergeShape merge;
  merge.rows = layout_.kv.chunk_tokens;
  merge.heads = layout_.local.heads;
  merge.head_dim = layout_.local.head_dim;
  for (int step = 0; step < n; ++step) {
    if (step + 1 < n) start_kv_exchange(step);  // the next block travels while this one is attended
    const kernels::Bf16* held = held_block(step);
    for_each_call(step, [&](int b, const Call& call, std::size_t row) {
      kernels::flash_attention_forward(partial_q_, partial_lse_, q + row * layout_.q_row_stride,
                                       held + sequence_kv(b), held + half + sequence_kv(b), call_shape(call), stream);
      // Step 0 attends both chunks (the rank's own keys): every chunk's first contribution.
      kernels::merge_attention_partial(q_fp32_ + row * layout_.q_width,
                                       lse + to_size(2 * b + call.chunk) * layout_.lse_chunk(), partial_q_,
                                       partial_lse_, merge, step == 0, stream);
    });
    if (step + 1 < n) kv_arrival_->wait(stream);
  }
  kernels::store_bf16_rows(out, q_fp32_, local_q_rows(), stream);
}

void ContextParallelRingAttentionCore::backward(kernels::Bf16* dq, kernels::Bf16* dk, kernels::Bf16* dv,
                                                const kernels::Bf16* dout, const kernels::Bf16* q,
                                                const kernels::Bf16* k, const kernels::Bf16* v,
                                                const kernels::Bf16* out, const float* lse) {
  const cudaStream_t stream = context_.stream();
  start_ring(k, v);
  const int n = layout_.kv.cp;
  const std::size_t half = layout_.kv.block_elements() / 2;
  kernels::RowBlock dq_rows;  // one call's dQ (rows q_row_stride apart) into the fp32 dQ
  dq_rows.rows = layout_.kv.chunk_tokens;
  dq_rows.width = static_cast<int>(layout_.q_width);
  dq_rows.src_row_stride = static_cast<long long>(layout_.q_row_stride);
  for (int step = 0; step < n; ++step) {
    if (step + 1 < n) start_kv_exchange(step);
    const kernels::Bf16* held = held_block(step);
    for_each_call(step, [&](int b, const Call& call, std::size_t row) {
      kernels::flash_attention_backward(
          partial_q_, partial_grad(false, b, call.chunk), partial_grad(true, b, call.chunk),
          dout + row * layout_.q_width, q + row * layout_.q_row_stride, held + sequence_kv(b),
          held + half + sequence_kv(b), out + row * layout_.q_width,
          lse + to_size(2 * b + call.chunk) * layout_.lse_chunk(), call_shape(call), workspace_, workspace_bytes_,
          stream);
      kernels::accumulate_bf16_rows(q_fp32_ + row * layout_.q_width, partial_q_, dq_rows, step == 0, stream);
    });
    // The accumulator of this step's source, with the shares of the ranks
    // that held it before (from rank − 1), then this rank's share.
    if (step > 0) grad_kv_arrival_->wait(stream);
    float* accumulator = grad_accumulator(step);
    Call calls[2];
    const int count = calls_of_step(step, calls);
    for (int b = 0; b < layout_.kv.batch; ++b)
      // Last call first: at step 0 it is q1's, over all 2c keys, and starts
      // the accumulator (overwrite); q0's c keys are then added.
      for (int i = count - 1; i >= 0; --i) {
        const Call& call = calls[i];
        kernels::RowBlock keys;
        keys.rows = call.kv_seq;
        keys.width = static_cast<int>(layout_.kv_width);
        const bool overwrite = step == 0 && i == count - 1;
        kernels::accumulate_bf16_rows(accumulator + sequence_kv(b), partial_grad(false, b, call.chunk), keys,
                                      overwrite, stream);
        kernels::accumulate_bf16_rows(accumulator + half + sequence_kv(b), partial_grad(true, b, call.chunk), keys,
                                      overwrite, stream);
      }
    // On to rank + 1; after step cp − 1 this is the hop home (rank − 1 sends
    // this rank's own keys' accumulator, summed over every rank).
    start_grad_exchange(step);
    if (step + 1 < n) kv_arrival_->wait(stream);
  }
  kernels::RowBlock q_rows = local_q_rows();
  q_rows.dst_row_stride = static_cast<long long>(layout_.q_row_stride);
  kernels::store_bf16_rows(dq, q_fp32_, q_rows, stream);  // overlaps the hop home
  grad_kv_arrival_->wait(stream);
  kernels::store_local_kv_gradients(dk, dv, static_cast<int>(layout_.kv_row_stride), grad_accumulator(n), layout_.kv,
                                    stream);
}

}  // namespace sextant::engine::transformer
