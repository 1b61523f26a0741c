#include "engine/transformer/context_parallel_attention_core.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "engine/comm/communicator.h"
#include "engine/transformer/flash_attention_core.h"
#include "kernels/head_copy.h"

namespace sextant::engine::transformer {
namespace {

constexpr auto kAct = MemoryCategory::kActivations;

int local_chunk_tokens(const TransformerShape& s) {
  if (s.cp < 2)
    throw std::invalid_argument("ContextParallelAttentionCore: cp (" + std::to_string(s.cp) +
                                ") must be at least 2 (one rank runs FlashAttentionCore)");
  // The split's own check: the sequence, cp·seq tokens, a positive multiple of 2·cp.
  return ContextParallelChunks(s.cp * s.seq, s.cp, 0).chunk_tokens();
}

}  // namespace

ContextParallelAttentionCore::ContextParallelAttentionCore(ModelContext& context)
    : context_(context), local_shape_(flash_attention_shape(context.shape())) {
  const TransformerShape& s = context.shape();
  kv_shape_.batch = s.micro_batch;
  kv_shape_.cp = s.cp;
  kv_shape_.chunk_tokens = local_chunk_tokens(s);
  kv_shape_.width = s.kv_heads * s.attention_head_dim();
  q_width_ = to_size(s.heads) * to_size(s.attention_head_dim());
  kv_width_ = to_size(kv_shape_.width);
  q_row_stride_ = local_shape_.q_row_stride != 0 ? to_size(local_shape_.q_row_stride) : q_width_;
  kv_row_stride_ = local_shape_.kv_row_stride != 0 ? to_size(local_shape_.kv_row_stride) : kv_width_;
  for (int r = 0; r < s.cp; ++r) {
    const ContextParallelChunks c(kv_shape_.sequence_tokens(), s.cp, r);
    for (int j = 0; j < 2; ++j) max_visible_keys_[j] = std::max(max_visible_keys_[j], c.visible_keys(j));
  }
}

void ContextParallelAttentionCore::reserve(BufferReserver& r) {
  const std::size_t sequence = kv_shape_.sequence_elements();
  r.shared(gathered_, "cp.kv_gathered", kAct, to_size(kv_shape_.cp) * kv_shape_.block_elements());
  r.shared(k_full_, "cp.k_sequence", kAct, sequence);
  r.shared(v_full_, "cp.v_sequence", kAct, sequence);
  const std::size_t batch_width = to_size(kv_shape_.batch) * kv_width_;
  r.shared(dk_chunk_[0], "cp.grad.k_chunk0", kAct, batch_width * to_size(max_visible_keys_[0]));
  r.shared(dk_chunk_[1], "cp.grad.k_chunk1", kAct, batch_width * to_size(max_visible_keys_[1]));
  r.shared(dv_chunk_[0], "cp.grad.v_chunk0", kAct, batch_width * to_size(max_visible_keys_[0]));
  r.shared(dv_chunk_[1], "cp.grad.v_chunk1", kAct, batch_width * to_size(max_visible_keys_[1]));
  r.shared(rank_major_, "cp.grad.kv_rank_major", kAct, to_size(kv_shape_.cp) * kv_shape_.block_elements());
  // The largest of every rank's chunk calls (the key count differs by rank and chunk).
  workspace_bytes_ = 0;
  for (int rank = 0; rank < kv_shape_.cp; ++rank) {
    const ContextParallelChunks c(kv_shape_.sequence_tokens(), kv_shape_.cp, rank);
    for (int j = 0; j < 2; ++j)
      workspace_bytes_ =
          std::max(workspace_bytes_, kernels::flash_attention_backward_workspace_bytes(chunk_shape(c.visible_keys(j))));
  }
  r.shared(workspace_, "workspace.attention", MemoryCategory::kOther, workspace_bytes_);
}

tensor_parallel::Collectives& ContextParallelAttentionCore::group() const {
  tensor_parallel::Collectives* cp = context_.cp();
  if (cp == nullptr || cp->size() != kv_shape_.cp)
    throw std::logic_error("ContextParallelAttentionCore: the shape has cp = " + std::to_string(kv_shape_.cp) +
                           " but the model context's cp group has " +
                           std::to_string(cp == nullptr ? 1 : cp->size()) +
                           " rank(s) (ModelContext::bind's context_parallel)");
  return *cp;
}

ContextParallelChunks ContextParallelAttentionCore::chunks() const {
  return ContextParallelChunks(kv_shape_.sequence_tokens(), kv_shape_.cp, group().rank());
}

kernels::FlashAttentionShape ContextParallelAttentionCore::chunk_shape(int visible_keys) const {
  kernels::FlashAttentionShape a = local_shape_;
  a.batch = 1;  // a sequence's chunk rows are not evenly spaced across the micro-batch
  a.seq = kv_shape_.chunk_tokens;
  a.kv_seq = visible_keys;
  a.kv_row_stride = 0;  // the gathered K, V (and the chunk's dK, dV) are contiguous
  return a;
}

std::size_t ContextParallelAttentionCore::chunk_row(int b, int j) const {
  return to_size(b) * to_size(kv_shape_.local_tokens()) + to_size(j) * to_size(kv_shape_.chunk_tokens);
}

void ContextParallelAttentionCore::gather_kv(const ContextParallelChunks& chunks, const kernels::Bf16* k,
                                             const kernels::Bf16* v) {
  const cudaStream_t stream = context_.stream();
  const std::size_t block = kv_shape_.block_elements();
  kernels::Bf16* own = gathered_ + to_size(chunks.rank()) * block;  // [K | V] of this rank's tokens
  // K and V rows (column slices of the fused QKV rows, or padded arrays) into
  // the rank's block, contiguous.
  kernels::HeadCopy pack{};
  pack.tokens = static_cast<long long>(kv_shape_.batch) * kv_shape_.local_tokens();
  pack.heads = 1;  // a token's kv_heads heads are adjacent in the source rows as in the block
  pack.src_row = static_cast<int>(kv_row_stride_);
  pack.src_head = pack.dst_row = pack.dst_head = pack.copy_width = pack.dst_width = kv_shape_.width;
  kernels::copy_heads(own, k, pack, stream);
  kernels::copy_heads(own + block / 2, v, pack, stream);
  // In place: block r of `gathered_` is rank r's send buffer (NCCL allows recv == send - rank·count).
  group().all_gather(own, gathered_, block);
  kernels::gather_sequence_kv(k_full_, v_full_, gathered_, kv_shape_, stream);
}

void ContextParallelAttentionCore::forward(kernels::Bf16* out, float* lse, const kernels::Bf16* q,
                                           const kernels::Bf16* k, const kernels::Bf16* v) {
  const ContextParallelChunks c = chunks();
  gather_kv(c, k, v);
  const std::size_t sequence = to_size(kv_shape_.sequence_tokens()) * kv_width_;  // one sequence's K
  const std::size_t lse_chunk = to_size(local_shape_.heads) * to_size(kv_shape_.chunk_tokens);
  for (int b = 0; b < kv_shape_.batch; ++b)
    for (int j = 0; j < 2; ++j) {
      const std::size_t row = chunk_row(b, j);
      kernels::flash_attention_forward(out + row * q_width_, lse + (to_size(2 * b + j)) * lse_chunk,
                                       q + row * q_row_stride_, k_full_ + to_size(b) * sequence,
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
  const std::size_t sequence = to_size(kv_shape_.sequence_tokens()) * kv_width_;
  const std::size_t lse_chunk = to_size(local_shape_.heads) * to_size(kv_shape_.chunk_tokens);
  kernels::ChunkKvGradients chunk_gradients;
  for (int j = 0; j < 2; ++j) {
    chunk_gradients.dk[j] = dk_chunk_[j];
    chunk_gradients.dv[j] = dv_chunk_[j];
    chunk_gradients.visible_tokens[j] = c.visible_keys(j);
  }
  for (int b = 0; b < kv_shape_.batch; ++b)
    for (int j = 0; j < 2; ++j) {
      const std::size_t row = chunk_row(b, j);
      const std::size_t chunk_keys = to_size(c.visible_keys(j)) * kv_width_;  // one sequence's dK of chunk j
      kernels::flash_attention_backward(
          dq + row * q_row_stride_, dk_chunk_[j] + to_size(b) * chunk_keys, dv_chunk_[j] + to_size(b) * chunk_keys,
          dout + row * q_width_, q + row * q_row_stride_, k_full_ + to_size(b) * sequence,
          v_full_ + to_size(b) * sequence, out + row * q_width_, lse + to_size(2 * b + j) * lse_chunk,
          chunk_shape(c.visible_keys(j)), workspace_, workspace_bytes_, stream);
    }
  // Every rank's share of this rank's dK, dV, rank-major; the reduce-scatter
  // sums them (fp32) into this rank's block, in place.
  kernels::sum_chunk_kv_gradients(rank_major_, chunk_gradients, kv_shape_, stream);
  const std::size_t block = kv_shape_.block_elements();
  float* own = rank_major_ + to_size(c.rank()) * block;
  group().run([&](comm::Communicator& g) {
    g.reduce_scatter_sum(rank_major_, own, block, comm::DataType::kFp32);
  });
  kernels::store_local_kv_gradients(dk, dv, static_cast<int>(kv_row_stride_), own, kv_shape_, stream);
}

}  // namespace sextant::engine::transformer
