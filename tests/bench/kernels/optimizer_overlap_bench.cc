// Can the optimizer hide behind the next step's forward? The AdamW update of a
// layer is memory-bound (30 bytes per parameter, ~3 TB/s on an H100); the
// forward's matrix products are compute-bound. This program runs the two side
// by side at a model's shapes (default GPT-1.3B at micro-batch 4) and prints the
// time of each arrangement:
//
//   gemms           the forward's products of every layer, alone (all SMs)
//   adamw           the update of every parameter, alone (full grid, or k blocks)
//   serial          update, then forward: what the engine does today
//   overlap         update of layer i+1 on a second stream while layer i's
//                   products run; layer i's products wait for its update
//                   (events), the second stream at low priority
//   overlap k       the same with the update on k blocks of 1024 threads (k SMs)
//                   and the products' algorithms chosen for the other SMs
//                   (CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET)
//
// The embedding (and layer 0) update runs first on the full grid in every
// arrangement: the forward cannot start without it. Method: buffers from
// cudaMalloc, GEMM operands uniform noise, each arrangement once to warm up
// then `repeats` times between CUDA events on the first stream; the median is
// printed.
//
// Usage: optimizer_overlap_bench [--layers L] [--tokens T] [--hidden C] [--ffn F]
//                                [--vocab V] [--repeats R]
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "kernels/adamw.h"
#include "kernels/cuda_check.h"
#include "kernels/gemm_cublaslt.h"
#include "tests/bench/kernels/device_buffer.h"

namespace sextant::kernels {
namespace {

struct Options {
  long long layers = 24, tokens = 8192, hidden = 2048, ffn = 8192, vocab = 51200;
  int repeats = 5;
};

using bench::Buffer;
using bench::fill_random_bf16;

class Bench {
 public:
  explicit Bench(const Options& o)
      : o_(o),
        layer_params_(12 * o.hidden * o.hidden + 13 * o.hidden),
        embedding_params_(o.vocab * o.hidden),
        params_(embedding_params_ + o.layers * layer_params_),
        x_(2 * o.tokens * std::max(3 * o.hidden, o.ffn)),
        y_(2 * o.tokens * std::max(3 * o.hidden, o.ffn)),
        aux_(2 * o.tokens * o.ffn),
        logits_(2 * o.tokens * o.vocab),
        w_(2 * std::max(3 * o.hidden, o.ffn) * std::max(o.hidden, o.ffn)),
        bias_(2 * std::max(3 * o.hidden, o.ffn)),
        master_(4 * params_), m_(4 * params_), v_(4 * params_), grads_(4 * params_), weights_(2 * params_),
        workspace_(kCublasLtWorkspaceBytes),
        gemm_(workspace_.as<void>(), kCublasLtWorkspaceBytes) {
    fill_random_bf16(x_, static_cast<std::size_t>(o.tokens * std::max(3 * o.hidden, o.ffn)));
    fill_random_bf16(w_, static_cast<std::size_t>(std::max(3 * o.hidden, o.ffn) * std::max(o.hidden, o.ffn)));
    int least = 0, greatest = 0;
    SEXTANT_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    SEXTANT_CUDA_CHECK(cudaStreamCreateWithPriority(&main_, cudaStreamNonBlocking, greatest));
    SEXTANT_CUDA_CHECK(cudaStreamCreateWithPriority(&side_, cudaStreamNonBlocking, least));
    layer_done_.resize(static_cast<std::size_t>(o.layers + 1));
    for (auto& e : layer_done_) SEXTANT_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    SEXTANT_CUDA_CHECK(cudaEventCreate(&begin_));
    SEXTANT_CUDA_CHECK(cudaEventCreate(&end_));
    SEXTANT_CUDA_CHECK(cudaDeviceGetAttribute(&sms_, cudaDevAttrMultiProcessorCount, 0));
  }
  ~Bench() {
    for (auto& e : layer_done_) cudaEventDestroy(e);
    cudaEventDestroy(begin_);
    cudaEventDestroy(end_);
    cudaStreamDestroy(main_);
    cudaStreamDestroy(side_);
  }

  int sms() const { return sms_; }

  // One layer's forward products: qkv + bias, proj + bias, fc1 + bias + GELU
  // (input saved), fc2 + bias.
  void layer_gemms(int sm_target) {
    const int T = static_cast<int>(o_.tokens), C = static_cast<int>(o_.hidden), F = static_cast<int>(o_.ffn);
    auto product = [&](int n, int k, GemmEpilogue epilogue, Bf16* aux) {
      GemmArgs g;
      g.m = T, g.n = n, g.k = k;
      g.a = x_.as<Bf16>(), g.b = w_.as<Bf16>(), g.transpose_b = Transpose::kYes;
      g.c = y_.as<void>();
      g.epilogue = epilogue, g.bias = bias_.as<Bf16>(), g.gelu_input = aux;
      g.sm_count_target = sm_target;
      gemm_.run(g, main_);
    };
    product(3 * C, C, GemmEpilogue::kBias, nullptr);
    product(C, C, GemmEpilogue::kBias, nullptr);
    product(F, C, GemmEpilogue::kBiasGelu, aux_.as<Bf16>());
    product(C, F, GemmEpilogue::kBias, nullptr);
  }

  void lm_head(int sm_target) {
    GemmArgs g;
    g.m = static_cast<int>(o_.tokens), g.n = static_cast<int>(o_.vocab), g.k = static_cast<int>(o_.hidden);
    g.a = x_.as<Bf16>(), g.b = weights_.as<Bf16>(), g.transpose_b = Transpose::kYes;
    g.c = logits_.as<void>();
    g.sm_count_target = sm_target;
    gemm_.run(g, main_);
  }

  // Chunk 0: the embedding and layer 0; chunk i: layer i.
  void update(int chunk, cudaStream_t stream, int max_blocks) {
    const std::size_t first = chunk == 0 ? 0 : static_cast<std::size_t>(embedding_params_ + chunk * layer_params_);
    const std::size_t n = static_cast<std::size_t>(chunk == 0 ? embedding_params_ + layer_params_ : layer_params_);
    AdamWStep s;
    s.learning_rate = 1e-4f, s.weight_decay = 0.1f, s.beta2 = 0.95f, s.step = 10;
    adamw_update(master_.as<float>() + first, weights_.as<Bf16>() + first, m_.as<float>() + first,
                 v_.as<float>() + first, grads_.as<float>() + first, n, s, nullptr, stream, max_blocks);
  }

  enum class Mode { kGemms, kAdamw, kSerial, kOverlap };

  // Queues one arrangement on main_ (and side_, joined back into main_).
  void queue(Mode mode, int side_blocks) {
    const int L = static_cast<int>(o_.layers);
    const int sm_target = side_blocks > 0 ? sms_ - side_blocks : 0;
    switch (mode) {
      case Mode::kGemms:
        for (int i = 0; i < L; ++i) layer_gemms(0);
        lm_head(0);
        return;
      case Mode::kAdamw:
        for (int i = 0; i < L; ++i) update(i, main_, side_blocks);
        return;
      case Mode::kSerial:
        for (int i = 0; i < L; ++i) update(i, main_, 0);
        for (int i = 0; i < L; ++i) layer_gemms(0);
        lm_head(0);
        return;
      case Mode::kOverlap:
        update(0, main_, 0);  // nothing to overlap with yet
        SEXTANT_CUDA_CHECK(cudaEventRecord(layer_done_[0], main_));
        SEXTANT_CUDA_CHECK(cudaStreamWaitEvent(side_, layer_done_[0]));
        for (int i = 1; i < L; ++i) {
          update(i, side_, side_blocks);
          SEXTANT_CUDA_CHECK(cudaEventRecord(layer_done_[static_cast<std::size_t>(i)], side_));
        }
        for (int i = 0; i < L; ++i) {
          if (i > 0) SEXTANT_CUDA_CHECK(cudaStreamWaitEvent(main_, layer_done_[static_cast<std::size_t>(i)]));
          layer_gemms(sm_target);
        }
        lm_head(0);
        return;
    }
  }

  double median_ms(Mode mode, int side_blocks) {
    queue(mode, side_blocks);  // warm-up (and the GEMMs' heuristics)
    SEXTANT_CUDA_CHECK(cudaStreamSynchronize(main_));
    std::vector<float> ms;
    for (int r = 0; r < o_.repeats; ++r) {
      SEXTANT_CUDA_CHECK(cudaEventRecord(begin_, main_));
      queue(mode, side_blocks);
      SEXTANT_CUDA_CHECK(cudaEventRecord(end_, main_));
      SEXTANT_CUDA_CHECK(cudaEventSynchronize(end_));
      float t = 0;
      SEXTANT_CUDA_CHECK(cudaEventElapsedTime(&t, begin_, end_));
      ms.push_back(t);
    }
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
  }

  double update_bytes() const { return 30.0 * static_cast<double>(embedding_params_ + o_.layers * layer_params_); }

 private:
  Options o_;
  long long layer_params_, embedding_params_, params_;
  Buffer x_, y_, aux_, logits_, w_, bias_, master_, m_, v_, grads_, weights_, workspace_;
  CublasLtGemm gemm_;
  cudaStream_t main_ = nullptr, side_ = nullptr;
  std::vector<cudaEvent_t> layer_done_;
  cudaEvent_t begin_ = nullptr, end_ = nullptr;
  int sms_ = 0;
};

void run(const Options& o) {
  Bench bench(o);
  std::printf("optimizer_overlap_bench: layers %lld, tokens %lld, hidden %lld, ffn %lld, vocab %lld, %d SMs, "
              "median of %d\n", o.layers, o.tokens, o.hidden, o.ffn, o.vocab, bench.sms(), o.repeats);
  std::printf("%-34s %10s %10s\n", "arrangement", "ms", "update TB/s");
  const double gemms = bench.median_ms(Bench::Mode::kGemms, 0);
  std::printf("%-34s %10.3f %10s\n", "gemms alone", gemms, "-");
  const double bytes = bench.update_bytes();
  for (int blocks : {0, 8, 16, 24, 32, 48, 64}) {
    const double ms = bench.median_ms(Bench::Mode::kAdamw, blocks);
    const std::string name = blocks == 0 ? "adamw alone, full grid" : "adamw alone, " + std::to_string(blocks) + " blocks";
    std::printf("%-34s %10.3f %10.2f\n", name.c_str(), ms, bytes / (ms * 1e-3) / 1e12);
  }
  const double serial = bench.median_ms(Bench::Mode::kSerial, 0);
  std::printf("%-34s %10.3f %10s\n", "serial (update, then gemms)", serial, "-");
  for (int blocks : {0, 8, 16, 24, 32, 48}) {
    const double ms = bench.median_ms(Bench::Mode::kOverlap, blocks);
    const std::string name = blocks == 0 ? "overlap, full grid, low priority" : "overlap, " + std::to_string(blocks) + " SMs for the update";
    std::printf("%-34s %10.3f   saves %.3f ms of %.3f\n", name.c_str(), ms, serial - ms, serial - gemms);
  }
}

}  // namespace
}  // namespace sextant::kernels

int main(int argc, char** argv) {
  sextant::kernels::Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--layers" && has_value) o.layers = std::atoll(argv[++i]);
    else if (arg == "--tokens" && has_value) o.tokens = std::atoll(argv[++i]);
    else if (arg == "--hidden" && has_value) o.hidden = std::atoll(argv[++i]);
    else if (arg == "--ffn" && has_value) o.ffn = std::atoll(argv[++i]);
    else if (arg == "--vocab" && has_value) o.vocab = std::atoll(argv[++i]);
    else if (arg == "--repeats" && has_value) o.repeats = std::atoi(argv[++i]);
    else {
      std::fprintf(stderr,
                   "usage: %s [--layers L] [--tokens T] [--hidden C] [--ffn F] [--vocab V] [--repeats R]\n",
                   argv[0]);
      return 2;
    }
  }
  try {
    sextant::kernels::run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "optimizer_overlap_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
