#include "engine/transformer.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>

#include "engine/comm/communicator.h"
#include "engine/tensor_parallel/chunked_collectives.h"
#include "kernels/bias_gradient.h"
#include "kernels/cross_entropy.h"
#include "kernels/cuda_check.h"
#include "kernels/embedding.h"
#include "kernels/flash_attention.h"
#include "kernels/layernorm.h"
#include "kernels/residual.h"
#include "kernels/rmsnorm.h"
#include "kernels/vocab_parallel_cross_entropy.h"
#include "kernels/head_copy.h"
#include "kernels/rope.h"
#include "kernels/swiglu.h"

namespace sextant::engine {

namespace {
using kernels::GemmArgs;
using kernels::GemmEpilogue;
using kernels::GemmOutput;
using kernels::Transpose;

std::size_t to_size(std::int64_t n) { return static_cast<std::size_t>(n); }
}  // namespace

template <typename T>
void Transformer::reserve(T*& member, std::string name, MemoryCategory category, std::size_t count,
                          ArenaPlan& plan) {
  const ArenaPlan::Slot slot = plan.add(std::move(name), category, count * sizeof(T), stored_);
  binders_.push_back([&member, slot](const DeviceArena& arena) { member = arena.get<T>(slot); });
}

template <typename T>
void Transformer::reserve_shared(T*& member, const std::string& name, MemoryCategory category, std::size_t count,
                                 ArenaPlan& plan) {
  const ArenaPlan::Slot slot = plan.add_shared(name, category, count * sizeof(T));
  binders_.push_back([&member, slot](const DeviceArena& arena) { member = arena.get<T>(slot); });
}

Transformer::Transformer(const TransformerShape& shape, sim::Recompute recompute,
                         int microbatches, ArenaPlan& plan, const StageParts& parts, ArenaPlan::Place stored)
    : shape_(shape), recompute_(recompute), microbatches_(microbatches), stored_(stored) {
  const TransformerShape& s = shape_;
  const std::size_t T = to_size(s.tokens());
  const std::size_t Ts = to_size(s.norm_tokens());  // the residual stream's rows (T / tp under sp)
  const std::size_t h = to_size(s.hidden);
  constexpr auto kAct = MemoryCategory::kActivations;
  constexpr auto kOther = MemoryCategory::kOther;
  // Widths in the attention kernels' layout (padded heads: kernels/head_copy.h).
  const std::size_t q_heads_width = to_size(s.heads) * to_size(s.attention_head_dim());
  const std::size_t kv_heads_width = to_size(s.kv_heads) * to_size(s.attention_head_dim());

  // The residual stream's gradient: written by the backward's first task (or
  // received from the next stage), sent to the previous stage after its last;
  // first of this object's blocks (the constructor's comment in transformer.h).
  reserve(dx_, "grad.residual", kAct, Ts * h, plan);
  // Stored activations: one set per layer, or, under full recomputation, each
  // layer's input plus one shared set the recomputed forward writes.
  layers_.resize(to_size(s.num_layers));
  const bool full = recompute_ == sim::Recompute::kFull;
  for (int i = 0; i < s.num_layers; ++i) {
    LayerActivations& a = layers_[to_size(i)];
    const std::string p = "layers." + std::to_string(i) + ".";
    reserve(a.input, p + "input", kAct, Ts * h, plan);
    if (full && i > 0) continue;  // bound to layer 0's set in bind()
    reserve(a.norm1, p + "norm1", kAct, Ts * h, plan);
    reserve(a.norm1_mean, p + "norm1_mean", kAct, Ts, plan);
    reserve(a.norm1_rstd, p + "norm1_rstd", kAct, Ts, plan);
    if (s.attention_padded()) {
      reserve(a.q, p + "q", kAct, T * q_heads_width, plan);
      reserve(a.k, p + "k", kAct, T * kv_heads_width, plan);
      reserve(a.v, p + "v", kAct, T * kv_heads_width, plan);
    } else {
      reserve(a.qkv, p + "qkv", kAct, T * to_size(s.qkv_width()), plan);  // q, k, v: bind()
    }
    reserve(a.attn, p + "attn", kAct, T * q_heads_width, plan);
    reserve(a.lse, p + "lse", kAct, T * to_size(s.heads), plan);
    reserve(a.mid, p + "mid", kAct, Ts * h, plan);
    reserve(a.norm2, p + "norm2", kAct, Ts * h, plan);
    reserve(a.norm2_mean, p + "norm2_mean", kAct, Ts, plan);
    reserve(a.norm2_rstd, p + "norm2_rstd", kAct, Ts, plan);
    reserve(a.fc1_out, p + "fc1_out", kAct, T * to_size(s.fc1_width()), plan);
    reserve(a.act, p + "act", kAct, T * to_size(s.ffn_hidden), plan);
  }
  reserve(final_input_, "final_norm.input", kAct, Ts * h, plan);
  if (parts.output) {
    reserve(final_norm_, "final_norm", kAct, T * h, plan);  // under sp, all-gathered
    reserve(final_mean_, "final_norm_mean", kAct, Ts, plan);
    reserve(final_rstd_, "final_norm_rstd", kAct, Ts, plan);
    reserve(logits_, "logits", kAct, T * to_size(s.vocab), plan);
  }

  // Gradients of activations: one micro-batch's worth, reused by every layer.
  reserve_shared(scratch_, "scratch", kAct, T * h, plan);
  if (s.sequence_parallel) {
    // Sequence parallelism: the norms' outputs all-gathered for the
    // column-parallel GEMMs, the residual stream's gradient all-gathered for
    // the row-parallel ones' backward, and the reduce-scattered input
    // gradients; one micro-batch's worth, reused by every layer.
    reserve_shared(gathered_, "sp.gathered_norm", kAct, T * h, plan);
    reserve_shared(final_norm_shard_, "sp.final_norm_shard", kAct, Ts * h, plan);  // the output's forward only
    reserve_shared(dx_full_, "sp.grad.residual_gathered", kAct, T * h, plan);
    reserve_shared(scratch_shard_, "sp.scratch_shard", kAct, Ts * h, plan);
    if (s.tp_comm_overlap) reserve_shared(overlap_staging_, "sp.overlap_staging", kAct, T * h, plan);
  }
  if (s.tp > 1) {
    // Vocabulary-parallel cross entropy (kernels/vocab_parallel_cross_entropy.h).
    reserve_shared(row_max_local_, "ce.row_max_local", kAct, T, plan);
    reserve_shared(row_max_all_, "ce.row_max_gathered", kAct, T * to_size(s.tp), plan);
    reserve_shared(row_max_, "ce.row_max", kAct, T, plan);
    reserve_shared(ce_partials_, "ce.partials", kAct, 2 * T, plan);
  }
  reserve_shared(dattn_, "grad.attn", kAct, T * to_size(s.q_width()), plan);
  reserve_shared(qkv_, "qkv (fused, and its gradient)", kAct, T * to_size(s.qkv_width()), plan);
  if (s.attention_padded()) {
    reserve_shared(dq_, "grad.q", kAct, T * q_heads_width, plan);
    reserve_shared(dk_, "grad.k", kAct, T * kv_heads_width, plan);
    reserve_shared(dv_, "grad.v", kAct, T * kv_heads_width, plan);
    reserve_shared(attn_flat_, "attn (unpadded)", kAct, T * to_size(s.q_width()), plan);
    reserve_shared(dattn_padded_, "grad.attn (padded)", kAct, T * q_heads_width, plan);
  }
  reserve_shared(dact_, "grad.act", kAct, T * to_size(s.ffn_hidden), plan);
  if (!s.gelu) reserve_shared(dfc1_, "grad.fc1_out", kAct, T * to_size(s.fc1_width()), plan);

  const std::size_t step_tokens = T * to_size(microbatches_);
  if (parts.embedding) reserve_shared(tokens_, "tokens", kOther, step_tokens, plan);
  if (parts.output) {
    reserve_shared(targets_, "targets", kOther, step_tokens, plan);
    reserve_shared(losses_, "losses", kOther, step_tokens, plan);
  }

  const int rows = static_cast<int>(T);
  norm_workspace_bytes_ = s.layernorm ? kernels::layernorm_backward_workspace_bytes(rows, s.hidden)
                                      : kernels::rmsnorm_backward_workspace_bytes(rows, s.hidden);
  reserve_shared(norm_workspace_, "workspace.norm", kOther,
          norm_workspace_bytes_, plan);
  const int widest_bias = std::max({s.qkv_width(), s.fc1_width(), s.hidden});
  bias_workspace_bytes_ = kernels::bias_gradient_workspace_bytes(rows, widest_bias);
  reserve_shared(bias_workspace_, "workspace.bias_gradient", kOther, bias_workspace_bytes_, plan);
  if (parts.embedding) {
    embedding_workspace_bytes_ =
        s.tp > 1 ? kernels::embedding_backward_shard_workspace_bytes(s.micro_batch, s.seq, s.vocab)
                 : kernels::embedding_backward_workspace_bytes(s.micro_batch, s.seq, s.vocab);
    reserve_shared(embedding_workspace_, "workspace.embedding", kOther, embedding_workspace_bytes_, plan);
  }
  attention_workspace_bytes_ = kernels::flash_attention_backward_workspace_bytes(attention_shape());
  reserve_shared(attention_workspace_, "workspace.attention", kOther,
          attention_workspace_bytes_, plan);
  reserve_shared(gemm_workspace_, "workspace.cublaslt", kOther,
          kernels::kCublasLtWorkspaceBytes, plan);
}

Transformer::~Transformer() {
  if (tp_ready_ != nullptr) cudaEventDestroy(tp_ready_);
  if (tp_done_ != nullptr) cudaEventDestroy(tp_done_);
  if (norm_gathered_ != nullptr) cudaEventDestroy(norm_gathered_);
  if (input_grad_scattered_ != nullptr) cudaEventDestroy(input_grad_scattered_);
}

void Transformer::bind(const DeviceArena& arena, const ParameterLayout& layout,
                       ParameterBuffers parameters, cudaStream_t stream,
                       comm::Communicator* tensor_parallel) {
  if (tensor_parallel != nullptr && tensor_parallel->size() > 1) {
    tp_ = tensor_parallel;
    SEXTANT_CUDA_CHECK(cudaEventCreateWithFlags(&tp_ready_, cudaEventDisableTiming));
    SEXTANT_CUDA_CHECK(cudaEventCreateWithFlags(&tp_done_, cudaEventDisableTiming));
  }
  for (const auto& bind_one : binders_) bind_one(arena);
  if (!shape_.attention_padded()) {
    for (LayerActivations& a : layers_) {
      if (a.qkv == nullptr) continue;  // full recomputation: set from layer 0 below
      a.q = a.qkv;
      a.k = a.qkv + shape_.q_width();
      a.v = a.k + shape_.kv_width();
    }
  }
  if (recompute_ == sim::Recompute::kFull) {
    for (std::size_t i = 1; i < layers_.size(); ++i) {
      Bf16* input = layers_[i].input;
      layers_[i] = layers_[0];
      layers_[i].input = input;
    }
  }
  layout_ = &layout;
  params_ = parameters;
  stream_ = stream;
  gemm_ = std::make_unique<kernels::CublasLtGemm>(gemm_workspace_, kernels::kCublasLtWorkspaceBytes);
  if (tp_ != nullptr && shape_.sequence_parallel) {
    SEXTANT_CUDA_CHECK(cudaEventCreateWithFlags(&norm_gathered_, cudaEventDisableTiming));
    SEXTANT_CUDA_CHECK(cudaEventCreateWithFlags(&input_grad_scattered_, cudaEventDisableTiming));
  }
  if (tp_ != nullptr && shape_.tp_comm_overlap)
    chunked_ = std::make_unique<tensor_parallel::ChunkedCollectives>(*tp_, stream_);
}

kernels::FlashAttentionShape Transformer::attention_shape() const {
  kernels::FlashAttentionShape a{};
  a.batch = shape_.micro_batch;
  a.seq = shape_.seq;
  a.heads = shape_.heads;
  a.kv_heads = shape_.kv_heads;
  a.head_dim = shape_.attention_head_dim();
  if (!shape_.attention_padded()) {  // slices of the fused QKV rows
    a.q_row_stride = shape_.qkv_width();
    a.kv_row_stride = shape_.qkv_width();
  }
  return a;
}

namespace {
// sqrt(padded / head_dim): scaling Q by it turns the kernel's 1/sqrt(padded)
// softmax scale into the model's 1/sqrt(head_dim) (kernels/head_copy.h).
float padded_query_scale(const TransformerShape& s) {
  return static_cast<float>(std::sqrt(static_cast<double>(s.attention_head_dim()) / s.head_dim));
}
}  // namespace

void Transformer::split_qkv(LayerActivations& a) {
  const TransformerShape& s = shape_;
  const int pd = s.attention_head_dim();
  kernels::HeadCopy c;
  c.tokens = s.tokens();
  c.src_row = s.qkv_width();
  c.src_head = s.head_dim;
  c.dst_head = pd;
  c.copy_width = s.head_dim;
  c.dst_width = pd;
  c.heads = s.heads;
  c.dst_row = s.heads * pd;
  c.scale = padded_query_scale(s);
  kernels::copy_heads(a.q, qkv_, c, stream_);
  c.heads = s.kv_heads;
  c.dst_row = s.kv_heads * pd;
  c.scale = 1.0f;
  kernels::copy_heads(a.k, qkv_ + s.q_width(), c, stream_);
  kernels::copy_heads(a.v, qkv_ + s.q_width() + s.kv_width(), c, stream_);
}

void Transformer::merge_qkv_gradients() {
  const TransformerShape& s = shape_;
  const int pd = s.attention_head_dim();
  kernels::HeadCopy c;
  c.tokens = s.tokens();
  c.src_head = pd;
  c.dst_row = s.qkv_width();
  c.dst_head = s.head_dim;
  c.copy_width = s.head_dim;
  c.dst_width = s.head_dim;
  c.heads = s.heads;
  c.src_row = s.heads * pd;
  c.scale = padded_query_scale(s);  // d(loss)/dq = scale * d(loss)/d(scaled q)
  kernels::copy_heads(qkv_, dq_, c, stream_);
  c.heads = s.kv_heads;
  c.src_row = s.kv_heads * pd;
  c.scale = 1.0f;
  kernels::copy_heads(qkv_ + s.q_width(), dk_, c, stream_);
  kernels::copy_heads(qkv_ + s.q_width() + s.kv_width(), dv_, c, stream_);
}

const Bf16* Transformer::projection_input(const LayerActivations& a) {
  const TransformerShape& s = shape_;
  if (!s.attention_padded()) return a.attn;
  kernels::HeadCopy c;
  c.tokens = s.tokens();
  c.heads = s.heads;
  c.src_row = s.heads * s.attention_head_dim();
  c.src_head = s.attention_head_dim();
  c.dst_row = s.q_width();
  c.dst_head = s.head_dim;
  c.copy_width = s.head_dim;
  c.dst_width = s.head_dim;
  kernels::copy_heads(attn_flat_, a.attn, c, stream_);
  return attn_flat_;
}

kernels::RopeShape Transformer::rope_shape() const {
  kernels::RopeShape r{};
  r.batch = shape_.micro_batch;
  r.seq = shape_.seq;
  r.heads = shape_.heads;
  r.kv_heads = shape_.kv_heads;
  r.head_dim = shape_.head_dim;
  r.row_stride = shape_.qkv_width();
  r.theta = shape_.rope_theta;
  return r;
}

const Bf16* Transformer::weight(int tensor) const {
  if (tensor == LayerTensors::kAbsent) return nullptr;
  return params_.weights + layout_->tensor(tensor).offset;
}

float* Transformer::gradient(int tensor) const {
  if (tensor == LayerTensors::kAbsent) return nullptr;
  return params_.gradients + layout_->tensor(tensor).offset;
}

void Transformer::norm_forward(Bf16* out, float* mean, float* rstd, const Bf16* inp, int gamma,
                               int beta) {
  const int rows = static_cast<int>(shape_.norm_tokens());
  if (shape_.layernorm)
    kernels::layernorm_forward(out, mean, rstd, inp, weight(gamma), weight(beta), rows,
                               shape_.hidden, shape_.norm_eps, stream_);
  else
    kernels::rmsnorm_forward(out, rstd, inp, weight(gamma), rows, shape_.hidden, shape_.norm_eps,
                             stream_);
}

void Transformer::norm_backward(Bf16* dinp, const Bf16* dout, const Bf16* inp, int gamma,
                                int beta, const float* mean, const float* rstd,
                                const Bf16* residual_grad, int next_bias) {
  const int rows = static_cast<int>(shape_.norm_tokens());
  kernels::NormBackwardOptions options;
  options.residual_grad = residual_grad;
  options.accumulate_param_grads = accumulate_gradients_;
  if (residual_biases_from_norms()) options.dinp_column_sums = gradient(next_bias);
  if (shape_.layernorm)
    kernels::layernorm_backward(dinp, gradient(gamma), gradient(beta), dout, inp, weight(gamma),
                                mean, rstd, rows, shape_.hidden, norm_workspace_,
                                norm_workspace_bytes_, stream_, options);
  else
    kernels::rmsnorm_backward(dinp, gradient(gamma), dout, inp, weight(gamma), rstd, rows,
                              shape_.hidden, norm_workspace_, norm_workspace_bytes_, stream_,
                              options);
}

template <typename Collective>
void Transformer::on_tp_stream(Collective&& collective) {
  // The tp stream waits for the work queued on stream_ so far (the
  // collective's inputs), and stream_'s later work for the collective.
  const bool own_stream = tp_->stream() != stream_;
  if (own_stream) {
    SEXTANT_CUDA_CHECK(cudaEventRecord(tp_ready_, stream_));
    SEXTANT_CUDA_CHECK(cudaStreamWaitEvent(tp_->stream(), tp_ready_, 0));
  }
  collective(*tp_);
  if (own_stream) {
    SEXTANT_CUDA_CHECK(cudaEventRecord(tp_done_, tp_->stream()));
    SEXTANT_CUDA_CHECK(cudaStreamWaitEvent(stream_, tp_done_, 0));
  }
}

void Transformer::tp_all_reduce(Bf16* data, std::size_t count) {
  on_tp_stream([&](comm::Communicator& c) { c.all_reduce_sum(data, data, count, comm::DataType::kBf16); });
}

void Transformer::tp_all_gather(const Bf16* shard, Bf16* gathered) {
  const std::size_t count = to_size(shape_.norm_tokens() * shape_.hidden);
  on_tp_stream([&](comm::Communicator& c) { c.all_gather(shard, gathered, count, comm::DataType::kBf16); });
}

void Transformer::tp_reduce_scatter(const Bf16* full, Bf16* shard) {
  const std::size_t count = to_size(shape_.norm_tokens() * shape_.hidden);
  on_tp_stream([&](comm::Communicator& c) { c.reduce_scatter_sum(full, shard, count, comm::DataType::kBf16); });
}

std::size_t Transformer::chunk_elements() const { return to_size(shape_.norm_tokens() * shape_.hidden); }

namespace {
// Rows [first_row, first_row + rows) of a product over T rows: A (not
// transposed), C, C's source and the GELU input are row-major with T rows,
// so a row block is a pointer offset (rows are independent in a GEMM).
GemmArgs row_block(const GemmArgs& g, int first_row, int rows) {
  GemmArgs part = g;
  const std::size_t a_offset = to_size(first_row) * to_size(g.k);
  const std::size_t c_offset = to_size(first_row) * to_size(g.n);
  part.m = rows;
  part.a = g.a + a_offset;
  part.c = static_cast<Bf16*>(g.c) + c_offset;
  if (g.c_source != nullptr) part.c_source = static_cast<const Bf16*>(g.c_source) + c_offset;
  if (g.gelu_input != nullptr) part.gelu_input = g.gelu_input + c_offset;
  return part;
}

// Whether every row block of `rows` rows starts 16-byte aligned, as cuBLASLt's
// operands must (kernels::gemm_check): rows·k and rows·n bf16 values a
// multiple of 8. Otherwise the product runs whole, after the last chunk.
bool row_blocks_aligned(const GemmArgs& g, int rows) {
  return (to_size(rows) * to_size(g.k)) % 8 == 0 && (to_size(rows) * to_size(g.n)) % 8 == 0;
}
}  // namespace

void Transformer::gemm_on_gathered(GemmArgs g) {
  if (!gather_pending_) {
    gemm_->run(g, stream_);
    return;
  }
  gather_pending_ = false;
  // Chunk by chunk in ring order (overlap_schedule.h): step i's GEMM runs on
  // stream_ while step i + 1's chunk travels on the tp stream.
  run_on_gathered_chunks(g);
}

void Transformer::run_on_gathered_chunks(const GemmArgs& g) {
  const int rows = static_cast<int>(shape_.norm_tokens());
  const bool chunked = row_blocks_aligned(g, rows);
  for (int step = 0; step < shape_.tp; ++step) {
    const int chunk = chunked_->wait_gathered(step);
    if (chunked) gemm_->run(row_block(g, chunk * rows, rows), stream_);
  }
  if (!chunked) gemm_->run(g, stream_);
}

void Transformer::gemm_then_scatter(GemmArgs g) {
  if (chunked_ == nullptr) {
    gemm_->run(g, stream_);
    return;
  }
  // Chunk j's rows, then their partial sums off to rank j while chunk j + 1 computes.
  const int rows = static_cast<int>(shape_.norm_tokens());
  const bool chunked = row_blocks_aligned(g, rows);
  if (!chunked) gemm_->run(g, stream_);
  for (int chunk = 0; chunk < shape_.tp; ++chunk) {
    if (chunked) gemm_->run(row_block(g, chunk * rows, rows), stream_);
    chunked_->reduce_chunk(chunk, static_cast<const Bf16*>(g.c), overlap_staging_, chunk_elements());
  }
  scatter_pending_ = true;
}

void Transformer::scatter_scratch(Bf16* shard) {
  if (!scatter_pending_) {
    tp_reduce_scatter(scratch_, shard);
    return;
  }
  scatter_pending_ = false;
  chunked_->finish_reduce_scatter(scratch_, overlap_staging_, shard, chunk_elements());
}

void Transformer::row_linear_backward(Bf16* din, const Bf16* dout, const Bf16* in, int weight_tensor,
                                      int bias_tensor, int in_width, int out_width, Bf16* gelu_input) {
  if (!dy_gather_pending_) {
    linear_backward(din, dout, in, weight_tensor, bias_tensor, in_width, out_width, gelu_input);
    return;
  }
  dy_gather_pending_ = false;
  // The input gradient's rows as the output gradient's chunks arrive (ring
  // order, as in the forward: Transformer Engine's split pipelined all-gather,
  // which Megatron's --tp-comm-overlap uses for proj's and fc2's dgrad), then
  // the weight gradient, which needs every token's.
  run_on_gathered_chunks(input_gradient_args(din, dout, weight_tensor, in_width, out_width, gelu_input));
  weight_gradient(dout, in, weight_tensor, bias_tensor, in_width, out_width);
}

void Transformer::column_linear_backward(Bf16* din, const Bf16* dout, const Bf16* in, int weight_tensor,
                                         int bias_tensor, int in_width, int out_width) {
  if (!norm_gather_pending_) {
    linear_backward(din, dout, in, weight_tensor, bias_tensor, in_width, out_width);
    return;
  }
  norm_gather_pending_ = false;
  // The input gradient first; its reduce-scatter onto this rank's tokens (the
  // task after this one's collective) runs on the tp stream while the weight
  // gradient computes — Transformer Engine's bulk overlap of the dgrad
  // reduce-scatter with the wgrad GEMM (BULK_OVERLAP_RS in
  // transformer_engine/common/userbuffers/comm_gemm_overlap.h, which Megatron's
  // --tp-comm-overlap turns on for these layers); the collective is the
  // backward of Korthikanti et al. 2022's g operator (Sec. 4.2.2). The same
  // products and collective as linear_backward and the reduce-scatter task, in
  // another order: the same results, bit for bit.
  input_gradient(din, dout, weight_tensor, in_width, out_width, nullptr);
  SEXTANT_CUDA_CHECK(cudaEventRecord(tp_ready_, stream_));
  SEXTANT_CUDA_CHECK(cudaStreamWaitEvent(tp_->stream(), tp_ready_, 0));
  tp_->reduce_scatter_sum(din, scratch_shard_, chunk_elements(), comm::DataType::kBf16);
  SEXTANT_CUDA_CHECK(cudaEventRecord(input_grad_scattered_, tp_->stream()));
  input_grad_scatter_pending_ = true;
  SEXTANT_CUDA_CHECK(cudaStreamWaitEvent(stream_, norm_gathered_, 0));  // `in`: gathered_
  weight_gradient(dout, in, weight_tensor, bias_tensor, in_width, out_width);
}

bool Transformer::adds_replicated_terms() const { return tp_ == nullptr || tp_->rank() == 0; }

bool Transformer::residual_biases_from_norms() const {
  return shape_.bias && shape_.hidden <= kernels::kNormBackwardMaxSummedCols;
}

// Y (T, out) = X (T, in) W^T (+ b) (+ R): cuBLASLt with the bias in its
// epilogue and the residual R read as its C (beta 1).
GemmArgs Transformer::linear_args(Bf16* out, const Bf16* in, int weight_tensor, int bias_tensor,
                                  int in_width, int out_width, const Bf16* residual) const {
  GemmArgs g;
  g.m = static_cast<int>(shape_.tokens());
  g.n = out_width;
  g.k = in_width;
  g.a = in;
  g.b = weight(weight_tensor);
  g.transpose_b = Transpose::kYes;
  g.c = out;
  if (bias_tensor != LayerTensors::kAbsent) {
    g.epilogue = GemmEpilogue::kBias;
    g.bias = weight(bias_tensor);
  }
  if (residual != nullptr) {
    g.c_source = residual;
    g.beta = 1.0f;
  }
  return g;
}

void Transformer::linear_forward(Bf16* out, const Bf16* in, int weight_tensor, int bias_tensor,
                                 int in_width, int out_width, const Bf16* residual) {
  gemm_->run(linear_args(out, in, weight_tensor, bias_tensor, in_width, out_width, residual), stream_);
}

void Transformer::linear_backward(Bf16* din, const Bf16* dout, const Bf16* in, int weight_tensor,
                                  int bias_tensor, int in_width, int out_width, Bf16* gelu_input) {
  weight_gradient(dout, in, weight_tensor, bias_tensor, in_width, out_width);
  if (din != nullptr) input_gradient(din, dout, weight_tensor, in_width, out_width, gelu_input);
}

void Transformer::weight_gradient(const Bf16* dout, const Bf16* in, int weight_tensor, int bias_tensor,
                                  int in_width, int out_width) {
  const int T = static_cast<int>(shape_.tokens());
  // dW (out, in) (+)= dY^T (out, T) X (T, in), in fp32 (beta 1 accumulates).
  GemmArgs dw;
  dw.m = out_width;
  dw.n = in_width;
  dw.k = T;
  dw.a = dout;
  dw.transpose_a = Transpose::kYes;
  dw.b = in;
  dw.c = gradient(weight_tensor);
  dw.c_type = GemmOutput::kFp32;
  dw.beta = gradient_beta();
  gemm_->run(dw, stream_);
  if (bias_tensor != LayerTensors::kAbsent)
    kernels::bias_gradient(gradient(bias_tensor), dout, T, out_width, accumulate_gradients_, bias_workspace_,
                           bias_workspace_bytes_, stream_);
}

void Transformer::input_gradient(Bf16* din, const Bf16* dout, int weight_tensor, int in_width, int out_width,
                                 Bf16* gelu_input) {
  gemm_->run(input_gradient_args(din, dout, weight_tensor, in_width, out_width, gelu_input), stream_);
}

GemmArgs Transformer::input_gradient_args(Bf16* din, const Bf16* dout, int weight_tensor, int in_width,
                                          int out_width, Bf16* gelu_input) const {
  // dX (T, in) = dY (T, out) W (out, in).
  GemmArgs dx;
  dx.m = static_cast<int>(shape_.tokens());
  dx.n = in_width;
  dx.k = out_width;
  dx.a = dout;
  dx.b = weight(weight_tensor);
  dx.c = din;
  if (gelu_input != nullptr) {
    dx.epilogue = GemmEpilogue::kGeluBackward;
    dx.gelu_input = gelu_input;
  }
  return dx;
}

void Transformer::embedding_forward(int mb) {
  const TransformerShape& s = shape_;
  const std::int32_t* tokens = tokens_ + static_cast<std::ptrdiff_t>(mb) * s.tokens();
  Bf16* out = layers_.empty() ? final_input_ : layers_[0].input;
  if (tp_ == nullptr) {
    kernels::embedding_forward(out, tokens, weight(layout_->wte()), weight(layout_->wpe()), s.micro_batch,
                               s.seq, s.hidden, stream_);
    return;
  }
  // Vocabulary-parallel (Shoeybi et al. 2019, Sec. 3): each rank looks up the
  // tokens of its rows (zeros for the others'), rank 0 adds the positions, and
  // the sum over the group is the embedding: all-reduced, or under sp
  // reduce-scattered onto each rank's tokens (Korthikanti et al. 2022).
  Bf16* partial = s.sequence_parallel ? scratch_ : out;
  kernels::embedding_forward_shard(partial, tokens, weight(layout_->wte()),
                                   adds_replicated_terms() ? weight(layout_->wpe()) : nullptr, s.micro_batch,
                                   s.seq, s.hidden, s.vocab_start(tp_->rank()), s.vocab, stream_);
  if (s.sequence_parallel)
    tp_reduce_scatter(partial, out);
  else
    tp_all_reduce(out, to_size(s.tokens() * s.hidden));
}

void Transformer::attention_forward(int layer, bool /*recompute*/) {
  const TransformerShape& s = shape_;
  const LayerTensors& w = layout_->layer(layer);
  LayerActivations& a = layers_[to_size(layer)];
  // Under sp the norm ran in the all-gather task before this one, which left
  // its output for all tokens in gathered_.
  if (!s.sequence_parallel)
    norm_forward(a.norm1, a.norm1_mean, a.norm1_rstd, a.input, w.norm1_gamma, w.norm1_beta);
  const Bf16* norm1 = s.sequence_parallel ? gathered_ : a.norm1;
  Bf16* qkv = s.attention_padded() ? qkv_ : a.qkv;
  gemm_on_gathered(linear_args(qkv, norm1, w.qkv_weight, w.qkv_bias, s.hidden, s.qkv_width()));
  if (!s.learned_positions) kernels::rope_forward(qkv, rope_shape(), stream_);
  if (s.attention_padded()) split_qkv(a);
  kernels::flash_attention_forward(a.attn, a.lse, a.q, a.k, a.v, attention_shape(), stream_);
  if (s.sequence_parallel) {  // partial sums, reduce-scattered by the next task
    const Bf16* proj_in = projection_input(a);
    gemm_then_scatter(linear_args(scratch_, proj_in, w.proj_weight, LayerTensors::kAbsent, s.q_width(), s.hidden));
    return;
  }
  // Row-parallel under tp: the partial products summed over the group by the
  // all-reduce task after this one, the bias and residual added by one rank.
  const bool once = adds_replicated_terms();
  linear_forward(a.mid, projection_input(a), w.proj_weight, once ? w.proj_bias : LayerTensors::kAbsent,
                 s.q_width(), s.hidden, once ? a.input : nullptr);
}

void Transformer::mlp_forward(int layer, bool recompute) {
  const TransformerShape& s = shape_;
  const LayerTensors& w = layout_->layer(layer);
  LayerActivations& a = layers_[to_size(layer)];
  if (!s.sequence_parallel)
    norm_forward(a.norm2, a.norm2_mean, a.norm2_rstd, a.mid, w.norm2_gamma, w.norm2_beta);
  const Bf16* norm2 = s.sequence_parallel ? gathered_ : a.norm2;
  if (s.gelu) {
    // fc1 with bias and GELU fused in cuBLASLt's epilogue, its input saved for
    // the backward (Megatron's bias_gelu fusion).
    GemmArgs g;
    g.m = static_cast<int>(s.tokens());
    g.n = s.ffn_hidden;
    g.k = s.hidden;
    g.a = norm2;
    g.b = weight(w.fc1_weight);
    g.transpose_b = Transpose::kYes;
    g.c = a.act;
    g.epilogue = w.fc1_bias != LayerTensors::kAbsent ? GemmEpilogue::kBiasGelu : GemmEpilogue::kGelu;
    g.bias = weight(w.fc1_bias);
    g.gelu_input = a.fc1_out;
    gemm_on_gathered(g);
  } else {
    gemm_on_gathered(linear_args(a.fc1_out, norm2, w.fc1_weight, w.fc1_bias, s.hidden, s.fc1_width()));
    kernels::swiglu_forward(a.act, a.fc1_out, static_cast<int>(s.tokens()), s.ffn_hidden, stream_);
  }
  if (recompute) return;  // the next layer's input is still stored
  if (s.sequence_parallel) {  // partial sums, reduce-scattered by the next task
    gemm_then_scatter(linear_args(scratch_, a.act, w.fc2_weight, LayerTensors::kAbsent, s.ffn_hidden, s.hidden));
    return;
  }
  const bool once = adds_replicated_terms();  // row-parallel under tp, as proj
  linear_forward(next_input(layer), a.act, w.fc2_weight, once ? w.fc2_bias : LayerTensors::kAbsent,
                 s.ffn_hidden, s.hidden, once ? a.mid : nullptr);
}

Bf16* Transformer::next_input(int layer) const {
  return layer + 1 < shape_.num_layers ? layers_[to_size(layer + 1)].input : final_input_;
}

void Transformer::output_forward(int mb, float loss_scale) {
  const TransformerShape& s = shape_;
  const std::ptrdiff_t first = static_cast<std::ptrdiff_t>(mb) * s.tokens();
  const int T = static_cast<int>(s.tokens());
  if (s.sequence_parallel) {
    // The norm on this rank's tokens, all-gathered for the output layer.
    norm_forward(final_norm_shard_, final_mean_, final_rstd_, final_input_, layout_->final_norm_gamma(),
                 layout_->final_norm_beta());
    tp_all_gather(final_norm_shard_, final_norm_);
  } else {
    norm_forward(final_norm_, final_mean_, final_rstd_, final_input_, layout_->final_norm_gamma(),
                 layout_->final_norm_beta());
  }
  linear_forward(logits_, final_norm_, layout_->lm_head(), LayerTensors::kAbsent, s.hidden, s.vocab);
  if (tp_ == nullptr) {
    kernels::softmax_cross_entropy(losses_ + first, logits_, logits_, targets_ + first, T, s.vocab, loss_scale,
                                   stream_);
    return;
  }
  // Vocabulary-parallel cross entropy: this rank's logits are its vocabulary
  // rows' columns; the maxima travel by all-gather, the sums of exponentials
  // and the target logits by an all-reduce (kernels/vocab_parallel_cross_entropy.h).
  const int start = s.vocab_start(tp_->rank());
  kernels::vocab_parallel_row_max(row_max_local_, logits_, T, s.vocab, stream_);
  on_tp_stream([&](comm::Communicator& c) {
    c.all_gather(row_max_local_, row_max_all_, to_size(T), comm::DataType::kFp32);
  });
  kernels::vocab_parallel_partials(ce_partials_, row_max_, row_max_all_, s.tp, logits_, targets_ + first, T,
                                   s.vocab, start, stream_);
  on_tp_stream([&](comm::Communicator& c) {
    c.all_reduce_sum(ce_partials_, ce_partials_, 2 * to_size(T), comm::DataType::kFp32);
  });
  kernels::vocab_parallel_loss_and_gradient(losses_ + first, logits_, logits_, ce_partials_, row_max_,
                                            targets_ + first, T, s.vocab, start, loss_scale, stream_);
}

void Transformer::output_backward() {
  const TransformerShape& s = shape_;
  // Under tp each rank's input gradient is its vocabulary rows' share: summed
  // over the group (all-reduced, or reduce-scattered onto its tokens under sp).
  linear_backward(scratch_, logits_, final_norm_, layout_->lm_head(), LayerTensors::kAbsent,
                  s.hidden, s.vocab);
  const Bf16* dnorm = scratch_;
  if (s.sequence_parallel) {
    tp_reduce_scatter(scratch_, scratch_shard_);
    dnorm = scratch_shard_;
  } else if (tp_ != nullptr) {
    tp_all_reduce(scratch_, to_size(s.tokens() * s.hidden));
  }
  // The residual stream's gradient starts here: written, not added.
  const int last_fc2_bias = s.num_layers > 0 ? layout_->layer(s.num_layers - 1).fc2_bias
                                            : LayerTensors::kAbsent;
  norm_backward(dx_, dnorm, final_input_, layout_->final_norm_gamma(),
                layout_->final_norm_beta(), final_mean_, final_rstd_, nullptr, last_fc2_bias);
}

void Transformer::mlp_backward(int layer) {
  const TransformerShape& s = shape_;
  const LayerTensors& w = layout_->layer(layer);
  const LayerActivations& a = layers_[to_size(layer)];
  const int T = static_cast<int>(s.tokens());
  // y = act W2^T + b2 feeds the residual: dy = dx (and b2's gradient, its column
  // sum, was summed by the norm backward that wrote dx, when it could; under
  // sp by the all-gather task, from this rank's tokens).
  const bool bias_here = !residual_biases_from_norms() && !s.sequence_parallel;
  const int fc2_bias = bias_here ? w.fc2_bias : LayerTensors::kAbsent;
  // Under sp: the residual stream's gradient and fc1's input, all-gathered by the task before.
  const Bf16* dy = s.sequence_parallel ? dx_full_ : dx_;
  const Bf16* norm2 = s.sequence_parallel ? gathered_ : a.norm2;
  if (s.gelu) {
    // dact_ = d(fc1_out): GELU's derivative applied in fc2's input-gradient
    // GEMM; fc1's bias gradient is then its column sum, as for any linear layer.
    row_linear_backward(dact_, dy, a.act, w.fc2_weight, fc2_bias, s.ffn_hidden, s.hidden, a.fc1_out);
    column_linear_backward(scratch_, dact_, norm2, w.fc1_weight, w.fc1_bias, s.hidden, s.fc1_width());
  } else {
    row_linear_backward(dact_, dy, a.act, w.fc2_weight, fc2_bias, s.ffn_hidden, s.hidden);
    kernels::swiglu_backward(dfc1_, dact_, a.fc1_out, T, s.ffn_hidden, stream_);
    column_linear_backward(scratch_, dfc1_, norm2, w.fc1_weight, w.fc1_bias, s.hidden, s.fc1_width());
  }
  // Under tp, fc1 is column-parallel and each rank's input gradient a partial
  // sum: the collective task after this one sums it and runs the norm's backward.
  if (tp_ == nullptr) mlp_norm_backward(layer, scratch_);
}

void Transformer::mlp_norm_backward(int layer, const Bf16* dnorm) {
  const LayerTensors& w = layout_->layer(layer);
  const LayerActivations& a = layers_[to_size(layer)];
  // dx += the norm's input gradient: the residual stream's gradient before the MLP.
  norm_backward(dx_, dnorm, a.mid, w.norm2_gamma, w.norm2_beta, a.norm2_mean, a.norm2_rstd, dx_,
                w.proj_bias);
}

void Transformer::attention_backward(int layer) {
  const TransformerShape& s = shape_;
  const LayerTensors& w = layout_->layer(layer);
  const LayerActivations& a = layers_[to_size(layer)];
  const bool bias_here = !residual_biases_from_norms() && !s.sequence_parallel;
  const int proj_bias = bias_here ? w.proj_bias : LayerTensors::kAbsent;
  const Bf16* dy = s.sequence_parallel ? dx_full_ : dx_;
  const Bf16* proj_in = projection_input(a);
  row_linear_backward(dattn_, dy, proj_in, w.proj_weight, proj_bias, s.q_width(), s.hidden);
  const Bf16* dout = dattn_;
  if (s.attention_padded()) {
    kernels::HeadCopy c;
    c.tokens = s.tokens();
    c.heads = s.heads;
    c.src_row = s.q_width();
    c.src_head = s.head_dim;
    c.dst_row = s.heads * s.attention_head_dim();
    c.dst_head = s.attention_head_dim();
    c.copy_width = s.head_dim;
    c.dst_width = s.attention_head_dim();
    kernels::copy_heads(dattn_padded_, dattn_, c, stream_);
    dout = dattn_padded_;
  }
  // Padded heads: gradients into the padded arrays, then merged into the fused
  // row; otherwise straight into their columns of the fused gradient.
  const bool padded = s.attention_padded();
  Bf16* dq = padded ? dq_ : qkv_;
  Bf16* dk = padded ? dk_ : qkv_ + s.q_width();
  Bf16* dv = padded ? dv_ : qkv_ + s.q_width() + s.kv_width();
  kernels::flash_attention_backward(dq, dk, dv, dout, a.q, a.k, a.v, a.attn, a.lse,
                                    attention_shape(), attention_workspace_,
                                    attention_workspace_bytes_, stream_);
  if (padded) merge_qkv_gradients();
  if (!s.learned_positions) kernels::rope_backward(qkv_, rope_shape(), stream_);
  const Bf16* norm1 = s.sequence_parallel ? gathered_ : a.norm1;
  column_linear_backward(scratch_, qkv_, norm1, w.qkv_weight, w.qkv_bias, s.hidden, s.qkv_width());
  // Column-parallel QKV under tp: the collective task after this one sums the
  // input gradient and runs the norm's backward.
  if (tp_ == nullptr) attention_norm_backward(layer, scratch_);
}

void Transformer::attention_norm_backward(int layer, const Bf16* dnorm) {
  const LayerTensors& w = layout_->layer(layer);
  const LayerActivations& a = layers_[to_size(layer)];
  const int below_fc2_bias = layer > 0 ? layout_->layer(layer - 1).fc2_bias : LayerTensors::kAbsent;
  norm_backward(dx_, dnorm, a.input, w.norm1_gamma, w.norm1_beta, a.norm1_mean, a.norm1_rstd,
                dx_, below_fc2_bias);
}

void Transformer::output_gradient_received() {
  if (!residual_biases_from_norms() || shape_.num_layers == 0) return;  // else mlp_backward sums it
  const int fc2_bias = layout_->layer(shape_.num_layers - 1).fc2_bias;
  // dx_ holds the residual stream's rows: 1/tp of the tokens under sp (the
  // bias's partial sum, summed over tp with the other partial gradients).
  kernels::bias_gradient(gradient(fc2_bias), dx_, static_cast<int>(shape_.norm_tokens()), shape_.hidden,
                         accumulate_gradients_, bias_workspace_, bias_workspace_bytes_, stream_);
}

void Transformer::embedding_backward(int mb) {
  const TransformerShape& s = shape_;
  const std::int32_t* tokens = tokens_ + static_cast<std::ptrdiff_t>(mb) * s.tokens();
  if (tp_ == nullptr) {
    kernels::embedding_backward(gradient(layout_->wte()), gradient(layout_->wpe()), dx_, tokens,
                                s.micro_batch, s.seq, s.vocab, s.hidden, embedding_workspace_,
                                embedding_workspace_bytes_, stream_);
    return;
  }
  // Every rank needs the gradient of every token for its rows, and computes
  // the position table's gradient (replicated) from all of them alike.
  const Bf16* dout = dx_;
  if (s.sequence_parallel) {
    tp_all_gather(dx_, dx_full_);
    dout = dx_full_;
  }
  kernels::embedding_backward_shard(gradient(layout_->wte()), gradient(layout_->wpe()), dout, tokens,
                                    s.micro_batch, s.seq, s.vocab_start(tp_->rank()), s.vocab, s.hidden,
                                    embedding_workspace_, embedding_workspace_bytes_, stream_);
}

// ---- tensor parallelism's tasks ----

void Transformer::tp_gather(Part part, int layer, bool backward) {
  const TransformerShape& s = shape_;
  const LayerTensors& w = layout_->layer(layer);
  LayerActivations& a = layers_[to_size(layer)];
  const bool attention = part == Part::kAttention;
  if (!backward) {
    // The norm on this rank's tokens, all-gathered: the column-parallel GEMM's input.
    Bf16* norm = attention ? a.norm1 : a.norm2;
    if (attention)
      norm_forward(a.norm1, a.norm1_mean, a.norm1_rstd, a.input, w.norm1_gamma, w.norm1_beta);
    else
      norm_forward(a.norm2, a.norm2_mean, a.norm2_rstd, a.mid, w.norm2_gamma, w.norm2_beta);
    if (chunked_ != nullptr) {  // the block's GEMM takes the chunks as they come (gemm_on_gathered)
      chunked_->start_all_gather(norm, gathered_, chunk_elements());
      gather_pending_ = true;
      return;
    }
    tp_all_gather(norm, gathered_);
    return;
  }
  // The row-parallel GEMM's output gradient for all tokens, and the
  // column-parallel GEMM's input again for its weight gradient (stored
  // sharded: Korthikanti et al. 2022, Sec. 4.2.2, as Megatron re-gathers it).
  if (!residual_biases_from_norms()) {
    // Its bias was added on this rank's tokens: their column sums, summed over
    // the group with the norms' gradients (ParameterLayout: partial_gradient_over_tp).
    const int bias = attention ? w.proj_bias : w.fc2_bias;
    if (bias != LayerTensors::kAbsent)
      kernels::bias_gradient(gradient(bias), dx_, static_cast<int>(s.norm_tokens()), s.hidden,
                             accumulate_gradients_, bias_workspace_, bias_workspace_bytes_, stream_);
  }
  const Bf16* norm = attention ? a.norm1 : a.norm2;
  if (chunked_ == nullptr) {
    tp_all_gather(dx_, dx_full_);  // read at once by the row-parallel input gradient
  } else {
    // Overlapped: the output gradient in chunks, for the row-parallel input
    // gradient to take as they come (row_linear_backward).
    chunked_->start_all_gather(dx_, dx_full_, chunk_elements());
    dy_gather_pending_ = true;
  }
  // The norm's output, first read by the column-parallel weight gradient at
  // the block's end, travels on the tp stream meanwhile, and the input
  // gradient's reduce-scatter runs while the weight gradient computes
  // (column_linear_backward). Megatron does both with sequence parallelism
  // alone (LinearWithGradAccumulationAndAsyncCommunication: the all-gather
  // launched asynchronously before the input-gradient GEMM, the reduce-scatter
  // before the weight-gradient GEMM); with --tp-comm-overlap Transformer
  // Engine's BULK_OVERLAP_AG and BULK_OVERLAP_RS. The same collectives on the
  // same data, bit for bit.
  SEXTANT_CUDA_CHECK(cudaEventRecord(tp_ready_, stream_));
  SEXTANT_CUDA_CHECK(cudaStreamWaitEvent(tp_->stream(), tp_ready_, 0));
  tp_->all_gather(norm, gathered_, chunk_elements(), comm::DataType::kBf16);
  SEXTANT_CUDA_CHECK(cudaEventRecord(norm_gathered_, tp_->stream()));
  norm_gather_pending_ = true;
}

void Transformer::tp_scatter(Part part, int layer, bool backward, bool recompute) {
  const LayerTensors& w = layout_->layer(layer);
  const LayerActivations& a = layers_[to_size(layer)];
  const bool attention = part == Part::kAttention;
  if (!backward) {
    if (!attention && recompute) return;  // the MLP's recomputation writes no next input
    // This rank's tokens of the row-parallel output, plus the residual and the bias.
    Bf16* out = attention ? a.mid : next_input(layer);
    scatter_scratch(out);
    kernels::residual_bias_add(out, out, attention ? a.input : a.mid, weight(attention ? w.proj_bias : w.fc2_bias),
                               static_cast<int>(shape_.norm_tokens()), shape_.hidden, stream_);
    return;
  }
  // The column-parallel GEMM's input gradient on this rank's tokens, then the norm's backward.
  if (input_grad_scatter_pending_) {  // started by column_linear_backward, before the weight gradient
    SEXTANT_CUDA_CHECK(cudaStreamWaitEvent(stream_, input_grad_scattered_, 0));
    input_grad_scatter_pending_ = false;
  } else {
    tp_reduce_scatter(scratch_, scratch_shard_);
  }
  attention ? attention_norm_backward(layer, scratch_shard_) : mlp_norm_backward(layer, scratch_shard_);
}

void Transformer::tp_task(sim::TaskKind kind, Part part, int layer, bool backward, bool recompute) {
  if (kind == sim::TaskKind::kTensorParallelGather)
    tp_gather(part, layer, backward);
  else if (kind == sim::TaskKind::kTensorParallelScatter)
    tp_scatter(part, layer, backward, recompute);
  else
    tp_all_reduce_task(part, layer, backward, recompute);
}

void Transformer::tp_all_reduce_task(Part part, int layer, bool backward, bool recompute) {
  const TransformerShape& s = shape_;
  const bool attention = part == Part::kAttention;
  const std::size_t count = to_size(s.tokens() * s.hidden);
  if (!backward) {
    if (!attention && recompute) return;  // the MLP's recomputation writes no next input
    tp_all_reduce(attention ? layers_[to_size(layer)].mid : next_input(layer), count);
    return;
  }
  tp_all_reduce(scratch_, count);
  attention ? attention_norm_backward(layer, scratch_) : mlp_norm_backward(layer, scratch_);
}

}  // namespace sextant::engine
