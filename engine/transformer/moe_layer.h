// The MLP block of an MoE layer, Megatron-Core's MoELayer (Shazeer et al. 2017;
// Fedus et al. 2021; Megatron-Core's moe/ documentation): norm2, the router,
// the tokens permuted to their experts, the experts' MLPs as grouped GEMMs, and
// the weighted outputs summed back into the residual stream.
//
// Forward, T tokens of hidden h, E experts, top-k, P = T·k routed pairs:
//   logits (T, E) fp32 = x · Wrᵀ               one GEMM, bf16 in, fp32 out (Megatron's
//                                                --moe-router-dtype fp32 keeps the router in fp32)
//   top-k ids and weights, the losses' statistics   kernels/moe_router.h, moe_load_balancing.h
//                                                   (with DeepSeek-V3's bias: selected by score + bias,
//                                                   the counts added to the step's load)
//   the routing map: each pair's permuted row       kernels/moe_routing_map.h
//   the rows per expert copied to the host          a sync, as Megatron's tokens_per_expert.cpu():
//                                                   the grouped GEMMs launch with the sizes
//   permuted (P, h) = x's rows, one per pair        kernels/moe_permute.h
//   fc1 (P, fc1w), SwiGLU or GELU (P, f), fc2 (P, h)   per expert, kernels/moe_grouped_gemm.h
//   out = residual + Σ_j w_tj · fc2 row of (t, j)   the un-permutation, residual fused
// Backward: the same in reverse; the router's gradient (its top-k weights' and
// the losses') reaches x through the router GEMM, added to the permutation's.
//
// Expert parallelism (ep > 1; Lepikhin et al. 2020, GShard, Sec. 2.2; Megatron-Core's
// MoEAlltoAllTokenDispatcher): each rank of the ep group holds E / ep experts and
// routes its own tokens over all E; the permuted rows, in expert order, are one
// block per destination rank. The rows per expert go first (an all-to-all of
// E / ep counts per rank), then the rows (an all-to-all with variable counts,
// Communicator::exchange), which arrive grouped by source and are sorted to
// expert-major (kernels/moe_chunk_sort.h) for the grouped GEMMs; the combine
// runs the same backwards, and the backward moves the gradients the same two ways.
//
// Stored per layer for the backward: the logits, the top-k choices and weights,
// the routing map, the Switch loss's counts, the permuted input, fc1's output
// and the activation (Q rows: this rank's experts' rows), fc2's output combined
// back (P rows), the counts received from each source (ep > 1); on the host the
// rows per local expert, sent to and received from each rank.
// One tensor-parallel rank so far (transformer_shape_problems refuses others).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/pinned_host_array.h"
#include "engine/transformer/moe_options.h"
#include "engine/transformer/residual_block.h"
#include "kernels/moe_grouped_gemm.h"
#include "kernels/moe_permute.h"

namespace sextant::engine::transformer {

/// What a model's MoE layers routed since the statistics were last taken.
struct MoeStatistics {
  /// [MoE layer of this model, in order][expert]: tokens whose top-k chose the
  /// expert (before any capacity drops them), summed over the forward passes.
  std::vector<std::vector<std::int64_t>> expert_tokens;
  /// [MoE layer][expert]: the rows this rank's tokens give each expert's
  /// GEMMs over the same passes: the pairs it kept after a capacity dropped
  /// the rest (the capacity itself when padded to it), without the blocks'
  /// rounding to a multiple of 8 rows; expert_tokens when dropless. What the
  /// simulator's moe.expert_load_factor is measured from (engine/model/expert_load.h).
  std::vector<std::vector<std::int64_t>> expert_rows;
  /// With DeepSeek-V3's bias (MoeOptions::expert_bias_update_rate > 0), per MoE
  /// layer: its selection biases' max - min over the experts when the statistics
  /// were taken (a state, not a sum: accumulate keeps the later). Empty without.
  std::vector<double> expert_bias_spread;
  /// Sums over layers and passes of the router losses' values (each a
  /// micro-batch's mean; without the coefficient), and the passes summed.
  double aux_loss_sum = 0.0;
  double z_loss_sum = 0.0;
  std::int64_t layer_passes = 0;
};

/// Adds `more` into `total` layer by layer and expert by expert (an empty
/// total takes `more` as it is).
void accumulate(MoeStatistics& total, const MoeStatistics& more);
/// The busiest expert's tokens over the mean (1: balanced): what the
/// simulator's moe.expert_load_factor describes. 0 when no token was routed.
double busiest_expert_load(const std::vector<std::int64_t>& expert_tokens);

class MoeLayer : public ResidualBlock {
 public:
  /// `first_layer`: the whole model's index of this model's layer 0 (a pipeline chunk's).
  MoeLayer(ModelContext& context, ResidualStream& stream, Norm& norm, const MoeOptions& options,
           int first_layer);
  ~MoeLayer() override;

  void reserve_pass(BufferReserver& r) override;
  void reserve_workspace(BufferReserver& r) override;
  void bind(bool full_recompute) override;

  /// recompute: the block again without the un-permutation (the next layer's
  /// input is stored); fc2 runs, as the backward reads its output.
  void forward(int layer, bool recompute) override;
  void backward(int layer) override;

  /// The statistics since the last call, which clears them.
  MoeStatistics take_statistics();
  /// DeepSeek-V3's balancing (MoeOptions::expert_bias_update_rate): `biases`, the
  /// selection biases the router adds to its scores, and `step_load`, which each
  /// counted forward (not full recomputation's second) adds its tokens per expert
  /// to — (this model's MoE layers, E) each, in layer order, the trainer's
  /// (every activation slot of a chunk shares them). Null: no bias, no count.
  void bind_expert_balancing(const float* biases, std::int32_t* step_load);
  kernels::MoeGemmBackend gemm_backend() const { return backend_; }
  /// The experts' products tuned on first sight (Transformer::set_tune_gemms's
  /// throw-away pass; kernels::MoeGroupedGemm::set_tune_new_problems). After bind().
  void set_tune_gemms(bool on) { grouped_->set_tune_new_problems(on); }

 protected:
  Ends ends(int layer) const override;
  void reserve_stored(int layer, BufferReserver& r) override;
  bool recompute_writes_output() const override { return false; }

 private:
  struct Stored {
    float* logits = nullptr;           // (T, E) fp32
    std::int32_t* topk_ids = nullptr;  // (T, k)
    float* topk_weights = nullptr;     // (T, k) fp32
    float* row_lse = nullptr;          // (T) fp32
    float* row_score_sum = nullptr;    // (T) fp32
    std::int32_t* token_rows = nullptr;  // (T, k): each pair's permuted row, or -1 (dropped)
    std::int32_t* kept = nullptr;        // (E): pairs each expert kept (the padding's bound)
    float* aux_counts = nullptr;       // (balancing groups, E) fp32, with the Switch loss
    Bf16* permuted = nullptr;          // (Q, h): the local experts' input rows, expert-major
    Bf16* fc1_out = nullptr;           // (Q, fc1w)
    Bf16* act = nullptr;               // (Q, f)
    Bf16* expert_out = nullptr;        // (P, h): this rank's pairs' expert outputs, combined back
    std::int32_t* received = nullptr;  // (ep, local experts): rows from each source (ep > 1)
  };
  /// Rows of one layer's exchange, on the host (ep > 1): to and from each rank
  /// of the ep group, the offsets of those blocks.
  struct Exchange {
    std::vector<std::int64_t> sent, sent_at, received, received_at;
  };
  struct Sizes;
  Sizes sizes() const;
  kernels::MoeRouterOptions router_options() const;
  kernels::MoeRouterLossOptions loss_options() const;
  kernels::MoeRoutingOptions routing_options() const;
  kernels::MoePadding padding(const Stored& a) const;
  /// The router's forward and the routing map of `layer`, then the rows per
  /// expert (and, when `count_statistics`, the statistics) read back to the host.
  void route(int layer, const Bf16* x, bool count_statistics);
  /// The router GEMM's backward: the input gradient added into `dx`, the weight's gradient.
  void router_backward(int layer, Bf16* dx);
  /// ep > 1: the counts' all-to-all, after the routing map of `layer`.
  void exchange_counts(int layer);
  /// ep > 1: rows of this rank's pairs (P, global expert order) to their experts'
  /// ranks, arriving in `local` (Q, expert-major); and the way back.
  void dispatch(int layer, const Bf16* pairs, Bf16* local);
  void combine(int layer, const Bf16* local, Bf16* pairs);

  MoeOptions options_;
  int first_layer_;
  kernels::MoeGemmBackend backend_;
  std::vector<Stored> stored_;                        // per layer
  std::vector<std::vector<std::int32_t>> expert_rows_;  // per layer, on the host: each local expert's rows
  std::vector<Exchange> exchanges_;                     // per layer (ep > 1)
  std::vector<int> moe_index_;  // per layer: its index among the MoE layers (statistics_.expert_tokens)
  // Read back once per layer's forward, into page-locked memory so the copies
  // queue and one sync waits for all of them (pinned_host_array.h): the router's
  // counts, the expert rows, the rows received and the pairs kept (4E), the
  // losses' values (2).
  PinnedHostArray<std::int32_t> readback_;
  PinnedHostArray<float> loss_readback_;
  MoeStatistics statistics_;
  const float* expert_biases_ = nullptr;  // (MoE layers, E) fp32, or null (bind_expert_balancing)
  std::int32_t* step_load_ = nullptr;     // (MoE layers, E) int32, or null
  std::unique_ptr<kernels::MoeGroupedGemm> grouped_;

  // One pass's buffers and the workspaces.
  std::int32_t* counts_ = nullptr;  // (2E): the router's tokens per expert, then the rows per expert
  float* losses_ = nullptr;         // (2): the aux loss's and the z-loss's values
  float* prob_sums_ = nullptr;      // (groups, E)
  char* routing_workspace_ = nullptr;
  char* statistics_workspace_ = nullptr;
  char* grouped_workspace_ = nullptr;
  Bf16* grouped_staging_ = nullptr;  // the grouped backend's bf16 weight gradient
  Bf16* dexpert_out_ = nullptr;      // (P, h)
  Bf16* dact_ = nullptr;             // (Q, f)
  Bf16* dfc1_ = nullptr;             // (Q, fc1w), SwiGLU only (GELU's backward runs in place)
  Bf16* dpermuted_ = nullptr;        // (P, h)
  // ep > 1 (with ep = 1 the local rows are the pairs': the first two alias
  // dexpert_out_ and dpermuted_): the local experts' output gradient and input
  // gradient (Q, h); the rows as they arrive, by source (Q, h); the forward's
  // permuted rows before they leave, and fc2's local output (P and Q, h).
  Bf16* dlocal_out_ = nullptr;
  Bf16* dlocal_in_ = nullptr;
  Bf16* arrived_ = nullptr;
  Bf16* pairs_ = nullptr;
  Bf16* local_out_ = nullptr;
  float* dtopk_weights_ = nullptr;   // (T, k)
  float* dlogits_ = nullptr;         // (T, E)
  Bf16* dlogits_bf16_ = nullptr;     // (T, E)
};

}  // namespace sextant::engine::transformer
