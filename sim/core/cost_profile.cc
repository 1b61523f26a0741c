#include "sim/core/cost_profile.h"

#include <cmath>

namespace sextant::sim {

std::string_view to_string(Software software) {
  switch (software) {
    case Software::kMegatronPublished: return "megatron-published";
    case Software::kSextantEngine: return "sextant-engine";
  }
  return "?";
}

std::optional<Software> parse_software(std::string_view text) {
  if (text == "megatron-published") return Software::kMegatronPublished;
  if (text == "sextant-engine") return Software::kSextantEngine;
  return std::nullopt;
}

std::string_view to_string(ElementwiseKernel kernel) {
  static constexpr std::array<std::string_view, kElementwiseKernels> kNames{
      "layernorm_forward", "layernorm_backward", "rmsnorm_forward", "rmsnorm_backward",
      "gelu_forward",      "swiglu_forward",     "swiglu_backward", "rope_forward",
      "rope_backward",     "embedding_forward",  "embedding_backward", "cross_entropy",
      "bias_gradient",     "residual_add",       "adamw",           "grad_norm"};
  return kNames[static_cast<std::size_t>(kernel)];
}

int attention_group_size(double heads, double kv_heads) {
  if (!(kv_heads >= 1) || !(heads >= kv_heads)) return 0;
  const double group = std::round(heads / kv_heads);
  return group * kv_heads == heads ? static_cast<int>(group) : 0;
}

void MeasuredTables::build_lookup() {
  // Work per point: the GEMM's m·n·k, attention's b·heads·s²·d, a kernel's elements.
  auto linear = [](LogGridTable& grid, const std::vector<LinearPoint>& points) {
    grid = LogGridTable(3, 3);
    for (const LinearPoint& p : points)
      grid.add({p.tokens, p.in_width, p.out_width, 0}, p.tokens * p.in_width * p.out_width,
               {p.forward_s, p.input_gradient_s, p.weight_gradient_s});
    grid.build();
  };
  linear(lookup.linear_bf16, linear_bf16);
  linear(lookup.linear_fp8, linear_fp8);
  lookup.linear_bf16_epilogues = LogGridTable(3, 5);
  for (const LinearEpiloguePoint& p : linear_bf16_epilogues)
    lookup.linear_bf16_epilogues.add(
        {p.tokens, p.in_width, p.out_width, 0}, p.tokens * p.in_width * p.out_width,
        {p.forward_bias_s, p.forward_residual_s, p.forward_bias_residual_s, p.forward_bias_gelu_s,
         p.input_gradient_dgelu_s});
  lookup.linear_bf16_epilogues.build();
  lookup.attention.clear();
  for (const AttentionPoint& p : attention) {
    const int group = attention_group_size(p.heads, p.kv_heads);
    if (group == 0) continue;  // the reader refuses such rows
    LogGridTable& grid = lookup.attention.try_emplace(group, 4, 2).first->second;
    grid.add({p.batch, p.heads, p.seq, p.head_dim}, p.batch * p.heads * p.seq * p.seq * p.head_dim,
             {p.forward_s, p.backward_s, 0});
  }
  for (auto& [group, grid] : lookup.attention) grid.build();
  for (std::size_t k = 0; k < elementwise.size(); ++k) {
    LogGridTable& grid = lookup.elementwise[k];
    grid = LogGridTable(2, 1);
    for (const ElementwisePoint& p : elementwise[k])
      grid.add({p.rows, p.width, 0, 0}, p.rows * p.width, {p.seconds, 0, 0});
    grid.build();
  }
}

}  // namespace sextant::sim
