#include "engine/tensor_parallel/vocab_parallel_cross_entropy.h"

#include "kernels/vocab_parallel_cross_entropy.h"

namespace sextant::engine::tensor_parallel {

void VocabParallelCrossEntropy::forward(float* losses, kernels::Bf16* logits, const std::int32_t* targets,
                                        int rows, int vocab, int vocab_start, float loss_scale,
                                        Collectives& group) {
  const cudaStream_t stream = group.compute_stream();
  const Buffers& b = buffers;
  const auto count = static_cast<std::size_t>(rows);
  kernels::vocab_parallel_row_max(b.row_max_local, logits, rows, vocab, stream);
  group.run([&](comm::Communicator& c) {
    c.all_gather(b.row_max_local, b.row_max_gathered, count, comm::DataType::kFp32);
  });
  kernels::vocab_parallel_partials(b.partials, b.row_max, b.row_max_gathered, group.size(), logits, targets, rows,
                                   vocab, vocab_start, stream);
  group.run([&](comm::Communicator& c) {
    c.all_reduce_sum(b.partials, b.partials, 2 * count, comm::DataType::kFp32);
  });
  kernels::vocab_parallel_loss_and_gradient(losses, logits, logits, b.partials, b.row_max, targets, rows, vocab,
                                            vocab_start, loss_scale, stream);
}

}  // namespace sextant::engine::tensor_parallel
