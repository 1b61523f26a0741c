#include "engine/calibration/calibration_shapes.h"

#include <algorithm>
#include <set>
#include <stdexcept>

#include "engine/model/transformer_shape.h"
#include "sim/core/layer_shape.h"

namespace sextant::engine::calibration {

namespace {

constexpr long long kMaxTensorElements = 1LL << 28;  // 512 MiB of bf16: one operand of the grids
// A preset's operand may be larger (Llama 3 8B's LM head at 8 x 8192 tokens: 8.4e9 logits,
// which the engine cannot hold either); beyond 4 GiB of bf16 it is left out.
constexpr long long kMaxPresetTensorElements = 1LL << 31;

// The attention grid (attention_shapes): sequences 512 .. kMaxAttentionGridSeq,
// batch·seq = kAttentionGridTokens (batch 1 beyond), group sizes heads / kv_heads.
constexpr int kMaxAttentionGridSeq = 32768;
constexpr int kAttentionGridTokens = 16384;
constexpr int kAttentionGridGroups[] = {1, 4, 8};  // 1: multi-head attention

template <typename T>
std::vector<T> sorted(const std::set<T>& s) {
  return {s.begin(), s.end()};
}

std::vector<int> micro_batches(const ShapeOptions& o) {
  if (o.quick) return {1, 2, 4, 8};
  return {1, 2, 3, 4, 5, 6, 7, 8};
}

// The experts' rows measured (expert_linear_shapes): 16 .. 16384, each power of
// two and 1.5x it (quick: the powers of four), multiples of 8 as the engine pads
// each expert's block (kernels/moe_routing_map.h).
constexpr long long kMinExpertRows = 16, kMaxExpertRows = 16384;

// One MoE model's expert products as one GPU with every expert runs them
// one cuBLASLt product per expert (kernels/moe_grouped_gemm.h, the loop
// backend): fc1 (rows, h) -> (rows, fc1 width) and fc2 (rows, f) -> (rows, h),
// at the rows grid and at each micro-batch's mean rows per expert (mbs·seq·k / E,
// rounded up to 8). Each expert's rows are a few hundred to a few thousand,
// below the tokens of the layer shapes (mbs·seq): without these the simulator
// extrapolated those products from the 2048-token point of the same widths,
// at its rate (the expert products of moe-mixtral-tiny at mbs 1, 512 rows per
// expert, ran 32 % slower than predicted: reports/measurements/2026-12-07-h100-recalibration-moe-host-calls).
void insert_expert_linear_shapes(std::set<LinearShape>& shapes, const sim::ModelConfig& model,
                                 const ShapeOptions& o) {
  const TransformerShape s = transformer_shape_of(model, 1, static_cast<int>(model.seq_length));
  if (s.experts <= 0 || s.router_topk <= 0 || s.expert_ffn_hidden <= 0) return;
  std::set<long long> rows;
  for (long long r = kMinExpertRows; r <= kMaxExpertRows; r *= (o.quick ? 4 : 2)) {
    rows.insert(r);
    if (!o.quick && r * 3 / 2 <= kMaxExpertRows) rows.insert(r * 3 / 2);
  }
  for (const int mbs : micro_batches(o)) {
    const long long pairs = static_cast<long long>(mbs) * s.seq * s.router_topk;
    rows.insert((pairs / s.experts + 7) / 8 * 8);
  }
  for (const long long r : rows) {
    shapes.insert({r, s.hidden, s.expert_fc1_width()});
    shapes.insert({r, s.expert_ffn_hidden, s.hidden});
  }
}

}  // namespace

const std::vector<std::string>& elementwise_kernel_names() {
  static const std::vector<std::string> names = {
      "layernorm_forward", "layernorm_backward", "rmsnorm_forward", "rmsnorm_backward",
      "gelu_forward",      "swiglu_forward",     "swiglu_backward", "rope_forward",
      "rope_backward",     "embedding_forward",  "embedding_backward", "cross_entropy",
      "bias_gradient",     "residual_add",       "adamw",           "grad_norm"};
  return names;
}

std::vector<LinearShape> linear_shapes(const std::vector<sim::ModelConfig>& models, const ShapeOptions& o) {
  std::set<LinearShape> shapes;
  for (const sim::ModelConfig& model : models) {
    const int seq = static_cast<int>(model.seq_length);
    const TransformerShape s = transformer_shape_of(model, 1, seq);
    for (const int tp : kTensorParallelSizes) {
      // Column-parallel layers split their output, row-parallel ones their input.
      auto split = [&](long long width) { return width % (8LL * tp) == 0 ? width / tp : 0LL; };
      const long long qkv = split(s.qkv_width()), proj_in = split(s.q_width()),
                      fc1 = split(s.fc1_width()), fc2_in = split(s.ffn_hidden);
      // The output layer holds the padded vocabulary's rows (sim::padded_vocab_size), as the engine does.
      const long long head = sim::padded_vocab_size(model.vocab_size, tp) / tp;
      for (const int mbs : micro_batches(o)) {
        const long long tokens = static_cast<long long>(mbs) * seq;
        for (const LinearShape& l : {LinearShape{tokens, s.hidden, qkv}, LinearShape{tokens, proj_in, s.hidden},
                                     LinearShape{tokens, s.hidden, fc1}, LinearShape{tokens, fc2_in, s.hidden},
                                     LinearShape{tokens, s.hidden, head}}) {
          if (l.in_width > 0 && l.out_width > 0 && l.tokens * l.out_width <= kMaxPresetTensorElements &&
              l.tokens * l.in_width <= kMaxPresetTensorElements)
            shapes.insert(l);
        }
      }
    }
    insert_expert_linear_shapes(shapes, model, o);
  }
  const std::vector<long long> grid =
      o.quick ? std::vector<long long>{512, 4096, 32768} : std::vector<long long>{512, 2048, 8192, 32768, 65536};
  for (const long long t : grid)
    for (const long long i : grid)
      for (const long long w : grid)
        if (t * i <= kMaxTensorElements && t * w <= kMaxTensorElements && i * w <= kMaxTensorElements)
          shapes.insert({t, i, w});
  return sorted(shapes);
}

std::vector<AttentionShape> attention_shapes(const std::vector<sim::ModelConfig>& models,
                                             const ShapeOptions& o) {
  std::set<AttentionShape> shapes;
  for (const sim::ModelConfig& model : models) {
    const TransformerShape s = transformer_shape_of(model, 1, static_cast<int>(model.seq_length));
    for (const int tp : kTensorParallelSizes) {
      // The engine splits query and key/value heads alike (sim/core/layout_check.cc: both divisible by tp).
      if (s.heads % tp != 0 || s.kv_heads % tp != 0) continue;
      for (const int mbs : {1, 2, 4, 8})
        shapes.insert({mbs, s.heads / tp, s.kv_heads / tp, s.seq, s.attention_head_dim()});
    }
  }
  // The grid reaches 32768 tokens: context parallelism's all-gather attention
  // runs batch-1 square causal calls of up to c·sqrt(4·cp − 1) tokens, c = seq/(2·cp)
  // (sim/compute/kernel_costs.h), e.g. 15.9k for 32k tokens over cp 4.
  // Group sizes 4 and 8 are Llama 3's (8B: 32/8, 70B: 64/8); the GQA backward
  // differs from the multi-head one (kernels/flash_attention.h), so each group
  // size has its own table in the simulator (sim/core/cost_profile.h).
  const int step = o.quick ? 4 : 2;
  const std::vector<int> heads_grid = o.quick ? std::vector<int>{16, 32} : std::vector<int>{16, 32, 64};
  for (int seq = 512; seq <= kMaxAttentionGridSeq; seq *= step)
    for (const int head_dim : {64, 128})
      for (const int heads : heads_grid)
        for (const int group : kAttentionGridGroups) {
          shapes.insert({std::max(1, kAttentionGridTokens / seq), heads, heads / group, seq, head_dim});
          if (!o.quick) shapes.insert({1, heads, heads / group, seq, head_dim});
        }
  return sorted(shapes);
}

std::vector<ElementwiseShape> elementwise_shapes(const std::string& kernel,
                                                 const std::vector<sim::ModelConfig>& models,
                                                 const ShapeOptions& o) {
  const auto& names = elementwise_kernel_names();
  if (std::find(names.begin(), names.end(), kernel) == names.end())
    throw std::invalid_argument("elementwise_shapes: unknown kernel '" + kernel + "'");
  std::set<ElementwiseShape> shapes;
  if (kernel == "adamw" || kernel == "grad_norm") {
    for (long long n = 1LL << 20; n <= kMaxTensorElements; n *= (o.quick ? 16 : 4)) shapes.insert({1, n});
    return sorted(shapes);
  }
  const std::vector<long long> rows = o.quick ? std::vector<long long>{2048, 32768}
                                              : std::vector<long long>{2048, 8192, 32768, 65536};
  std::vector<long long> widths = o.quick ? std::vector<long long>{1024, 8192}
                                          : std::vector<long long>{512, 2048, 8192, 32768};
  if (kernel == "cross_entropy") {
    widths = o.quick ? std::vector<long long>{8192, 51200} : std::vector<long long>{8192, 32768, 131072};
    for (const sim::ModelConfig& m : models) widths.push_back((m.vocab_size + 7) / 8 * 8);
  }
  // RoPE's width is the fused QKV row of 128-wide heads: (heads + 2 kv_heads)·128,
  // MHA, for 4, 16 and 64 heads; its rows are whole 2048-token sequences.
  if (kernel == "rope_forward" || kernel == "rope_backward")
    widths = o.quick ? std::vector<long long>{6144} : std::vector<long long>{1536, 6144, 24576};
  // The embedding gradient is an fp32 (vocab, width) table: keep it within 2^28 at vocab 51200.
  if (kernel == "embedding_forward" || kernel == "embedding_backward")
    widths = o.quick ? std::vector<long long>{1024, 4096} : std::vector<long long>{512, 1024, 2048, 4096};
  for (const long long r : rows)
    for (const long long w : widths)
      if (r * w <= kMaxTensorElements) shapes.insert({r, w});
  return sorted(shapes);
}

}  // namespace sextant::engine::calibration
