// The shape of one dense transformer layer on one GPU of a layout: what each
// tensor-parallel rank's GEMMs and attention see, and the tokens of its
// micro-batch. Computed once here; the simulator's compute model
// (sim/compute/layer_time.cc) and the engine's shape (sim/core/transformer_shape.cc)
// both read it, so they cannot disagree about a shard.
//
// Tensor parallelism (Shoeybi et al. 2019, Sec. 3): QKV and the first MLP
// projection are split by output columns (heads and ffn/tp per rank), the
// attention projection and the second MLP projection by input rows; the hidden
// size of the row-parallel outputs is whole. Sequence parallelism (Korthikanti
// et al. 2022, Sec. 4.2.2) runs norms and dropouts on tokens/tp per rank;
// context parallelism gives each rank seq/cp tokens of every sequence.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/core/model_config.h"
#include "sim/core/parallel_layout.h"

namespace sextant::sim {

struct LayerShape {
  int tp = 1;
  bool sp = false;
  std::int64_t hidden = 0;    // h: row-parallel outputs and column-parallel inputs
  int head_dim = 0;           // kv_channels
  int heads = 0;              // query heads per rank: heads / tp
  int kv_heads = 0;           // K/V heads (query groups) per rank: groups / tp
  std::int64_t ffn = 0;       // MLP width per rank: ffn_hidden / tp
  bool swiglu = false;        // the first MLP projection is [gate | up], 2·ffn wide
  std::int64_t tokens = 0;    // the micro-batch's tokens on this rank: mbs·seq/cp

  std::int64_t q_width() const { return static_cast<std::int64_t>(heads) * head_dim; }
  std::int64_t kv_width() const { return static_cast<std::int64_t>(kv_heads) * head_dim; }
  /// The fused QKV projection's output per rank: [Q heads | K heads | V heads].
  std::int64_t qkv_width() const { return q_width() + 2 * kv_width(); }
  std::int64_t fc1_width() const { return swiglu ? 2 * ffn : ffn; }
  /// Tokens the norms and dropouts run on per rank: all of them, or 1/tp under sp.
  double norm_tokens() const { return sp ? static_cast<double>(tokens) / tp : static_cast<double>(tokens); }
};

/// The vocabulary the embedding and output layer hold under tensor
/// parallelism of `tp` ranks: at tp > 1 it is split by rows over the ranks
/// (vocabulary-parallel, Shoeybi et al. 2019, Sec. 3), padded as Megatron does
/// (megatron/training/tokenizer: _vocab_size_with_padding, rounding up to a
/// multiple of make_vocab_size_divisible_by (128) x tp) so each rank holds
/// padded / tp rows. At tp = 1 the preset's size as it is (the presets already
/// carry Megatron's padded sizes: 51200 = 128 x 400, 128256 = 128 x 1002, ...).
std::int64_t padded_vocab_size(std::int64_t vocab_size, int tp);
/// The rows of the embedding and output layer one of `tp` ranks holds:
/// padded_vocab_size / tp (the engine's TransformerShape::vocab).
double vocab_rows_per_rank(const ModelConfig& model, int tp);

/// The shape of a dense layer of `model` under `layout`. Exact for layouts
/// layout_problems accepts (heads, groups and ffn divisible by tp, seq by cp);
/// otherwise the widths round down.
LayerShape layer_shape(const ModelConfig& model, const ParallelLayout& layout);

}  // namespace sextant::sim
