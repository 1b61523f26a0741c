#include "engine/transformer/context_parallel_attention_core.h"

#include <algorithm>

#include "engine/comm/communicator.h"

namespace sextant::engine::transformer {
namespace {

constexpr auto kAct = MemoryCategory::kActivations;

}  // namespace

ContextParallelAttentionCore::ContextParallelAttentionCore(ModelContext& context)
    : context_(context), layout_(context.shape(), "ContextParallelAttentionCore") {
  const TransformerShape& s = context.shape();
  for (int r = 0; r < s.cp; ++r) {
    const ContextParallelChunks c(layout_.kv.sequence_tokens(), s.cp, r);
    for (int j = 0; j < 2; ++j) max_visible_keys_[j] = std::max(max_visible_keys_[j], c.visible_keys(j));
  }
}

void ContextParallelAttentionCore::reserve(BufferReserver& r) {
  const std::size_t sequence = layout_.kv.sequence_elements();
  r.shared(gathered_, "cp.kv_gathered", kAct, to_size(layout_.kv.cp) * layout_.kv.block_elements());
  r.shared(k_full_, "cp.k_sequence", kAct, sequence);
  r.shared(v_full_, "cp.v_sequence", kAct, sequence);
  const std::size_t batch_width = to_size(layout_.kv.batch) * layout_.kv_width;
  r.shared(dk_chunk_[0], "cp.grad.k_chunk0", kAct, batch_width * to_size(max_visible_keys_[0]));
  r.shared(dk_chunk_[1], "cp.grad.k_chunk1", kAct, batch_width * to_size(max_visible_keys_[1]));
  r.shared(dv_chunk_[0], "cp.grad.v_chunk0", kAct, batch_width * to_size(max_visible_keys_[0]));
  r.shared(dv_chunk_[1], "cp.grad.v_chunk1", kAct, batch_width * to_size(max_visible_keys_[1]));
  r.shared(rank_major_, "cp.grad.kv_rank_major", kAct, to_size(layout_.kv.cp) * layout_.kv.block_elements());
  // The largest of every rank's chunk calls (the key count differs by rank and chunk).
  workspace_bytes_ = 0;
  for (int rank = 0; rank < layout_.kv.cp; ++rank) {
    const ContextParallelChunks c(layout_.kv.sequence_tokens(), layout_.kv.cp, rank);
    for (int j = 0; j < 2; ++j)
      workspace_bytes_ =
          std::max(workspace_bytes_, kernels::flash_attention_backward_workspace_bytes(chunk_shape(c.visible_keys(j))));
  }
  r.shared(workspace_, "workspace.attention", MemoryCategory::kOther, workspace_bytes_);
}

tensor_parallel::Collectives& ContextParallelAttentionCore::group() const {
  return context_parallel_group(context_, layout_.kv.cp, "ContextParallelAttentionCore");
}

ContextParallelChunks ContextParallelAttentionCore::chunks() const {
  return ContextParallelChunks(layout_.kv.sequence_tokens(), layout_.kv.cp, group().rank());
}

kernels::FlashAttentionShape ContextParallelAttentionCore::chunk_shape(int visible_keys) const {
  kernels::FlashAttentionShape a = layout_.local;
  a.batch = 1;  // a sequence's chunk rows are not evenly spaced across the micro-batch
  a.seq = layout_.kv.chunk_tokens;
  a.kv_seq = visible_keys;
  a.kv_row_stride = 0;  // the gathered K, V (and the chunk's dK, dV) are contiguous
  return a;
}

void ContextParallelAttentionCore::gather_kv(const ContextParallelChunks& chunks, const kernels::Bf16* k,
                                             const kernels::Bf16* v) {
  const cudaStream_t stream = context_.stream();
  const std::size_t block = layout_.kv.block_elements();
  kernels::Bf16* own = gathered_ + to_size(chunks.rank()) * block;  // [K | V] of this rank's tokens
  layout_.pack_kv(own, k, v, stream);
  // In place: block r of `gathered_` is rank r's send buffer (NCCL allows recv == send - rank·count).
  group().all_gather(own, gathered_, block);
  kernels::gather_sequence_kv(k_full_, v_full_, gathered_, layout_.kv, stream);
}

void ContextParallelAttentionCore::forward(kernels::Bf16* out, float* lse, const kernels::Bf16* q,
                                           const kernels::Bf16* k, const kernels::Bf16* v) {
  const ContextParallelChunks c = chunks();
  gather_kv(c, k, v);
  const std::size_t sequence = to_size(layout_.kv.sequence_tokens()) * layout_.kv_width;  // one sequence's K
  const std::size_t lse_chunk = layout_.lse_chunk();
  for (int b = 0; b < layout_.kv.batch; ++b)
    for (int j = 0; j < 2; ++j) {
      const std::size_t row = layout_.chunk_row(b, j);
      kernels::flash_attention_forward(out + row * layout_.q_width, lse + (to_size(2 * b + j)) * lse_chunk,
                                       q + row * layout_.q_row_stride, k_full_ + to_size(b) * sequence,
                                       v_full_ + to_size(b) * sequence, chunk_shape(c.visible_keys(j)),
                                       context_.stream());
    }
}

void ContextParallelAttentionCore::backward(kernels::Bf16* dq, kernels::Bf16* dk, kernels::Bf16* dv,
                                            const kernels::Bf16* dout, const kernels::Bf16* q,
                                            const kernels::Bf16* k, const kernels::Bf16* v,
                                            const kernels::Bf16* out, const float* lse) {
  const cudaStream_t stream = context_.stream();
  const ContextParallelChunks c = chunks();
  gather_kv(c, k, v);
  const std::size_t sequence = to_size(layout_.kv.sequence_tokens()) * layout_.kv_width;
  const std::size_t lse_chunk = layout_.lse_chunk();
  kernels::ChunkKvGradients chunk_gradients;
  for (int j = 0; j < 2; ++j) {
    chunk_gradients.dk[j] = dk_chunk_[j];
    chunk_gradients.dv[j] = dv_chunk_[j];
    chunk_gradients.visible_tokens[j] = c.visible_keys(j);
  }
  for (int b = 0; b < layout_.kv.batch; ++b)
    for (int j = 0; j < 2; ++j) {
      const std::size_t row = layout_.chunk_row(b, j);
      const std::size_t chunk_keys = to_size(c.visible_keys(j)) * layout_.kv_width;  // one sequence's dK of chunk j
      kernels::flash_attention_backward(
          dq + row * layout_.q_row_stride, dk_chunk_[j] + to_size(b) * chunk_keys, dv_chunk_[j] + to_size(b) * chunk_keys,
          dout + row * layout_.q_width, q + row * layout_.q_row_stride, k_full_ + to_size(b) * sequence,
          v_full_ + to_size(b) * sequence, out + row * layout_.q_width, lse + to_size(2 * b + j) * lse_chunk,
          chunk_shape(c.visible_keys(j)), workspace_, workspace_bytes_, stream);
    }
  // Every rank's share of this rank's dK, dV, rank-major; the reduce-scatter
  // sums them (fp32) into this rank's block, in place.
  kernels::sum_chunk_kv_gradients(rank_major_, chunk_gradients, layout_.kv, stream);
  const std::size_t block = layout_.kv.block_elements();
  float* own = rank_major_ + to_size(c.rank()) * block;
  group().run([&](comm::Communicator& g) {
    g.reduce_scatter_sum(rank_major_, own, block, comm::DataType::kFp32);
  });
  kernels::store_local_kv_gradients(dk, dv, static_cast<int>(layout_.kv_row_stride), own, layout_.kv, stream);
}

}  // namespace sextant::engine::transformer
