#include "sim/memory/engine_arena.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#include "sim/core/transformer_shape.h"
#include "sim/memory/context_parallel_buffers.h"

namespace sextant::sim {

namespace {

constexpr double kBf16 = 2, kFp32 = 4, kInt32 = 4;

// ArenaPlan::kAlignBytes: every block starts 256-byte aligned (engine/model/arena_plan.h).
double aligned(double bytes) { return std::ceil(bytes / 256.0) * 256.0; }

// What a stage asks of the arena, as BufferReserver does: own() blocks of one
// owner (summed), shared() blocks once by name (the largest ask).
class ArenaTally {
 public:
  void own(double bytes) { own_ += aligned(bytes); }
  void shared(const std::string& name, double bytes) {
    double& b = shared_[name];
    b = std::max(b, aligned(bytes));
  }
  double own_bytes() const { return own_; }
  double shared_bytes() const {
    double sum = 0;
    for (const auto& [name, bytes] : shared_) sum += bytes;
    return sum;
  }
  void clear_own() { own_ = 0; }

 private:
  double own_ = 0;
  std::map<std::string, double> shared_;
};

// kernels/column_partials.h column_partials_bytes: one fp32 partial per 64 rows and column.
double column_partials_bytes(double rows, double cols) { return std::ceil(rows / 64.0) * cols * kFp32; }

// kernels/flash_attention_backward.cu flash_attention_backward_workspace_bytes for
// the one-GPU core's call (batch, seq, heads of attention_head_dim): the generic
// kernel's fp32 dQ accumulator and delta rows; at head_dim 128 the Hopper
// kernel's dQ accumulator, delta and LSE over rows padded to 128-key blocks
// (flash_attention_backward_sm90_workspace_bytes), whichever is larger; below
// 128 with grouped-query attention, K, V, dK and dV expanded to every query head.
double flash_backward_workspace_bytes(const TransformerShape& s) {
  const double b = s.micro_batch, seq = s.seq, heads = s.heads, d = s.attention_head_dim();
  const double generic = (b * seq * heads * d + b * heads * seq) * kFp32;
  if (d == 128) {
    const double padded_seq = std::ceil(seq / 128.0) * 128.0;
    return std::max(generic, b * heads * padded_seq * (d + 2) * kFp32);
  }
  if (s.kv_heads < s.heads) return aligned(generic) + 4 * b * seq * heads * d * kBf16;
  return generic;
}

// kernels/embedding.cu embedding_backward_workspace_bytes: three int32 arrays
// of the tokens and CUB's radix sort (keys and values double-buffered: see the header).
double embedding_backward_workspace_bytes(double tokens) {
  return 3 * aligned(tokens * kInt32) + aligned(2 * tokens * (kInt32 + kInt32));
}

// One Transformer's own blocks (one chunk's layers, one slot), in the order
// Transformer::Transformer asks them (engine/transformer.cc).
void reserve_stored(const TransformerShape& s, Recompute recompute, const ChunkLayers& chunk, ArenaTally& r) {
  const double T = static_cast<double>(s.tokens()), Ts = static_cast<double>(s.norm_tokens()), h = s.hidden;
  const double ahd = s.attention_head_dim();
  // Norm::reserve_activations: the output (out_rows x h, bf16), mean and rstd (fp32, the stream's rows).
  auto norm = [&](double out_rows) {
    r.own(out_rows * h * kBf16);
    r.own(Ts * kFp32);
    r.own(Ts * kFp32);
  };
  r.own(Ts * h * kBf16);  // grad.residual
  const bool full = recompute == Recompute::kFull;
  for (int i = 0; i < chunk.num_layers; ++i) {
    r.own(Ts * h * kBf16);  // layers.i.input
    if (full && i > 0) continue;  // full recomputation: one set, layer 0's, serves every layer
    norm(Ts);                     // norm1 (ResidualBlock::reserve_layer)
    // SelfAttention::reserve_stored: Q, K, V (padded arrays, or the fused QKV rows), the core's output, LSE.
    if (s.attention_padded()) {
      r.own(T * s.heads * ahd * kBf16);
      r.own(T * s.kv_heads * ahd * kBf16);
      r.own(T * s.kv_heads * ahd * kBf16);
    } else {
      r.own(T * s.qkv_width() * kBf16);
    }
    r.own(T * s.heads * ahd * kBf16);  // attn
    r.own(T * s.heads * kFp32);        // lse
    r.own(Ts * h * kBf16);             // layers.i.mid
    norm(Ts);                          // norm2
    r.own(T * s.fc1_width() * kBf16);  // Mlp::reserve_stored: fc1_out
    r.own(T * s.ffn_hidden * kBf16);   // act
  }
  r.own(Ts * h * kBf16);  // final_norm.input
  if (chunk.loss) {
    norm(T);                       // OutputLayer::reserve_stored: final_norm, kept all-gathered (T rows)
    r.own(T * s.vocab * kBf16);    // logits, bf16; the cross entropy writes their gradient in place
  }
}

// The pass buffers and workspaces every Transformer of the stage shares
// (BufferReserver::shared, engine/transformer.cc), split by category.
void reserve_shared(const ModelConfig& m, const ParallelLayout& l, const TransformerShape& s, bool embedding,
                    bool loss, double microbatches, ArenaTally& act, ArenaTally& other) {
  const double T = static_cast<double>(s.tokens()), Ts = static_cast<double>(s.norm_tokens()), h = s.hidden;
  const double ahd = s.attention_head_dim();
  act.shared("scratch", T * h * kBf16);
  if (s.sequence_parallel) {  // Transformer::reserve_sequence_parallel
    act.shared("sp.gathered_norm", T * h * kBf16);
    act.shared("sp.final_norm_shard", Ts * h * kBf16);
    act.shared("sp.grad.residual_gathered", T * h * kBf16);
    act.shared("sp.scratch_shard", Ts * h * kBf16);
    if (s.tp_comm_overlap) act.shared("sp.overlap_staging", T * h * kBf16);
  }
  if (s.tp > 1) {  // OutputLayer::reserve_cross_entropy (fp32)
    act.shared("ce.row_max_local", T * kFp32);
    act.shared("ce.row_max_gathered", T * s.tp * kFp32);
    act.shared("ce.row_max", T * kFp32);
    act.shared("ce.partials", 2 * T * kFp32);
  }
  // SelfAttention::reserve_pass.
  act.shared("grad.attn", T * s.q_width() * kBf16);
  act.shared("qkv (fused, and its gradient)", T * s.qkv_width() * kBf16);
  if (s.attention_padded()) {
    act.shared("grad.q", T * s.heads * ahd * kBf16);
    act.shared("grad.k", T * s.kv_heads * ahd * kBf16);
    act.shared("grad.v", T * s.kv_heads * ahd * kBf16);
    act.shared("attn (unpadded)", T * s.q_width() * kBf16);
    act.shared("grad.attn (padded)", T * s.heads * ahd * kBf16);
  }
  // Mlp::reserve_pass.
  act.shared("grad.act", T * s.ffn_hidden * kBf16);
  if (!s.gelu) act.shared("grad.fc1_out", T * s.fc1_width() * kBf16);
  // The step's tokens (Embedding::reserve_tokens), targets and losses (OutputLayer::reserve_targets).
  if (embedding) other.shared("tokens", T * microbatches * kInt32);
  if (loss) {
    other.shared("targets", T * microbatches * kInt32);
    other.shared("losses", T * microbatches * kFp32);
  }
  // Norm::reserve_workspace: LayerNorm's three column partials (dgamma, dbeta,
  // the summed bias), RMSNorm's two, over all T rows.
  other.shared("workspace.norm", (s.layernorm ? 3 : 2) * column_partials_bytes(T, h));
  // ModelContext::reserve_bias_workspace: the widest bias.
  other.shared("workspace.bias_gradient",
               column_partials_bytes(T, std::max({s.qkv_width(), s.fc1_width(), s.hidden})));
  if (embedding) {  // Embedding::reserve_workspace (the sharded one first takes the shard's rows)
    other.shared("workspace.embedding",
                 s.tp > 1 ? aligned(T * kInt32) + embedding_backward_workspace_bytes(T)
                          : embedding_backward_workspace_bytes(T));
  }
  // The attention core's (AttentionCore::reserve): the cp cores' buffers, or the one-GPU core's workspace.
  if (s.cp > 1) {
    const ContextParallelCoreBytes cp = context_parallel_core_parts(m, l, Software::kSextantEngine);
    act.shared("cp core", cp.buffers);
    other.shared("workspace.attention", cp.workspace);
  } else {
    other.shared("workspace.attention", flash_backward_workspace_bytes(s));
  }
  other.shared("workspace.cublaslt", 32.0 * 1024 * 1024);  // kernels/gemm_cublaslt.h kCublasLtWorkspaceBytes
}

}  // namespace

bool engine_arena_modelled(const ModelConfig& model) { return !model.moe.has_value(); }

int engine_activation_slots(const ParallelLayout& l, int stage) {
  const long long m = l.num_microbatches();
  const int p = l.pp;
  long long slots = 0;
  switch (l.schedule) {
    case Schedule::kGpipe:
      slots = m;
      break;
    case Schedule::kInterleaved:
      // Megatron's warm-up of (pp − s − 1)·2 + (vpp − 1)·pp chunk-forwards plus
      // the steady state's one (stage_program.h), at most every chunk-micro-batch.
      slots = std::min<long long>(2LL * (p - stage - 1) + 1LL * (l.vpp - 1) * p + 1, m * l.vpp);
      break;
    case Schedule::kOneFOneB:
    case Schedule::kZeroBubbleH1:
      slots = std::min<long long>(p - stage, m);  // Narayanan et al. 2021, Sec. 2.2.1
      break;
  }
  return static_cast<int>(std::max<long long>(1, slots));
}

EngineArenaBytes engine_stage_arena_bytes(const ModelConfig& m, const ParallelLayout& l, const PipelineSplit& split,
                                          int stage) {
  const TransformerShape s = transformer_shape_of(m, l);
  const double T = static_cast<double>(s.tokens());
  const double microbatches = static_cast<double>(l.num_microbatches());
  ArenaTally act, other;
  // Trainer::plan_memory: each activation slot an overlay as large as its
  // largest chunk's own blocks (one chunk in one slot: no overlay, the same size).
  double largest_chunk = 0;
  bool embedding = false, loss = false;
  for (int c = 0; c < l.vpp; ++c) {
    const ChunkLayers& chunk = split.chunk(stage, c);
    act.clear_own();
    reserve_stored(s, l.recompute, chunk, act);
    largest_chunk = std::max(largest_chunk, act.own_bytes());
    embedding = embedding || chunk.embedding;
    loss = loss || chunk.loss;
  }
  reserve_shared(m, l, s, embedding, loss, microbatches, act, other);
  EngineArenaBytes out;
  out.activations = engine_activation_slots(l, stage) * largest_chunk + act.shared_bytes();
  out.other = other.shared_bytes();
  // Trainer::plan_memory and plan_optimizer_buffers (engine/trainer_arrays.cc): the
  // per-token losses under pp, the dp x cp group's gathered losses, the
  // gradient norm's scalars (its workspace, a few KiB, is not counted).
  if (l.pp > 1) other.own(microbatches * T * kFp32);
  if (static_cast<long long>(l.dp) * l.cp > 1) other.own(static_cast<double>(l.gbs) * m.seq_length * kFp32);
  other.own(4 * kFp32);
  out.other += other.own_bytes();
  return out;
}

}  // namespace sextant::sim
