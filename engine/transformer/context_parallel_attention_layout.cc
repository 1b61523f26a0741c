#include "engine/transformer/context_parallel_attention_layout.h"

#include <stdexcept>
#include <string>

#include "engine/model/context_parallel_chunks.h"
#include "engine/transformer/flash_attention_core.h"
#include "kernels/head_copy.h"

namespace sextant::engine::transformer {
namespace {

int local_chunk_tokens(const TransformerShape& s, const char* core) {
  if (s.cp < 2)
    throw std::invalid_argument(std::string(core) + ": cp (" + std::to_string(s.cp) +
                                ") must be at least 2 (one rank runs FlashAttentionCore)");
  // The split's own check: the sequence, cp·seq tokens, a positive multiple of 2·cp.
  return ContextParallelChunks(s.cp * s.seq, s.cp, 0).chunk_tokens();
}

}  // namespace

ContextParallelAttentionLayout::ContextParallelAttentionLayout(const TransformerShape& s, const char* core)
    : local(flash_attention_shape(s)) {
  kv.batch = s.micro_batch;
  kv.cp = s.cp;
  kv.chunk_tokens = local_chunk_tokens(s, core);
  kv.width = s.kv_heads * s.attention_head_dim();
  q_width = to_size(s.heads) * to_size(s.attention_head_dim());
  kv_width = to_size(kv.width);
  q_row_stride = local.q_row_stride != 0 ? to_size(local.q_row_stride) : q_width;
  kv_row_stride = local.kv_row_stride != 0 ? to_size(local.kv_row_stride) : kv_width;
}

void ContextParallelAttentionLayout::pack_kv(kernels::Bf16* block, const kernels::Bf16* k, const kernels::Bf16* v,
                                             cudaStream_t stream) const {
  kernels::HeadCopy pack{};
  pack.tokens = static_cast<long long>(kv.batch) * kv.local_tokens();
  pack.heads = 1;  // a token's kv_heads heads are adjacent in the source rows as in the block
  pack.src_row = static_cast<int>(kv_row_stride);
  pack.src_head = pack.dst_row = pack.dst_head = pack.copy_width = pack.dst_width = kv.width;
  kernels::copy_heads(block, k, pack, stream);
  kernels::copy_heads(block + kv.block_elements() / 2, v, pack, stream);
}

tensor_parallel::Collectives& context_parallel_group(const ModelContext& context, int cp, const char* core) {
  tensor_parallel::Collectives* group = context.cp();
  if (group == nullptr || group->size() != cp)
    throw std::logic_error(std::string(core) + ": the shape has cp = " + std::to_string(cp) +
                           " but the model context's cp group has " +
                           std::to_string(group == nullptr ? 1 : group->size()) +
                           " rank(s) (ModelContext::bind's context_parallel)");
  return *group;
}

}  // namespace sextant::engine::transformer
