#include "kernels/embedding.h"

#include <cub/device/device_radix_sort.cuh>

#include <bit>
#include <string>

#include "kernels/cuda_check.h"
#include "kernels/device_common.cuh"

namespace sextant::kernels {
namespace {

using detail::kBf16PerVector;
using detail::load_bf16x8;
using detail::store_bf16x8;

constexpr int kThreads = 256;

// kSharded: wte holds rows [vocab_start, vocab_start + vocab_rows) only, and
// a token outside them reads zeros (vocabulary-parallel embedding).
template <bool kSharded>
__global__ void embedding_forward_kernel(__nv_bfloat16* out, const std::int32_t* tokens,
                                         const __nv_bfloat16* wte, const __nv_bfloat16* wpe,
                                         std::int64_t vectors, int seq, int cols, int vocab_start,
                                         int vocab_rows, SequencePositions positions) {
  const std::int64_t v = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (v >= vectors) return;
  const std::int64_t e = v * kBf16PerVector;
  const std::int64_t n = e / cols;
  const int col = static_cast<int>(e % cols);
  float x[8] = {}, p[8] = {};
  if constexpr (kSharded) {
    const int row = tokens[n] - vocab_start;
    if (row >= 0 && row < vocab_rows) load_bf16x8(wte + static_cast<std::int64_t>(row) * cols + col, x);
  } else {
    load_bf16x8(wte + static_cast<std::int64_t>(tokens[n]) * cols + col, x);
  }
  if (wpe != nullptr)
    load_bf16x8(wpe + static_cast<std::int64_t>(position_of(positions, static_cast<int>(n % seq))) * cols + col, p);
#pragma unroll
  for (int i = 0; i < 8; ++i) x[i] += p[i];
  store_bf16x8(out + e, x);
}

__global__ void iota_kernel(std::int32_t* index, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) index[i] = i;
}

// A token's row in this rank's shard, or vocab_rows (skipped) when another rank holds it.
__global__ void shard_rows_kernel(std::int32_t* rows, const std::int32_t* tokens, int n,
                                  int vocab_start, int vocab_rows) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const int row = tokens[i] - vocab_start;
  rows[i] = row >= 0 && row < vocab_rows ? row : vocab_rows;
}

// Block (x = sorted position, y = tile of 8 * blockDim.x columns). Only the
// block at the first position of a run of equal tokens works: it finds the
// run's end, then sums the run's dout rows in ascending position order (the
// sort is stable) and adds the sum to the token's row once.
__global__ void embedding_backward_wte_kernel(float* dwte, const __nv_bfloat16* dout,
                                              const std::uint32_t* sorted_tokens,
                                              const std::int32_t* sorted_index, int n, int cols,
                                              int vocab) {
  const int start = blockIdx.x;
  const std::uint32_t token = sorted_tokens[start];
  if (start > 0 && sorted_tokens[start - 1] == token) return;  // uniform across the block
  if (token >= static_cast<std::uint32_t>(vocab)) return;  // another rank's row (sharded only)

  // Tokens are sorted, so the matches in any window starting inside the run
  // are a prefix of it: count them until a window is not full.
  int end = start;
  for (;;) {
    const int k = end + static_cast<int>(threadIdx.x);
    const int matches = __syncthreads_count(k < n && sorted_tokens[k] == token);
    end += matches;
    if (matches < static_cast<int>(blockDim.x)) break;
  }

  const int col = (blockIdx.y * blockDim.x + threadIdx.x) * kBf16PerVector;
  if (col >= cols) return;
  float acc[8] = {};
#pragma unroll 4
  for (int k = start; k < end; ++k) {
    float g[8];
    load_bf16x8(dout + static_cast<std::int64_t>(sorted_index[k]) * cols + col, g);
#pragma unroll
    for (int i = 0; i < 8; ++i) acc[i] += g[i];
  }
  auto* dst = reinterpret_cast<float4*>(dwte + static_cast<std::int64_t>(token) * cols + col);
  float4 lo = dst[0], hi = dst[1];
  lo.x += acc[0], lo.y += acc[1], lo.z += acc[2], lo.w += acc[3];
  hi.x += acc[4], hi.y += acc[5], hi.z += acc[6], hi.w += acc[7];
  dst[0] = lo;
  dst[1] = hi;
}

// One thread per 8 columns of one local token: sums the batch in order into
// its position's row (distinct tokens have distinct positions: no races).
__global__ void embedding_backward_wpe_kernel(float* dwpe, const __nv_bfloat16* dout,
                                              std::int64_t vectors, int batch, int seq, int cols,
                                              SequencePositions positions) {
  const std::int64_t v = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (v >= vectors) return;
  const std::int64_t e = v * kBf16PerVector;  // index into (seq, cols)
  const std::int64_t batch_stride = static_cast<std::int64_t>(seq) * cols;
  float acc[8] = {};
  for (int b = 0; b < batch; ++b) {
    float g[8];
    load_bf16x8(dout + b * batch_stride + e, g);
#pragma unroll
    for (int i = 0; i < 8; ++i) acc[i] += g[i];
  }
  const int t = static_cast<int>(e / cols);
  auto* dst = reinterpret_cast<float4*>(dwpe + static_cast<std::int64_t>(position_of(positions, t)) * cols + e % cols);
  float4 lo = dst[0], hi = dst[1];
  lo.x += acc[0], lo.y += acc[1], lo.z += acc[2], lo.w += acc[3];
  hi.x += acc[4], hi.y += acc[5], hi.z += acc[6], hi.w += acc[7];
  dst[0] = lo;
  dst[1] = hi;
}

// Workspace layout: [index | sorted tokens | sorted index | CUB temp], each 256-byte aligned.
constexpr std::size_t kAlign = 256;
std::size_t round_up(std::size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

// Radix-sort only the bits a token can use: 16 bits for a 50k vocabulary, two
// 8-bit passes instead of four.
int token_bits(int vocab) {
  return vocab <= 1 ? 1 : std::bit_width(static_cast<unsigned>(vocab - 1));
}

std::size_t cub_sort_bytes(int n, int vocab) {
  std::size_t bytes = 0;
  SEXTANT_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(
      nullptr, bytes, static_cast<const std::uint32_t*>(nullptr),
      static_cast<std::uint32_t*>(nullptr), static_cast<const std::int32_t*>(nullptr),
      static_cast<std::int32_t*>(nullptr), n, 0, token_bits(vocab)));
  return bytes;
}

void check_shape(const char* launcher, int batch, int seq, int cols, const SequencePositions& positions) {
  require_argument(batch >= 0 && seq > 0, launcher,
                   "batch (" + std::to_string(batch) + ") must be >= 0 and seq (" +
                       std::to_string(seq) + ") > 0");
  require_argument(static_cast<std::int64_t>(batch) * seq <= (1LL << 31) - 1, launcher,
                   "batch * seq must fit in int32");
  require_argument(cols > 0 && cols % kBf16PerVector == 0, launcher,
                   "cols (" + std::to_string(cols) +
                       ") must be a positive multiple of 8 (16-byte vector accesses)");
  const std::string problem = sequence_positions_problem(positions, seq);
  require_argument(problem.empty(), launcher, "positions: " + problem);
}

}  // namespace

void embedding_forward(Bf16* out, const std::int32_t* tokens, const Bf16* wte, const Bf16* wpe,
                       int batch, int seq, int cols, cudaStream_t stream, const SequencePositions& positions) {
  constexpr const char* kName = "embedding_forward";
  check_shape(kName, batch, seq, cols, positions);
  require_argument(is_aligned(out, 16) && is_aligned(wte, 16) && is_aligned(wpe, 16), kName,
                   "out, wte and wpe must be 16-byte aligned");
  const std::int64_t vectors = static_cast<std::int64_t>(batch) * seq * cols / kBf16PerVector;
  if (vectors == 0) return;
  embedding_forward_kernel<false><<<static_cast<unsigned>((vectors + kThreads - 1) / kThreads), kThreads,
                                    0, stream>>>(detail::cuda_bf16(out), tokens, detail::cuda_bf16(wte),
                                                 detail::cuda_bf16(wpe), vectors, seq, cols, 0, 0, positions);
  SEXTANT_CHECK_LAUNCH("embedding_forward_kernel");
}

void embedding_forward_shard(Bf16* out, const std::int32_t* tokens, const Bf16* wte_shard,
                             const Bf16* wpe, int batch, int seq, int cols, int vocab_start,
                             int vocab_rows, cudaStream_t stream, const SequencePositions& positions) {
  constexpr const char* kName = "embedding_forward_shard";
  check_shape(kName, batch, seq, cols, positions);
  require_argument(vocab_start >= 0 && vocab_rows > 0, kName, "needs vocab_start >= 0 and vocab_rows > 0");
  require_argument(is_aligned(out, 16) && is_aligned(wte_shard, 16) && is_aligned(wpe, 16), kName,
                   "out, wte_shard and wpe must be 16-byte aligned");
  const std::int64_t vectors = static_cast<std::int64_t>(batch) * seq * cols / kBf16PerVector;
  if (vectors == 0) return;
  embedding_forward_kernel<true><<<static_cast<unsigned>((vectors + kThreads - 1) / kThreads), kThreads,
                                   0, stream>>>(detail::cuda_bf16(out), tokens, detail::cuda_bf16(wte_shard),
                                                detail::cuda_bf16(wpe), vectors, seq, cols, vocab_start,
                                                vocab_rows, positions);
  SEXTANT_CHECK_LAUNCH("embedding_forward_kernel<sharded>");
}

std::size_t embedding_backward_workspace_bytes(int batch, int seq, int vocab) {
  const int n = batch * seq;
  const std::size_t array = round_up(static_cast<std::size_t>(n) * sizeof(std::int32_t));
  return 3 * array + round_up(cub_sort_bytes(n, vocab));
}

namespace {
// embedding_backward for tokens in [0, vocab), of which those >= rows (a
// sharded table's skipped tokens) add nothing.
void embedding_backward_rows(float* dwte, float* dwpe, const Bf16* dout, const std::int32_t* tokens,
                             int batch, int seq, int vocab, int rows, int cols, void* workspace,
                             std::size_t workspace_bytes, cudaStream_t stream, const SequencePositions& positions);
}  // namespace

void embedding_backward(float* dwte, float* dwpe, const Bf16* dout, const std::int32_t* tokens,
                        int batch, int seq, int vocab, int cols, void* workspace,
                        std::size_t workspace_bytes, cudaStream_t stream, const SequencePositions& positions) {
  embedding_backward_rows(dwte, dwpe, dout, tokens, batch, seq, vocab, vocab, cols, workspace,
                          workspace_bytes, stream, positions);
}

namespace {
void embedding_backward_rows(float* dwte, float* dwpe, const Bf16* dout, const std::int32_t* tokens,
                             int batch, int seq, int vocab, int rows, int cols, void* workspace,
                             std::size_t workspace_bytes, cudaStream_t stream, const SequencePositions& positions) {
  constexpr const char* kName = "embedding_backward";
  check_shape(kName, batch, seq, cols, positions);
  require_argument(vocab > 0, kName, "vocab (" + std::to_string(vocab) + ") must be > 0");
  require_argument(is_aligned(dwte, 16) && is_aligned(dwpe, 16) && is_aligned(dout, 16) &&
                       is_aligned(workspace, kAlign),
                   kName, "dwte, dwpe and dout must be 16-byte aligned, workspace 256-byte aligned");
  const int n = batch * seq;
  if (n == 0) return;
  const std::size_t needed = embedding_backward_workspace_bytes(batch, seq, vocab);
  require_argument(workspace_bytes >= needed, kName,
                   "workspace (" + std::to_string(workspace_bytes) + " bytes) is smaller than the " +
                       std::to_string(needed) + " bytes embedding_backward_workspace_bytes asks for");

  if (dwpe != nullptr) {
    const std::int64_t vectors = static_cast<std::int64_t>(seq) * cols / kBf16PerVector;
    embedding_backward_wpe_kernel<<<static_cast<unsigned>((vectors + kThreads - 1) / kThreads),
                                    kThreads, 0, stream>>>(dwpe, detail::cuda_bf16(dout), vectors,
                                                           batch, seq, cols, positions);
    SEXTANT_CHECK_LAUNCH("embedding_backward_wpe_kernel");
  }

  const std::size_t array = round_up(static_cast<std::size_t>(n) * sizeof(std::int32_t));
  auto* base = static_cast<char*>(workspace);
  auto* index = reinterpret_cast<std::int32_t*>(base);
  auto* sorted_tokens = reinterpret_cast<std::uint32_t*>(base + array);
  auto* sorted_index = reinterpret_cast<std::int32_t*>(base + 2 * array);
  void* sort_space = base + 3 * array;
  std::size_t sort_bytes = workspace_bytes - 3 * array;

  iota_kernel<<<(n + kThreads - 1) / kThreads, kThreads, 0, stream>>>(index, n);
  SEXTANT_CHECK_LAUNCH("iota_kernel");
  // Tokens are non-negative, so their bits sort the same as uint32.
  SEXTANT_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(
      sort_space, sort_bytes, reinterpret_cast<const std::uint32_t*>(tokens), sorted_tokens, index,
      sorted_index, n, 0, token_bits(vocab), stream));

  constexpr int kWteThreads = 128;  // 1024 columns per block
  const dim3 grid(n, (cols + kWteThreads * kBf16PerVector - 1) / (kWteThreads * kBf16PerVector));
  embedding_backward_wte_kernel<<<grid, kWteThreads, 0, stream>>>(
      dwte, detail::cuda_bf16(dout), sorted_tokens, sorted_index, n, cols, rows);
  SEXTANT_CHECK_LAUNCH("embedding_backward_wte_kernel");
}
}  // namespace

std::size_t embedding_backward_shard_workspace_bytes(int batch, int seq, int vocab_rows) {
  // The shard's rows of the tokens first, then embedding_backward's workspace
  // for tokens up to vocab_rows (the skipped ones) inclusive.
  const std::size_t rows = round_up(static_cast<std::size_t>(batch) * seq * sizeof(std::int32_t));
  return rows + embedding_backward_workspace_bytes(batch, seq, vocab_rows + 1);
}

void embedding_backward_shard(float* dwte_shard, float* dwpe, const Bf16* dout,
                              const std::int32_t* tokens, int batch, int seq, int vocab_start,
                              int vocab_rows, int cols, void* workspace, std::size_t workspace_bytes,
                              cudaStream_t stream, const SequencePositions& positions) {
  constexpr const char* kName = "embedding_backward_shard";
  check_shape(kName, batch, seq, cols, positions);
  require_argument(vocab_start >= 0 && vocab_rows > 0, kName, "needs vocab_start >= 0 and vocab_rows > 0");
  require_argument(is_aligned(workspace, kAlign), kName, "workspace must be 256-byte aligned");
  const std::size_t needed = embedding_backward_shard_workspace_bytes(batch, seq, vocab_rows);
  require_argument(workspace_bytes >= needed, kName,
                   "workspace (" + std::to_string(workspace_bytes) + " bytes) is smaller than the " +
                       std::to_string(needed) + " bytes embedding_backward_shard_workspace_bytes asks for");
  const int n = batch * seq;
  if (n == 0) return;
  auto* rows = static_cast<std::int32_t*>(workspace);
  const std::size_t rows_bytes = round_up(static_cast<std::size_t>(n) * sizeof(std::int32_t));
  shard_rows_kernel<<<(n + kThreads - 1) / kThreads, kThreads, 0, stream>>>(rows, tokens, n, vocab_start,
                                                                            vocab_rows);
  SEXTANT_CHECK_LAUNCH("shard_rows_kernel");
  // Rows equal to vocab_rows sort last and are skipped by the wte kernel
  // (token >= vocab), so the shard's gradient is exactly its tokens'.
  embedding_backward_rows(dwte_shard, dwpe, dout, rows, batch, seq, vocab_rows + 1, vocab_rows, cols,
                          static_cast<char*>(workspace) + rows_bytes, workspace_bytes - rows_bytes, stream, positions);
}

}  // namespace sextant::kernels
