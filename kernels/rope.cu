#include "kernels/rope.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>

#include "kernels/cuda_check.h"
#include "kernels/device_common.cuh"

namespace sextant::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxHeadDim = 256;
// Positions are converted to float; above 2^24 they would no longer be exact.
constexpr int kMaxSeq = 1 << 24;
// Heads one thread rotates with one set of sines and cosines. The angle depends
// only on (position, i), so sharing it among 4 heads cuts the sincosf work 4x
// (the kernel stays memory-bound) while leaving enough threads to fill the GPU:
// 8192 tokens x 40 rotated heads / 4 x 8 vectors = 655,360 at d = 128.
constexpr int kHeadsPerThread = 4;

// kWidth consecutive bf16 as they sit in memory, moved in one access: 16 bytes
// (kWidth 8), 4 bytes (2) or one element (1). The caller guarantees the
// alignment. Held packed until used, so four heads' worth of loads in flight
// take half the registers that floats would.
template <int kWidth>
struct Packed;
template <>
struct Packed<8> {
  uint4 bits;
};
template <>
struct Packed<2> {
  __nv_bfloat162 bits;
};
template <>
struct Packed<1> {
  __nv_bfloat16 bits;
};

template <int kWidth>
__device__ __forceinline__ Packed<kWidth> load(const __nv_bfloat16* p) {
  return *reinterpret_cast<const Packed<kWidth>*>(p);
}

template <int kWidth>
__device__ __forceinline__ void unpack(const Packed<kWidth>& in, float (&out)[kWidth]) {
  if constexpr (kWidth == 8) {
    detail::unpack_bf16x8(in.bits, out);
  } else if constexpr (kWidth == 2) {
    const float2 f = __bfloat1622float2(in.bits);
    out[0] = f.x;
    out[1] = f.y;
  } else {
    out[0] = __bfloat162float(in.bits);
  }
}

// Rounds to bf16 (nearest even) and stores, as load reads.
template <int kWidth>
__device__ __forceinline__ void store(__nv_bfloat16* p, const float (&in)[kWidth]) {
  if constexpr (kWidth == 8) {
    detail::store_bf16x8(p, in);
  } else if constexpr (kWidth == 2) {
    *reinterpret_cast<__nv_bfloat162*>(p) = __floats2bfloat162_rn(in[0], in[1]);
  } else {
    *p = __float2bfloat16_rn(in[0]);
  }
}

// One thread: the pairs (i, i + d/2) for kWidth consecutive i, in up to
// kHeadsPerThread consecutive rotated heads (queries then keys, which are
// adjacent in the row) of one token. Thread index, fastest first:
// (vector within the half head, head group, token), so neighbouring threads
// read neighbouring 16-byte vectors of a head.
//
// qkv: (tokens, row_stride) bf16; rotated heads at columns [0, rotated_heads * head_dim).
// exponent_step = -2 log2(theta) / head_dim, so theta^(-2i/d) = 2^(i * exponent_step).
// sign: +1 rotates by +angle (forward), -1 by -angle (backward).
template <int kWidth>
__global__ void rope_kernel(__nv_bfloat16* qkv, std::int64_t tokens, int seq, SequencePositions positions,
                            int rotated_heads, int head_dim, int row_stride, float exponent_step, float sign) {
  const int half = head_dim / 2;
  const int vectors_per_half = half / kWidth;
  const int groups = (rotated_heads + kHeadsPerThread - 1) / kHeadsPerThread;
  const std::int64_t index = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (index >= tokens * groups * vectors_per_half) return;
  const int vector = static_cast<int>(index % vectors_per_half);
  const std::int64_t rest = index / vectors_per_half;
  const int group = static_cast<int>(rest % groups);
  const std::int64_t token = rest / groups;
  const int first = vector * kWidth;  // the first i of this thread

  __nv_bfloat16* head = qkv + token * row_stride +
                        static_cast<std::int64_t>(group) * kHeadsPerThread * head_dim + first;
  const int count = min(kHeadsPerThread, rotated_heads - group * kHeadsPerThread);
  // Every load first, before the angles are computed (which then hides their
  // latency) and before any store: the compiler cannot tell that a store to
  // one head does not alias the next head's load, and interleaving them would
  // leave one load in flight at a time.
  Packed<kWidth> first_half[kHeadsPerThread], second_half[kHeadsPerThread];
#pragma unroll
  for (int u = 0; u < kHeadsPerThread; ++u) {
    if (u < count) {
      first_half[u] = load<kWidth>(head + u * head_dim);
      second_half[u] = load<kWidth>(head + u * head_dim + half);
    }
  }

  // fp32 angle, as Megatron and HF form it; i * exponent_step is one rounding,
  // exp2f is within 2 ulp, and position is exact (seq <= 2^24). sincosf, not
  // __sincosf: the fast intrinsic's error grows with the argument, which here
  // reaches the sequence length in radians.
  const float position = static_cast<float>(position_of(positions, static_cast<int>(token % seq)));
  float c[kWidth], s[kWidth];
#pragma unroll
  for (int j = 0; j < kWidth; ++j) {
    const float inverse_frequency = exp2f(static_cast<float>(first + j) * exponent_step);
    sincosf(position * inverse_frequency, &s[j], &c[j]);
    s[j] *= sign;  // sin(-a) = -sin(a): the backward angle is exactly the negated forward one
  }

#pragma unroll
  for (int u = 0; u < kHeadsPerThread; ++u) {
    if (u < count) {
      float x1[kWidth], x2[kWidth], y1[kWidth], y2[kWidth];
      unpack<kWidth>(first_half[u], x1);
      unpack<kWidth>(second_half[u], x2);
#pragma unroll
      for (int j = 0; j < kWidth; ++j) {
        y1[j] = x1[j] * c[j] - x2[j] * s[j];
        y2[j] = x2[j] * c[j] + x1[j] * s[j];
      }
      store<kWidth>(head + u * head_dim, y1);
      store<kWidth>(head + u * head_dim + half, y2);
    }
  }
}

std::string format_float(float value) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", static_cast<double>(value));
  return text;
}

// Threads one launch needs (see rope_kernel); the shape must have passed the
// per-field checks.
std::int64_t thread_count(const RopeShape& s, int width) {
  const std::int64_t groups = (s.heads + s.kv_heads + kHeadsPerThread - 1) / kHeadsPerThread;
  return static_cast<std::int64_t>(s.batch) * s.seq * groups * (s.head_dim / 2 / width);
}

// The widest access that keeps every vector aligned: with half = d/2 a multiple
// of 8, each half head starts on a 16-byte boundary (rows are, since
// row_stride % 8 == 0 and the buffer is 16-byte aligned, and d % 16 == 0);
// with half even, on a 4-byte boundary.
int vector_width(int head_dim) {
  const int half = head_dim / 2;
  if (half % detail::kBf16PerVector == 0) return detail::kBf16PerVector;
  if (half % 2 == 0) return 2;
  return 1;
}

void launch(const char* launcher, const char* buffer_name, Bf16* qkv, const RopeShape& s,
            float sign, cudaStream_t stream) {
  const std::string reason = rope_unsupported_reason(s);
  require_argument(reason.empty(), launcher, reason);
  require_argument(qkv != nullptr, launcher, std::string(buffer_name) + " must not be null");
  require_argument(is_aligned(qkv, 16), launcher,
                   std::string(buffer_name) + " must be 16-byte aligned (16-byte vector accesses)");

  const int width = vector_width(s.head_dim);
  const std::int64_t threads = thread_count(s, width);
  const unsigned blocks = static_cast<unsigned>((threads + kThreads - 1) / kThreads);
  const std::int64_t tokens = static_cast<std::int64_t>(s.batch) * s.seq;
  const int rotated_heads = s.heads + s.kv_heads;
  // log2 in double, then one rounding to float.
  const float exponent_step =
      static_cast<float>(-2.0 * std::log2(static_cast<double>(s.theta)) / s.head_dim);
  __nv_bfloat16* p = detail::cuda_bf16(qkv);
  if (width == 8) {
    rope_kernel<8><<<blocks, kThreads, 0, stream>>>(p, tokens, s.seq, s.positions, rotated_heads,
                                                    s.head_dim, s.row_stride, exponent_step, sign);
    SEXTANT_CHECK_LAUNCH("rope_kernel<8>");
  } else if (width == 2) {
    rope_kernel<2><<<blocks, kThreads, 0, stream>>>(p, tokens, s.seq, s.positions, rotated_heads,
                                                    s.head_dim, s.row_stride, exponent_step, sign);
    SEXTANT_CHECK_LAUNCH("rope_kernel<2>");
  } else {
    rope_kernel<1><<<blocks, kThreads, 0, stream>>>(p, tokens, s.seq, s.positions, rotated_heads,
                                                    s.head_dim, s.row_stride, exponent_step, sign);
    SEXTANT_CHECK_LAUNCH("rope_kernel<1>");
  }
}

}  // namespace

std::string rope_unsupported_reason(const RopeShape& s) {
  std::string reasons;
  auto add = [&reasons](const std::string& reason) {
    if (!reasons.empty()) reasons += "; ";
    reasons += reason;
  };
  if (s.batch < 1) add("batch (" + std::to_string(s.batch) + ") must be positive");
  if (s.seq < 1 || s.seq > kMaxSeq)
    add("seq (" + std::to_string(s.seq) +
        ") must be in [1, 16777216] (positions are exact in fp32 up to 2^24)");
  if (s.heads < 1) add("heads (" + std::to_string(s.heads) + ") must be positive");
  if (s.kv_heads < 1) add("kv_heads (" + std::to_string(s.kv_heads) + ") must be positive");
  const bool head_dim_ok = s.head_dim >= 2 && s.head_dim <= kMaxHeadDim && s.head_dim % 2 == 0;
  if (!head_dim_ok)
    add("head_dim (" + std::to_string(s.head_dim) + ") must be even and in [2, 256]");
  if (s.row_stride < 1 || s.row_stride % detail::kBf16PerVector != 0) {
    add("row_stride (" + std::to_string(s.row_stride) +
        ") must be a positive multiple of 8 (16-byte aligned rows)");
  } else if (s.heads >= 1 && s.kv_heads >= 1 && head_dim_ok) {
    const std::int64_t needed =
        (static_cast<std::int64_t>(s.heads) + 2LL * s.kv_heads) * s.head_dim;
    if (s.row_stride < needed)
      add("row_stride (" + std::to_string(s.row_stride) +
          ") must be at least (heads + 2 * kv_heads) * head_dim = (" + std::to_string(s.heads) +
          " + 2 * " + std::to_string(s.kv_heads) + ") * " + std::to_string(s.head_dim) + " = " +
          std::to_string(needed));
  }
  if (const std::string problem = sequence_positions_problem(s.positions, s.seq); !problem.empty())
    add("positions: " + problem);
  else if (s.positions.chunk_tokens > 0 && positions_end(s.positions, s.seq) > kMaxSeq)
    add("positions reach " + std::to_string(positions_end(s.positions, s.seq)) +
        ": at most 16777216 (positions are exact in fp32 up to 2^24)");
  if (!(std::isfinite(s.theta) && s.theta > 1.0f))
    add("theta (" + format_float(s.theta) + ") must be finite and above 1");
  if (reasons.empty()) {
    // The grid is 1-D; its x dimension is limited to 2^31 - 1 blocks (CUDA
    // programming guide, compute capabilities table).
    const std::int64_t blocks =
        (thread_count(s, vector_width(s.head_dim)) + kThreads - 1) / kThreads;
    if (blocks > INT_MAX)
      add("batch * seq (" + std::to_string(static_cast<std::int64_t>(s.batch) * s.seq) +
          ") is too large: the launch would need " + std::to_string(blocks) +
          " blocks, more than 2^31 - 1");
  }
  return reasons;
}

void rope_forward(Bf16* qkv, const RopeShape& shape, cudaStream_t stream) {
  launch("rope_forward", "qkv", qkv, shape, 1.0f, stream);
}

void rope_backward(Bf16* dqkv, const RopeShape& shape, cudaStream_t stream) {
  launch("rope_backward", "dqkv", dqkv, shape, -1.0f, stream);
}

}  // namespace sextant::kernels
