#include "engine/transformer/moe_layer.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <numeric>
#include <span>
#include <stdexcept>
#include <string>

#include "kernels/cuda_check.h"
#include "kernels/gelu.h"
#include "engine/comm/communicator.h"
#include "kernels/moe_chunk_sort.h"
#include "kernels/moe_load_balancing.h"
#include "kernels/moe_permute.h"
#include "kernels/parameter_init.h"
#include "kernels/swiglu.h"

namespace sextant::engine::transformer {
namespace {

constexpr auto kAct = MemoryCategory::kActivations;
// Rows of an expert's block are a multiple of this (routing_options).
constexpr int kExpertRowsMultiple = 8;

}  // namespace

struct MoeLayer::Sizes {
  int tokens = 0;         // T
  int experts = 0;        // E, over the ep group
  int local_experts = 0;  // E / ep, this rank's
  int ep = 1;
  int topk = 0;           // k
  int hidden = 0;         // h
  int ffn = 0;            // f, one expert's width
  int fc1 = 0;            // f (GELU) or 2f (SwiGLU)
  int rows_bound = 0;     // P: the permuted rows this rank's routing can make
  int local_rows_bound = 0;  // Q: the rows its experts can receive (P at ep = 1)
  int group_tokens = 0;   // tokens per Switch-loss balancing group
  int groups = 0;
};

MoeLayer::Sizes MoeLayer::sizes() const {
  const TransformerShape& s = context_.shape();
  Sizes z;
  z.tokens = static_cast<int>(s.tokens());
  z.experts = s.experts;
  z.local_experts = s.local_experts;
  z.ep = s.ep;
  z.topk = s.router_topk;
  z.hidden = s.hidden;
  z.ffn = s.expert_ffn_hidden;
  z.fc1 = s.expert_fc1_width();
  const kernels::MoeRoutingOptions routing = routing_options();
  z.rows_bound = static_cast<int>(kernels::moe_permuted_rows_bound(z.tokens, z.topk, z.experts, routing));
  // Each source's rows for this rank: a token's k choices are distinct experts,
  // so at most min(k, E / ep) of them are here, each block padded as the source pads it.
  z.local_rows_bound =
      z.ep == 1 ? z.rows_bound
                : z.ep * static_cast<int>(kernels::moe_permuted_rows_bound(
                             z.tokens, std::min(z.topk, z.local_experts), z.local_experts, routing));
  z.group_tokens = options_.aux_loss_per_sequence ? s.seq : z.tokens;
  z.groups = z.tokens / z.group_tokens;
  return z;
}

kernels::MoeRouterOptions MoeLayer::router_options() const {
  kernels::MoeRouterOptions o;
  o.topk = context_.shape().router_topk;
  o.score_function = options_.score_function;
  o.normalize_topk = options_.normalize_topk;
  return o;
}

kernels::MoeRouterLossOptions MoeLayer::loss_options() const {
  kernels::MoeRouterLossOptions o;
  o.aux_loss_coeff = static_cast<float>(options_.aux_loss_coeff);
  o.aux_group_tokens = options_.aux_loss_per_sequence ? context_.shape().seq : 0;
  o.z_loss_coeff = static_cast<float>(options_.z_loss_coeff);
  return o;
}

kernels::MoeRoutingOptions MoeLayer::routing_options() const {
  const TransformerShape& s = context_.shape();
  kernels::MoeRoutingOptions o;
  if (options_.capacity_factor > 0)
    o.capacity = kernels::moe_expert_capacity(static_cast<int>(s.tokens()), s.router_topk, s.experts,
                                              options_.capacity_factor);
  o.drop_policy = options_.drop_policy;
  o.pad_to_capacity = options_.pad_to_capacity && o.capacity > 0;
  // Each expert's block a multiple of 8 rows (zeros after its tokens): cuBLAS's
  // grouped weight gradient, whose inner dimension the rows are, otherwise runs
  // one GEMM per expert (kernels/moe_routing_map.h). The zero rows add nothing.
  o.rows_multiple = o.pad_to_capacity ? 1 : kExpertRowsMultiple;
  return o;
}

kernels::MoePadding MoeLayer::padding(const Stored& a) const {
  const kernels::MoeRoutingOptions o = routing_options();
  if (o.pad_to_capacity) return {a.kept, context_.shape().experts, o.capacity};
  if (o.rows_multiple > 1) return {a.kept, context_.shape().experts, 0, o.rows_multiple};
  return {};
}

MoeLayer::MoeLayer(ModelContext& context, ResidualStream& stream, Norm& norm, const MoeOptions& options,
                   int first_layer)
    : ResidualBlock(context, stream, norm, "norm2"),
      options_(options),
      first_layer_(first_layer),
      stored_(to_size(context.shape().num_layers)),
      expert_rows_(to_size(context.shape().num_layers)),
      exchanges_(to_size(context.shape().num_layers)) {
  const TransformerShape& s = context.shape();
  // The faster by the FLOPs of an expert's product against the host's launch
  // of each (TransformerShape::expert_gemms_in_loop). Measured on the tiny
  // presets (reports/measurements/2026-11-27-h100-moe-engine): moe-mixtral-tiny
  // at mbs 2 (15 GFLOP per expert) ran the loop 3 % faster, moe-fine-tiny at
  // mbs 4 (0.2 GFLOP) the grouped GEMM 2.6x faster.
  backend_ = options_.gemm_backend.value_or(s.expert_gemms_in_loop() ? kernels::MoeGemmBackend::kCublasLtLoop
                                                                      : kernels::MoeGemmBackend::kCublasGrouped);
  readback_ = PinnedHostArray<std::int32_t>(4 * to_size(s.experts));  // (ep, E / ep) received: E
  loss_readback_ = PinnedHostArray<float>(2);
  for (int layer = 0; layer < s.num_layers; ++layer) {
    moe_index_.push_back(static_cast<int>(statistics_.expert_tokens.size()));
    if (s.moe_layer(first_layer_ + layer)) {
      statistics_.expert_tokens.emplace_back(to_size(s.experts), 0);
      statistics_.expert_rows.emplace_back(to_size(s.experts), 0);
    }
  }
}

MoeLayer::~MoeLayer() = default;

ResidualBlock::Ends MoeLayer::ends(int layer) const {
  const LayerTensors& w = context_.layout().layer(layer);
  Ends e;
  e.input = stream_.mid[to_size(layer)];
  e.output = stream_.next_input(layer);
  e.norm_gamma = w.norm2_gamma;
  e.norm_beta = w.norm2_beta;
  e.input_bias = w.proj_bias;
  return e;
}

void MoeLayer::reserve_stored(int layer, BufferReserver& r) {
  const Sizes z = sizes();
  const std::size_t T = to_size(z.tokens), E = to_size(z.experts), k = to_size(z.topk), P = to_size(z.rows_bound);
  const std::size_t Q = to_size(z.local_rows_bound);
  Stored& a = stored_[to_size(layer)];
  const std::string p = layer_prefix(layer) + "moe.";
  r.own(a.logits, p + "logits", kAct, T * E);
  r.own(a.topk_ids, p + "topk_ids", kAct, T * k);
  r.own(a.topk_weights, p + "topk_weights", kAct, T * k);
  r.own(a.row_lse, p + "row_lse", kAct, T);
  r.own(a.row_score_sum, p + "row_score_sum", kAct, T);
  r.own(a.token_rows, p + "token_rows", kAct, T * k);
  r.own(a.kept, p + "kept_per_expert", kAct, E);
  if (options_.aux_loss_coeff != 0.0) r.own(a.aux_counts, p + "aux_counts", kAct, to_size(z.groups) * E);
  r.own(a.permuted, p + "permuted", kAct, Q * to_size(z.hidden));
  r.own(a.fc1_out, p + "fc1_out", kAct, Q * to_size(z.fc1));
  r.own(a.act, p + "act", kAct, Q * to_size(z.ffn));
  r.own(a.expert_out, p + "expert_out", kAct, P * to_size(z.hidden));
  if (z.ep > 1) r.own(a.received, p + "rows_received", kAct, E);  // (ep, E / ep)
}

void MoeLayer::reserve_pass(BufferReserver& r) {
  const Sizes z = sizes();
  const std::size_t T = to_size(z.tokens), E = to_size(z.experts), k = to_size(z.topk), P = to_size(z.rows_bound);
  const std::size_t Q = to_size(z.local_rows_bound), h = to_size(z.hidden);
  r.shared(counts_, "moe.counts", kAct, 2 * E);
  r.shared(losses_, "moe.losses", kAct, 2);
  r.shared(prob_sums_, "moe.prob_sums", kAct, to_size(z.groups) * E);
  r.shared(dexpert_out_, "grad.moe.expert_out", kAct, P * h);
  r.shared(dact_, "grad.moe.act", kAct, Q * to_size(z.ffn));
  if (!context_.shape().gelu) r.shared(dfc1_, "grad.moe.fc1_out", kAct, Q * to_size(z.fc1));
  r.shared(dpermuted_, "grad.moe.permuted", kAct, P * h);
  if (z.ep > 1) {
    r.shared(dlocal_out_, "grad.moe.local_expert_out", kAct, Q * h);
    r.shared(dlocal_in_, "grad.moe.local_permuted", kAct, Q * h);
    r.shared(arrived_, "moe.rows_arrived", kAct, Q * h);
    r.shared(pairs_, "moe.rows_to_send", kAct, P * h);
    r.shared(local_out_, "moe.local_expert_out", kAct, Q * h);
  }
  r.shared(dtopk_weights_, "grad.moe.topk_weights", kAct, T * k);
  r.shared(dlogits_, "grad.moe.logits", kAct, T * E);
  r.shared(dlogits_bf16_, "grad.moe.logits_bf16", kAct, T * E);
}

void MoeLayer::reserve_workspace(BufferReserver& r) {
  const Sizes z = sizes();
  constexpr auto kWork = MemoryCategory::kOther;  // workspaces, as the GEMMs' and the norms'
  r.shared(routing_workspace_, "moe.routing_workspace", kWork,
           kernels::moe_routing_map_workspace_bytes(z.tokens, z.topk, z.experts));
  r.shared(statistics_workspace_, "moe.statistics_workspace", kWork,
           kernels::moe_aux_loss_statistics_workspace_bytes(z.tokens, z.experts, z.group_tokens));
  r.shared(grouped_workspace_, "moe.grouped_gemm_workspace", kWork,
           kernels::MoeGroupedGemm::workspace_bytes(z.local_experts));
  // The grouped backend computes an fp32 weight gradient in bf16 first (kernels/moe_grouped_gemm.h).
  if (backend_ == kernels::MoeGemmBackend::kCublasGrouped)
    r.shared(grouped_staging_, "moe.grouped_gemm_staging", kWork,
             to_size(z.local_experts) * to_size(z.hidden) * to_size(std::max(z.fc1, z.ffn)));
}

void MoeLayer::bind(bool full_recompute) {
  ResidualBlock::bind(full_recompute);
  if (full_recompute)
    for (std::size_t i = 1; i < stored_.size(); ++i) stored_[i] = stored_[0];
  const int local = sizes().local_experts;
  grouped_ = std::make_unique<kernels::MoeGroupedGemm>(backend_, local, grouped_workspace_,
                                                       kernels::MoeGroupedGemm::workspace_bytes(local));
  if (sizes().ep == 1) {  // the local rows are the pairs'
    dlocal_out_ = dexpert_out_;
    dlocal_in_ = dpermuted_;
  }
}

void MoeLayer::route(int layer, const Bf16* x, bool count_statistics) {
  const Sizes z = sizes();
  const LayerTensors& w = context_.layout().layer(layer);
  const Stored& a = stored_[to_size(layer)];
  cudaStream_t stream = context_.stream();
  // logits (T, E) fp32 = x (T, h) · Wrᵀ, Wr (E, h).
  kernels::GemmArgs g;
  g.m = z.tokens;
  g.n = z.experts;
  g.k = z.hidden;
  g.a = x;
  g.b = context_.weight(w.router_weight);
  g.transpose_b = kernels::Transpose::kYes;
  g.c = a.logits;
  g.c_type = kernels::GemmOutput::kFp32;
  context_.gemm().run(g, stream);

  const kernels::MoeRouterOptions router = router_options();
  const kernels::MoeRouterLossOptions losses = loss_options();
  // DeepSeek-V3's selection bias of this layer (eq. 16), and the step's load it is updated from.
  const std::size_t moe_row = to_size(moe_index_[to_size(layer)]) * to_size(z.experts);
  const float* bias = expert_biases_ == nullptr ? nullptr : expert_biases_ + moe_row;
  kernels::moe_router_forward(a.topk_ids, a.topk_weights, a.row_lse, a.row_score_sum, counts_, a.logits, bias,
                              z.tokens, z.experts, router, stream);
  if (count_statistics && step_load_ != nullptr)
    kernels::moe_accumulate_expert_load(step_load_ + moe_row, counts_, z.experts, stream);
  const bool aux = losses.aux_loss_coeff != 0.0f;
  if (aux)
    kernels::moe_aux_loss_statistics(prob_sums_, a.aux_counts, a.logits, a.row_lse, a.row_score_sum, a.topk_ids,
                                     z.tokens, z.experts, router, z.group_tokens, statistics_workspace_,
                                     kernels::moe_aux_loss_statistics_workspace_bytes(z.tokens, z.experts,
                                                                                      z.group_tokens),
                                     stream);
  // The losses' values, for the log: the z-loss's from the log-sum-exps alone.
  kernels::MoeRouterLossOptions reported = losses;
  if (!aux) reported.aux_loss_coeff = 0.0f;
  kernels::moe_router_loss_values(aux ? losses_ : nullptr, losses_ + 1, prob_sums_, a.aux_counts, a.row_lse,
                                  z.tokens, z.experts, z.topk, reported, stream);
  kernels::moe_routing_map(a.token_rows, a.kept, counts_ + z.experts, a.topk_ids, a.topk_weights, z.tokens, z.topk,
                           z.experts, routing_options(), routing_workspace_,
                           kernels::moe_routing_map_workspace_bytes(z.tokens, z.topk, z.experts), stream);

  if (z.ep > 1) exchange_counts(layer);

  // The grouped GEMMs launch with each expert's rows: wait for them here.
  const auto E = to_size(z.experts), El = to_size(z.local_experts), ep = to_size(z.ep);
  SEXTANT_CUDA_CHECK(cudaMemcpyAsync(readback_.data(), counts_, 2 * E * sizeof(std::int32_t),
                                     cudaMemcpyDeviceToHost, stream));
  if (z.ep > 1)
    SEXTANT_CUDA_CHECK(cudaMemcpyAsync(readback_.data() + 2 * E, a.received, E * sizeof(std::int32_t),
                                       cudaMemcpyDeviceToHost, stream));
  if (count_statistics)
    SEXTANT_CUDA_CHECK(cudaMemcpyAsync(readback_.data() + 3 * E, a.kept, E * sizeof(std::int32_t),
                                       cudaMemcpyDeviceToHost, stream));
  SEXTANT_CUDA_CHECK(cudaMemcpyAsync(loss_readback_.data(), losses_, 2 * sizeof(float), cudaMemcpyDeviceToHost,
                                     stream));
  SEXTANT_CUDA_CHECK(cudaStreamSynchronize(stream));  // the one drain of the layer's forward
  const float* loss_values = loss_readback_.data();
  const std::int32_t* own_rows = readback_.data() + E;  // (E): this rank's rows for every expert
  std::vector<std::int32_t>& local_rows = expert_rows_[to_size(layer)];
  if (z.ep == 1) {
    local_rows.assign(own_rows, own_rows + E);
  } else {
    // Rows to rank p: its experts' blocks, consecutive in expert order; rows
    // from source s: the received row s, (ep, E / ep).
    const std::int32_t* received = readback_.data() + 2 * E;
    Exchange& x = exchanges_[to_size(layer)];
    x.sent.assign(ep, 0);
    x.received.assign(ep, 0);
    local_rows.assign(El, 0);
    for (std::size_t p = 0; p < ep; ++p)
      for (std::size_t l = 0; l < El; ++l) {
        x.sent[p] += own_rows[p * El + l];
        x.received[p] += received[p * El + l];
        local_rows[l] += received[p * El + l];
      }
    x.sent_at.assign(ep, 0);
    x.received_at.assign(ep, 0);
    for (std::size_t p = 1; p < ep; ++p) {
      x.sent_at[p] = x.sent_at[p - 1] + x.sent[p - 1];
      x.received_at[p] = x.received_at[p - 1] + x.received[p - 1];
    }
  }

  // The statistics count each layer's forward once, not full recomputation's again.
  if (!count_statistics) return;
  const std::size_t moe_layer = to_size(moe_index_[to_size(layer)]);
  std::vector<std::int64_t>& tokens = statistics_.expert_tokens[moe_layer];
  for (std::size_t e = 0; e < E; ++e) tokens[e] += readback_[e];
  // Padded to capacity, the rows are the capacity (own_rows); else the pairs kept.
  const std::int32_t* gemm_rows = routing_options().pad_to_capacity ? own_rows : readback_.data() + 3 * E;
  std::vector<std::int64_t>& rows = statistics_.expert_rows[moe_layer];
  for (std::size_t e = 0; e < E; ++e) rows[e] += gemm_rows[e];
  statistics_.aux_loss_sum += aux ? loss_values[0] / losses.aux_loss_coeff : 0.0;
  statistics_.z_loss_sum += losses.z_loss_coeff != 0.0f ? loss_values[1] / losses.z_loss_coeff : 0.0;
  ++statistics_.layer_passes;
}

void MoeLayer::exchange_counts(int layer) {
  const Sizes z = sizes();
  const Stored& a = stored_[to_size(layer)];
  tensor_parallel::Collectives* ep = context_.ep();
  if (ep == nullptr || ep->size() != z.ep)
    throw std::logic_error("MoeLayer: the shape has ep = " + std::to_string(z.ep) + " but the layer was bound to " +
                           (ep == nullptr ? std::string("no ep group") : std::to_string(ep->size()) + " ranks"));
  // Rank p gets this rank's rows for its E / ep experts; int32 moved as 4-byte
  // words (an all-to-all copies, it does not add).
  const std::int32_t* rows = counts_ + z.experts;
  ep->run([&](comm::Communicator& g) {
    g.all_to_all(rows, a.received, to_size(z.local_experts), comm::DataType::kFp32);
  });
}

void MoeLayer::dispatch(int layer, const Bf16* pairs, Bf16* local) {
  const Sizes z = sizes();
  const Exchange& x = exchanges_[to_size(layer)];
  const std::size_t h = to_size(z.hidden);
  std::vector<comm::PeerTransfer> sends, receives;
  for (int p = 0; p < z.ep; ++p) {
    const auto i = to_size(p);
    sends.push_back({const_cast<Bf16*>(pairs) + to_size(x.sent_at[i]) * h, to_size(x.sent[i]) * h, p});
    receives.push_back({arrived_ + to_size(x.received_at[i]) * h, to_size(x.received[i]) * h, p});
  }
  context_.ep()->run([&](comm::Communicator& g) { g.exchange(sends, receives, comm::DataType::kBf16); });
  const std::int64_t rows = x.received_at.back() + x.received.back();
  kernels::moe_sort_chunks(local, arrived_, stored_[to_size(layer)].received, z.ep, z.local_experts, rows, z.hidden,
                           kernels::MoeChunkOrder::kSourceMajor, context_.stream());
}

void MoeLayer::combine(int layer, const Bf16* local, Bf16* pairs) {
  const Sizes z = sizes();
  const Exchange& x = exchanges_[to_size(layer)];
  const std::size_t h = to_size(z.hidden);
  const std::int64_t rows = x.received_at.back() + x.received.back();
  kernels::moe_sort_chunks(arrived_, local, stored_[to_size(layer)].received, z.ep, z.local_experts, rows, z.hidden,
                           kernels::MoeChunkOrder::kExpertMajor, context_.stream());
  std::vector<comm::PeerTransfer> sends, receives;
  for (int p = 0; p < z.ep; ++p) {
    const auto i = to_size(p);
    sends.push_back({arrived_ + to_size(x.received_at[i]) * h, to_size(x.received[i]) * h, p});
    receives.push_back({pairs + to_size(x.sent_at[i]) * h, to_size(x.sent[i]) * h, p});
  }
  context_.ep()->run([&](comm::Communicator& g) { g.exchange(sends, receives, comm::DataType::kBf16); });
}

void MoeLayer::forward(int layer, bool recompute) {
  const Sizes z = sizes();
  const LayerTensors& w = context_.layout().layer(layer);
  const Stored& a = stored_[to_size(layer)];
  cudaStream_t stream = context_.stream();
  const Bf16* x = normed_input(layer);
  // Full recomputation reruns the router on the same input: the same choices.
  route(layer, x, !recompute);
  const std::vector<std::int32_t>& rows = expert_rows_[to_size(layer)];
  const int used = std::accumulate(rows.begin(), rows.end(), 0);

  const bool exchanged = z.ep > 1;
  kernels::moe_permute_forward(exchanged ? pairs_ : a.permuted, x, a.token_rows, z.tokens, z.topk, z.hidden,
                               padding(a), stream);
  if (exchanged) dispatch(layer, pairs_, a.permuted);
  grouped_->forward(a.fc1_out, a.permuted, context_.weight(w.expert_fc1_weight), rows, z.hidden, z.fc1, stream);
  if (context_.shape().gelu)
    kernels::gelu_forward(a.act, a.fc1_out, nullptr, used, z.ffn, stream);
  else
    kernels::swiglu_forward(a.act, a.fc1_out, used, z.ffn, stream);
  grouped_->forward(exchanged ? local_out_ : a.expert_out, a.act, context_.weight(w.expert_fc2_weight), rows, z.ffn,
                    z.hidden, stream);
  if (exchanged) combine(layer, local_out_, a.expert_out);
  if (recompute) return;  // the next layer's input is stored
  const Ends e = ends(layer);
  kernels::moe_unpermute_forward(e.output, a.expert_out, a.topk_weights, a.token_rows, z.tokens, z.topk, z.hidden,
                                 stream, e.input);
}

void MoeLayer::backward(int layer) {
  const Sizes z = sizes();
  const LayerTensors& w = context_.layout().layer(layer);
  const Stored& a = stored_[to_size(layer)];
  cudaStream_t stream = context_.stream();
  const std::vector<std::int32_t>& rows = expert_rows_[to_size(layer)];
  const int used = std::accumulate(rows.begin(), rows.end(), 0);
  const float beta = context_.accumulate_gradients() ? 1.0f : 0.0f;
  constexpr auto kFp32 = kernels::GemmOutput::kFp32;

  // out = residual + Σ_j w_j · expert_out: the rows' and the weights' gradients.
  kernels::moe_unpermute_backward(dexpert_out_, dtopk_weights_, output_gradient(), a.expert_out, a.topk_weights,
                                  a.token_rows, z.tokens, z.topk, z.hidden, padding(a), stream);
  if (z.ep > 1) dispatch(layer, dexpert_out_, dlocal_out_);
  const Bf16* w2 = context_.weight(w.expert_fc2_weight);
  grouped_->backward_input(dact_, dlocal_out_, w2, rows, z.ffn, z.hidden, stream);
  grouped_->backward_weight(context_.gradient(w.expert_fc2_weight), kFp32, beta, dlocal_out_, a.act, rows, z.ffn,
                            z.hidden, grouped_staging_, stream);
  Bf16* dfc1 = dfc1_;
  if (context_.shape().gelu) {
    kernels::gelu_backward(dact_, nullptr, dact_, a.fc1_out, nullptr, used, z.ffn, nullptr, 0, stream);
    dfc1 = dact_;
  } else {
    kernels::swiglu_backward(dfc1_, dact_, a.fc1_out, used, z.ffn, stream);
  }
  const Bf16* w1 = context_.weight(w.expert_fc1_weight);
  grouped_->backward_input(dlocal_in_, dfc1, w1, rows, z.hidden, z.fc1, stream);
  grouped_->backward_weight(context_.gradient(w.expert_fc1_weight), kFp32, beta, dfc1, a.permuted, rows, z.hidden,
                            z.fc1, grouped_staging_, stream);
  if (z.ep > 1) combine(layer, dlocal_in_, dpermuted_);
  // The input gradient: the copies' sum, then the router's share added to it.
  kernels::moe_permute_backward(stream_.scratch, dpermuted_, a.token_rows, z.tokens, z.topk, z.hidden, stream);
  router_backward(layer, stream_.scratch);
  finish_backward(layer);
}

void MoeLayer::router_backward(int layer, Bf16* dx) {
  const Sizes z = sizes();
  const LayerTensors& w = context_.layout().layer(layer);
  const Stored& a = stored_[to_size(layer)];
  cudaStream_t stream = context_.stream();
  kernels::moe_router_backward(dlogits_, a.logits, a.topk_ids, dtopk_weights_, a.aux_counts, z.tokens, z.experts,
                               router_options(), loss_options(), options_.router_loss_weight, stream);
  // The router's two GEMMs take the logits' gradient in bf16 (cuBLASLt's
  // tensor-core products take one input type); its fp32 values are rounded once.
  kernels::convert_to_bf16(dlogits_bf16_, dlogits_, to_size(z.tokens) * to_size(z.experts), stream);
  const Bf16* router_weight = context_.weight(w.router_weight);
  // dx (T, h) += dlogits (T, E) · Wr (E, h).
  kernels::GemmArgs dx_args;
  dx_args.m = z.tokens;
  dx_args.n = z.hidden;
  dx_args.k = z.experts;
  dx_args.a = dlogits_bf16_;
  dx_args.b = router_weight;
  dx_args.c = dx;
  dx_args.beta = 1.0f;
  context_.gemm().run(dx_args, stream);
  // dWr (E, h) (+)= dlogitsᵀ (E, T) · x (T, h).
  kernels::GemmArgs dw_args;
  dw_args.m = z.experts;
  dw_args.n = z.hidden;
  dw_args.k = z.tokens;
  dw_args.a = dlogits_bf16_;
  dw_args.transpose_a = kernels::Transpose::kYes;
  dw_args.b = stored_normed_input(layer);
  dw_args.c = context_.gradient(w.router_weight);
  dw_args.c_type = kernels::GemmOutput::kFp32;
  dw_args.beta = context_.accumulate_gradients() ? 1.0f : 0.0f;
  context_.gemm().run(dw_args, stream);
}

void MoeLayer::bind_expert_balancing(const float* biases, std::int32_t* step_load) {
  if (biases != nullptr && options_.score_function != kernels::MoeScoreFunction::kSigmoid)
    throw std::invalid_argument(
        "MoeLayer: DeepSeek-V3's expert bias needs the sigmoid score function (the softmax router takes no bias)");
  expert_biases_ = biases;
  step_load_ = step_load;
}

void accumulate(MoeStatistics& total, const MoeStatistics& more) {
  if (total.expert_tokens.empty()) {
    total = more;
    return;
  }
  auto add = [](std::vector<std::vector<std::int64_t>>& into, const std::vector<std::vector<std::int64_t>>& from) {
    for (std::size_t l = 0; l < std::min(into.size(), from.size()); ++l)
      for (std::size_t e = 0; e < std::min(into[l].size(), from[l].size()); ++e) into[l][e] += from[l][e];
  };
  add(total.expert_tokens, more.expert_tokens);
  add(total.expert_rows, more.expert_rows);
  total.aux_loss_sum += more.aux_loss_sum;
  total.z_loss_sum += more.z_loss_sum;
  total.layer_passes += more.layer_passes;
  if (!more.expert_bias_spread.empty()) total.expert_bias_spread = more.expert_bias_spread;
}

double busiest_expert_load(const std::vector<std::int64_t>& expert_tokens) {
  if (expert_tokens.empty()) return 0.0;
  const std::int64_t sum = std::accumulate(expert_tokens.begin(), expert_tokens.end(), std::int64_t{0});
  if (sum == 0) return 0.0;
  const std::int64_t busiest = *std::max_element(expert_tokens.begin(), expert_tokens.end());
  return static_cast<double>(busiest) * static_cast<double>(expert_tokens.size()) / static_cast<double>(sum);
}

MoeStatistics MoeLayer::take_statistics() {
  MoeStatistics taken = statistics_;
  for (auto& layer : statistics_.expert_tokens) std::fill(layer.begin(), layer.end(), 0);
  for (auto& layer : statistics_.expert_rows) std::fill(layer.begin(), layer.end(), 0);
  statistics_.aux_loss_sum = statistics_.z_loss_sum = 0.0;
  statistics_.layer_passes = 0;
  return taken;
}

}  // namespace sextant::engine::transformer
