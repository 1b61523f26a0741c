// Context-parallel attention, both variants — the all-gather of K/V
// (context_parallel_attention_core.h) and the K/V ring (cp_comm_type=p2p,
// context_parallel_ring_attention_core.h) — at cp = 2 and cp = 4 on the
// in-process communicator (one thread and compute stream per rank), against
// the one-GPU core (FlashAttentionCore) on the whole sequences: random Q, K,
// V and dO, and every rank's output, log-sum-exp and gradients dQ, dK, dV at
// its tokens must be the whole run's at the positions those tokens hold
// (engine/model/context_parallel_chunks.h). Every core is the one
// SelfAttention picks for the shape (make_attention_core), run from a
// ModelContext, reserving its buffers in an ArenaPlan as the engine does;
// Q, K, V sit where SelfAttention puts them: column slices of the fused QKV
// rows (head_dim 64, 128), or padded arrays of their own (head_dim 80).
//
// Tolerances. Both runs are flash attention on the same bf16 inputs; they
// differ only in how the keys are split into calls. The output and LSE take
// flash attention's test bounds (tests/kernels/flash_attention_test.cc):
// O within rtol 1e-2 + 2^-8·max|V|, LSE within max(1e-4, S·2^-24). dQ is
// summed with fp32 atomics in either run (its last bits vary from run to
// run) from P and dS rounded to bf16 in key blocks that start elsewhere in
// the chunk calls: rtol 1e-2 plus 2^-6 of its rms. dK and dV are rounded more often
// here: each chunk call's share to bf16 (and, where flash attention runs GQA
// on K/V expanded to every query head, each query head's share first), then
// the fp32 sum over the 2·cp chunk calls to bf16, where the whole run rounds
// once (or once per query head). A key seen by every chunk (the first ones)
// sums P = 2·cp·g partials (g = heads / kv_heads when expanded, else 1), each
// off by up to 2^-9 of itself; the partials of those keys are larger than
// their sum (they cancel), so the bound is P·2^-9 of the largest |dK| (|dV|),
// at least 2^-6 of the rms, plus rtol 1e-2. Measured on an H200: 12 of 32768
// elements of cp 2, GQA 8/2, head_dim 64 were beyond 2^-6·rms, all at keys
// 0-3; the kernel-level identity (tests/kernels/flash_attention_kv_seq_test.cc)
// checks the chunk calls against a double reference. A wrong position, a
// missing chunk or key range, or a lost reduce-scatter term is off by O(rms)
// at most keys.
//
// The ring's differences from the whole run, and its bounds. Each step's
// partial output is rounded to bf16 before its fp32 log-sum-exp merge (one
// more rounding of 2^-9 of |O|, inside O's bound) and the LSE is merged in
// fp32 (a few ulps of log(S)). dQ is the fp32 sum of up to cp partials (a
// chunk's dQ over each step's keys), each rounded to bf16: like dK above,
// P = cp partials each off by up to 2^-9 of itself, larger than their sum
// where they cancel, so the bound is at least cp·2^-9 of the largest |dQ|.
// dK and dV: a key of source s gets one partial per call that saw it, at most
// two per rank (q0 and q1), 2·cp in all as for the all-gather (g as its calls
// expand: the ring's calls have c or 2c keys), summed in fp32 on their way
// around the ring and rounded once. A block attended in the wrong step, with
// the wrong mask, merged with the wrong LSE, or an accumulator that misses a
// hop is off by O(rms).
#include "engine/transformer/context_parallel_attention_core.h"
#include "engine/transformer/context_parallel_ring_attention_core.h"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "engine/comm/communicator.h"
#include "engine/device_arena.h"
#include "engine/model/context_parallel_chunks.h"
#include "engine/model/parameter_layout.h"
#include "engine/transformer/attention.h"
#include "engine/transformer/flash_attention_core.h"
#include "engine/transformer/model_context.h"
#include "kernels/cuda_check.h"
#include "tests/engine/comm/comm_test_support.h"
#include "tests/kernels/gpu_test_support.h"

namespace sextant::engine::transformer {
namespace {

using comm::Communicator;
using comm::testing::run_in_process;
using kernels::Bf16;

struct Case {
  int cp;
  int sequence_tokens;  // S, the whole sequence
  int micro_batch;
  int heads, kv_heads, head_dim;
  sim::CpCommType exchange = sim::CpCommType::kAllGather;
};

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  const Case& c = info.param;
  std::string name = "cp";  // appended piecewise: "cp" + to_string trips GCC 12's -Wrestrict
  name += std::to_string(c.cp);
  name += "_s" + std::to_string(c.sequence_tokens);
  name += "_b" + std::to_string(c.micro_batch);
  name += "_h" + std::to_string(c.heads);
  name += "_kv" + std::to_string(c.kv_heads);
  name += "_d" + std::to_string(c.head_dim);
  if (c.exchange == sim::CpCommType::kP2p) name += "_p2p";  // the all-gather's names as before the ring
  return name;
}

/// One layer's attention shard of `c` on `cp` ranks (seq = S / cp).
TransformerShape shape_of(const Case& c, int cp) {
  TransformerShape s;
  s.num_layers = 1;
  s.heads = c.heads;
  s.kv_heads = c.kv_heads;
  s.head_dim = c.head_dim;
  s.hidden = c.heads * c.head_dim;
  s.ffn_hidden = 4 * s.hidden;
  s.vocab = 128;
  s.seq = c.sequence_tokens / cp;
  s.micro_batch = c.micro_batch;
  s.cp = cp;
  s.cp_comm_type = c.exchange;
  return s;
}

/// Rows in the attention kernels' layout (rows, heads, attention_head_dim), as floats.
struct AttentionTensors {
  std::vector<float> q, k, v;  // inputs
  std::vector<float> dout;     // the output's gradient (an input of the backward)
  std::vector<float> out, lse, dq, dk, dv;  // results; lse (micro_batch, heads, seq)
};

std::vector<float> rows_of(const std::vector<float>& m, std::size_t width, const std::vector<std::size_t>& rows) {
  std::vector<float> out;
  out.reserve(rows.size() * width);
  for (std::size_t r : rows)
    out.insert(out.end(), m.begin() + static_cast<long>(r * width), m.begin() + static_cast<long>((r + 1) * width));
  return out;
}

// Rows of `width` columns, `stride` apart on the device (column slices of a
// fused row), copied on `stream` and waited for: a pageable copy on another
// stream may land after `stream`'s kernels read it.
void upload_columns(Bf16* device, std::size_t stride, const std::vector<float>& host, std::size_t width,
                    cudaStream_t stream) {
  const std::size_t rows = host.size() / width;
  std::vector<Bf16> bf16(host.size());
  std::transform(host.begin(), host.end(), bf16.begin(), kernels::from_float);
  SEXTANT_CUDA_CHECK(cudaMemcpy2DAsync(device, stride * sizeof(Bf16), bf16.data(), width * sizeof(Bf16),
                                       width * sizeof(Bf16), rows, cudaMemcpyHostToDevice, stream));
  SEXTANT_CUDA_CHECK(cudaStreamSynchronize(stream));
}
std::vector<float> download_columns(const Bf16* device, std::size_t stride, std::size_t rows, std::size_t width) {
  std::vector<Bf16> bf16(rows * width);
  SEXTANT_CUDA_CHECK(cudaMemcpy2D(bf16.data(), width * sizeof(Bf16), device, stride * sizeof(Bf16),
                                  width * sizeof(Bf16), rows, cudaMemcpyDeviceToHost));
  std::vector<float> out(bf16.size());
  std::transform(bf16.begin(), bf16.end(), out.begin(), kernels::to_float);
  return out;
}

/// The attention core SelfAttention picks for `shape` (cp > 1: the
/// context-parallel one of its cp_comm_type), run forward and backward on `t`'s
/// inputs, its results written into `t`. `cp_group`: the rank's cp group (null for cp = 1).
void run_core(const TransformerShape& shape, Communicator* cp_group, AttentionTensors& t) {
  cudaStream_t compute = nullptr;
  SEXTANT_CUDA_CHECK(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking));
  {
    ModelContext context(shape);
    ArenaPlan plan;
    ArenaBindings bindings;
    BufferReserver r(plan, {}, bindings);
    context.reserve_gemm_workspace(r);
    std::unique_ptr<AttentionCore> core = make_attention_core(context);
    core->reserve(r);
    // The block's buffers, as SelfAttention lays them out (attention.h).
    const std::size_t T = static_cast<std::size_t>(shape.tokens());
    const std::size_t d = static_cast<std::size_t>(shape.attention_head_dim());
    const std::size_t qw = static_cast<std::size_t>(shape.heads) * d, kvw = static_cast<std::size_t>(shape.kv_heads) * d;
    const bool fused = !shape.attention_padded();
    const std::size_t row = fused ? qw + 2 * kvw : 0;  // the fused row's width
    Bf16 *qkv = nullptr, *dqkv = nullptr, *q = nullptr, *k = nullptr, *v = nullptr;
    Bf16 *dq = nullptr, *dk = nullptr, *dv = nullptr, *out = nullptr, *dout = nullptr;
    float* lse = nullptr;
    constexpr auto kAct = MemoryCategory::kActivations;
    if (fused) {
      r.own(qkv, "qkv", kAct, T * row);
      r.own(dqkv, "grad.qkv", kAct, T * row);
    } else {
      r.own(q, "q", kAct, T * qw), r.own(k, "k", kAct, T * kvw), r.own(v, "v", kAct, T * kvw);
      r.own(dq, "grad.q", kAct, T * qw), r.own(dk, "grad.k", kAct, T * kvw), r.own(dv, "grad.v", kAct, T * kvw);
    }
    r.own(out, "attn", kAct, T * qw);
    r.own(dout, "grad.attn", kAct, T * qw);
    r.own(lse, "lse", kAct, T * static_cast<std::size_t>(shape.heads));
    DeviceArena arena(plan);
    bindings.bind(arena);
    if (fused) {
      q = qkv, k = qkv + qw, v = qkv + qw + kvw;
      dq = dqkv, dk = dqkv + qw, dv = dqkv + qw + kvw;
    }
    const ParameterLayout layout(shape);
    context.bind(layout, {}, compute, nullptr, nullptr, cp_group);
    const std::size_t q_stride = fused ? row : qw, kv_stride = fused ? row : kvw;
    upload_columns(q, q_stride, t.q, qw, compute);
    upload_columns(k, kv_stride, t.k, kvw, compute);
    upload_columns(v, kv_stride, t.v, kvw, compute);
    upload_columns(dout, qw, t.dout, qw, compute);
    core->forward(out, lse, q, k, v);
    core->backward(dq, dk, dv, dout, q, k, v, out, lse);
    SEXTANT_CUDA_CHECK(cudaStreamSynchronize(compute));
    if (cp_group != nullptr) SEXTANT_CUDA_CHECK(cudaStreamSynchronize(cp_group->stream()));
    t.out = download_columns(out, qw, T, qw);
    t.lse.resize(T * static_cast<std::size_t>(shape.heads));
    SEXTANT_CUDA_CHECK(cudaMemcpy(t.lse.data(), lse, t.lse.size() * sizeof(float), cudaMemcpyDeviceToHost));
    t.dq = download_columns(dq, q_stride, T, qw);
    t.dk = download_columns(dk, kv_stride, T, kvw);
    t.dv = download_columns(dv, kv_stride, T, kvw);
  }
  SEXTANT_CUDA_CHECK(cudaStreamDestroy(compute));
}

double rms(const std::vector<float>& x) {
  double square = 0;
  for (float v : x) square += static_cast<double>(v) * v;
  return std::sqrt(square / static_cast<double>(std::max<std::size_t>(x.size(), 1)));
}

::testing::AssertionResult close(const std::vector<float>& got, const std::vector<float>& want, double rtol,
                                 double atol) {
  return kernels::testing::all_close(std::vector<double>(got.begin(), got.end()),
                                     std::vector<double>(want.begin(), want.end()), rtol, atol);
}

// The gradients: every element within 4 times the bound, and at most 1 in
// 1000 beyond the bound itself. Their rounding differences are tails of many
// bf16 roundings (measured on H200s: up to 12 of 32768 elements past a bound
// of the rounding's scale, run to run with the random inputs); a wrong
// position, chunk or reduction is off by O(rms) at most elements.
::testing::AssertionResult gradient_close(const std::vector<float>& got, const std::vector<float>& want,
                                          double rtol, double atol) {
  std::size_t beyond = 0;
  for (std::size_t i = 0; i < got.size() && i < want.size(); ++i) {
    const double error = std::fabs(static_cast<double>(got[i]) - want[i]);
    const double bound = atol + rtol * std::fabs(static_cast<double>(want[i]));
    if (error > 4 * bound) return close(got, want, 4 * rtol, 4 * atol);  // names the worst element
    if (error > bound) ++beyond;
  }
  if (got.size() != want.size() || beyond * 1000 > got.size())
    return ::testing::AssertionFailure() << beyond << " of " << got.size() << " elements beyond the bound (at most "
                                         << got.size() / 1000 << ")\n" << close(got, want, rtol, atol).message();
  return ::testing::AssertionSuccess();
}

class ContextParallelAttentionCoreParity : public kernels::testing::GpuTestWithParam<Case> {};

TEST_P(ContextParallelAttentionCoreParity, EveryRanksRowsMatchTheWholeSequenceRun) {
  const Case c = GetParam();
  const TransformerShape whole_shape = shape_of(c, 1);
  const std::size_t d = static_cast<std::size_t>(whole_shape.attention_head_dim());
  const std::size_t qw = static_cast<std::size_t>(c.heads) * d, kvw = static_cast<std::size_t>(c.kv_heads) * d;
  const std::size_t rows = static_cast<std::size_t>(c.micro_batch) * static_cast<std::size_t>(c.sequence_tokens);
  // N(0, 1) bf16 inputs: scores q.k / sqrt(d) of standard deviation 1, as the flash attention tests.
  auto random = [&](std::size_t n) {
    std::vector<float> x = kernels::testing::random_float(rng(), n, 0.0, 1.0);
    for (float& v : x) v = kernels::to_float(kernels::from_float(v));
    return x;
  };
  AttentionTensors whole;
  whole.q = random(rows * qw), whole.k = random(rows * kvw), whole.v = random(rows * kvw);
  whole.dout = random(rows * qw);
  run_core(whole_shape, nullptr, whole);

  const TransformerShape shard_shape = shape_of(c, c.cp);
  const int L = shard_shape.seq, S = c.sequence_tokens, chunk = L / 2;
  std::vector<AttentionTensors> ranks(static_cast<std::size_t>(c.cp));
  std::vector<std::vector<std::size_t>> rank_rows(static_cast<std::size_t>(c.cp));  // rank's token -> whole row
  for (int r = 0; r < c.cp; ++r) {
    const ContextParallelChunks split(S, c.cp, r);
    std::vector<std::size_t>& mine = rank_rows[static_cast<std::size_t>(r)];
    for (int b = 0; b < c.micro_batch; ++b)
      for (int t = 0; t < L; ++t) mine.push_back(static_cast<std::size_t>(b) * S + split.global_position(t));
    AttentionTensors& in = ranks[static_cast<std::size_t>(r)];
    in.q = rows_of(whole.q, qw, mine), in.k = rows_of(whole.k, kvw, mine), in.v = rows_of(whole.v, kvw, mine);
    in.dout = rows_of(whole.dout, qw, mine);
  }
  run_in_process(c.cp, [&](int r, Communicator& comm) { run_core(shard_shape, &comm, ranks[static_cast<std::size_t>(r)]); });

  double max_v = 0;
  for (float x : whole.v) max_v = std::max(max_v, std::fabs(static_cast<double>(x)));
  const double lse_atol = std::max(1e-4, S * std::ldexp(1.0, -24));
  // dQ: 2^-6 of the rms (not 2^-7): besides the atomics' order, the backward
  // rounds P and dS to bf16 for its tensor-core products, and a chunk call's
  // key blocks start at other offsets than the whole run's (measured on an
  // H200: 7 of 131072 elements of cp 4, head_dim 80 padded, up to 1.4 times
  // 2^-7·rms).
  auto max_abs = [](const std::vector<float>& x) {
    double m = 0;
    for (float v : x) m = std::max(m, std::fabs(static_cast<double>(v)));
    return m;
  };
  const bool ring = c.exchange == sim::CpCommType::kP2p;
  // The ring's dQ: up to cp partials rounded to bf16 (see the top).
  const double dq_atol = ring ? std::max(std::ldexp(1.0, -6) * rms(whole.dq), c.cp * std::ldexp(max_abs(whole.dq), -9))
                              : std::ldexp(1.0, -6) * rms(whole.dq);
  // Partials per key (see the top): 2·cp chunk calls, each of g query heads' shares when expanded.
  const ContextParallelChunks last(S, c.cp, c.cp - 1);
  kernels::FlashAttentionShape chunk_call = flash_attention_shape(shard_shape);
  chunk_call.batch = 1;
  chunk_call.seq = chunk;
  chunk_call.kv_seq = last.visible_keys(0);
  bool expanded = kernels::flash_attention_backward_expands_kv_heads(chunk_call);
  if (ring) {  // the ring's calls: c or 2c keys of a contiguous block, causal or not
    expanded = false;
    chunk_call.kv_row_stride = 0;
    for (int keys : {chunk, 2 * chunk})
      for (bool causal : {true, false}) {
        chunk_call.kv_seq = keys;
        chunk_call.causal = causal;
        expanded = expanded || kernels::flash_attention_backward_expands_kv_heads(chunk_call);
      }
  }
  const int g = expanded ? c.heads / c.kv_heads : 1;
  const double partials = 2.0 * c.cp * g;
  const double dk_atol = std::max(std::ldexp(1.0, -6) * rms(whole.dk), partials * std::ldexp(max_abs(whole.dk), -9));
  const double dv_atol = std::max(std::ldexp(1.0, -6) * rms(whole.dv), partials * std::ldexp(max_abs(whole.dv), -9));
  for (int r = 0; r < c.cp; ++r) {
    SCOPED_TRACE("cp rank " + std::to_string(r));
    const AttentionTensors& got = ranks[static_cast<std::size_t>(r)];
    const std::vector<std::size_t>& mine = rank_rows[static_cast<std::size_t>(r)];
    EXPECT_TRUE(close(got.out, rows_of(whole.out, qw, mine), 1e-2, std::ldexp(max_v, -8))) << "out";
    // LSE: the whole run's (b, h, p); the core's chunk (b, j) at (2b + j)·heads·c, (h, i).
    std::vector<float> want_lse(got.lse.size());
    for (int b = 0; b < c.micro_batch; ++b)
      for (int j = 0; j < 2; ++j)
        for (int h = 0; h < c.heads; ++h)
          for (int i = 0; i < chunk; ++i) {
            const std::size_t p = mine[static_cast<std::size_t>(b * L + j * chunk + i)] - static_cast<std::size_t>(b) * S;
            want_lse[(static_cast<std::size_t>(2 * b + j) * c.heads + h) * chunk + i] =
                whole.lse[(static_cast<std::size_t>(b) * c.heads + h) * S + p];
          }
    EXPECT_TRUE(close(got.lse, want_lse, 0.0, lse_atol)) << "lse";
    EXPECT_TRUE(gradient_close(got.dq, rows_of(whole.dq, qw, mine), 1e-2, dq_atol)) << "dq";
    EXPECT_TRUE(gradient_close(got.dk, rows_of(whole.dk, kvw, mine), 1e-2, dk_atol)) << "dk";
    EXPECT_TRUE(gradient_close(got.dv, rows_of(whole.dv, kvw, mine), 1e-2, dv_atol)) << "dv";
  }
}

// Every shape with either exchange: the all-gather and the ring.
std::vector<Case> cases() {
  std::vector<Case> all;
  for (sim::CpCommType exchange : {sim::CpCommType::kAllGather, sim::CpCommType::kP2p})
    for (Case c : {
             // GQA (8 query heads, 2 key/value heads) and MHA, head_dim 64 and 128:
             // Q, K, V column slices of the fused QKV rows.
             Case{2, 512, 1, 8, 2, 64}, Case{2, 1024, 1, 8, 8, 128}, Case{2, 2048, 2, 8, 2, 128},
             Case{4, 512, 1, 8, 8, 64}, Case{4, 1024, 2, 8, 2, 64}, Case{4, 2048, 1, 8, 2, 128},
             Case{2, 1024, 2, 8, 8, 64}, Case{4, 1024, 2, 8, 8, 128},  // MHA, micro-batch 2
             // head_dim 80 (GPT-3 2.7B's): padded to 128, Q, K, V arrays of their own.
             Case{2, 1024, 2, 8, 2, 80}, Case{4, 512, 1, 8, 8, 80}}) {
      c.exchange = exchange;
      all.push_back(c);
    }
  return all;
}

INSTANTIATE_TEST_SUITE_P(Shapes, ContextParallelAttentionCoreParity, ::testing::ValuesIn(cases()), case_name);

TEST(ContextParallelAttentionCoreShape, RejectsOneRankAndAnOddShare) {
  Case c{2, 512, 1, 8, 2, 64};
  TransformerShape s = shape_of(c, 1);
  ModelContext one(s);
  EXPECT_THROW(ContextParallelAttentionCore core(one), std::invalid_argument);
  EXPECT_THROW(ContextParallelRingAttentionCore core(one), std::invalid_argument);
  s = shape_of(c, 2);
  s.seq = 255;  // a rank's share must be two chunks
  ModelContext odd(s);
  EXPECT_THROW(ContextParallelAttentionCore core(odd), std::invalid_argument);
  EXPECT_THROW(ContextParallelRingAttentionCore core(odd), std::invalid_argument);
}

// The knob's last step (CPU): the shape's cp_comm_type picks the core.
TEST(ContextParallelAttentionCoreShape, TheShapesExchangePicksTheCore) {
  Case c{2, 512, 1, 8, 2, 64};
  ModelContext whole(shape_of(c, 1));
  EXPECT_NE(dynamic_cast<FlashAttentionCore*>(make_attention_core(whole).get()), nullptr);
  ModelContext gathered(shape_of(c, 2));  // the default: all_gather
  EXPECT_NE(dynamic_cast<ContextParallelAttentionCore*>(make_attention_core(gathered).get()), nullptr);
  c.exchange = sim::CpCommType::kP2p;
  ModelContext ring(shape_of(c, 2));
  EXPECT_NE(dynamic_cast<ContextParallelRingAttentionCore*>(make_attention_core(ring).get()), nullptr);
  c.exchange = sim::CpCommType::kP2p;
  ModelContext one_rank(shape_of(c, 1));  // nothing to exchange on one rank
  EXPECT_NE(dynamic_cast<FlashAttentionCore*>(make_attention_core(one_rank).get()), nullptr);
}

}  // namespace
}  // namespace sextant::engine::transformer
